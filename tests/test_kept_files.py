"""Files written whole and never destroyed: the rules and the readers of a file's run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from parcelsearch import kept_files


def test_a_file_of_no_run_is_replaced_only_by_a_complete_result(tmp_path: Path) -> None:
    complete = {"complete": True, "group_ids": 3}
    assert kept_files.replaces(complete, None)
    assert not kept_files.replaces({"complete": False, "group_ids": 3}, None)
    assert not kept_files.replaces({"complete": True, "group_ids": 0}, None)
    assert kept_files.replaces({"complete": True, "group_ids": 0}, {"complete": True,
                                                                    "group_ids": 0})
    (tmp_path / "x.parquet").write_text("not parquet")
    assert kept_files.file_metadata(tmp_path / "x.parquet") is None


def test_a_partial_run_replaces_only_a_partial_file_of_no_more_areas() -> None:
    two = {"complete": False, "areas_complete": ["a", "b"], "group_ids": 9}
    one = {"complete": False, "areas_complete": ["a"], "group_ids": 4}
    assert kept_files.replaces(two, one) and not kept_files.replaces(one, two)
    assert not kept_files.replaces(two, {"complete": True, "group_ids": 0})


def test_a_failed_write_leaves_the_file_and_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "ids.parquet"
    out.write_text("last month")

    def fails(temp: Path) -> None:
        temp.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        kept_files.atomically(out, fails)
    assert out.read_text() == "last month"
    assert [p.name for p in tmp_path.iterdir()] == ["ids.parquet"]


def test_a_partial_run_with_as_many_areas_and_fewer_group_ids_does_not_replace() -> None:
    more = {"complete": False, "areas_complete": ["a"], "group_ids": 448}
    fewer = {"complete": False, "areas_complete": ["a"], "group_ids": 0}
    assert kept_files.replaces(more, fewer) and not kept_files.replaces(fewer, more)
    assert kept_files.replaces(more, dict(more))  # as complete: replaced


def _gone_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_whole_set_left_mid_move_is_moved_in_by_the_next_write(tmp_path: Path) -> None:
    """A writer killed between its renames: its folder is marked whole, so the next write
    there finishes the move (the set is then the new one throughout, never a mix)."""
    for name in ("x.shp", "x.shx", "x.dbf"):
        (tmp_path / name).write_text(f"old {name}")
    left = tmp_path / f".x-{_gone_pid()}-0123abcd.tmp.shp"
    left.mkdir()
    for name in ("x.shx", "x.dbf"):  # x.shp was moved in before the kill
        (left / name).write_text(f"new {name}")
    (tmp_path / "x.shp").write_text("new x.shp")
    (left / ".whole").touch()
    assert kept_files.remove_stale(tmp_path) == [left]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "x.shp": "new x.shp", "x.shx": "new x.shx", "x.dbf": "new x.dbf"}


def test_a_set_left_mid_write_is_removed_and_a_live_writers_is_not(tmp_path: Path) -> None:
    (tmp_path / "x.shp").write_text("old")
    dead = tmp_path / f".x-{_gone_pid()}-0123abcd.tmp.shp"
    live = tmp_path / f".x-{os.getpid()}-4567abcd.tmp.shp"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "x.shp").write_text("half")  # not marked whole
    assert kept_files.remove_stale(tmp_path) == [dead]
    assert (tmp_path / "x.shp").read_text() == "old" and live.exists()
