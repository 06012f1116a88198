"""Files written whole and never destroyed: the rules and the readers of a file's run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parcelsearch import formats, kept_files


def test_a_file_of_no_run_is_replaced_only_by_a_complete_result(tmp_path: Path) -> None:
    complete = {"complete": True, "group_ids": 3}
    assert kept_files.replaces(complete, None)
    assert not kept_files.replaces({"complete": False, "group_ids": 3}, None)
    assert not kept_files.replaces({"complete": True, "group_ids": 0}, None)
    assert kept_files.replaces(
        {"complete": True, "group_ids": 0}, {"complete": True, "group_ids": 0}
    )
    (tmp_path / "x.parquet").write_text("not parquet")
    assert formats.file_metadata(tmp_path / "x.parquet") is None


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
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
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
        "x.shp": "new x.shp",
        "x.shx": "new x.shx",
        "x.dbf": "new x.dbf",
    }


def test_a_set_left_mid_write_is_removed_and_a_live_writers_is_not(tmp_path: Path) -> None:
    (tmp_path / "x.shp").write_text("old")
    dead = tmp_path / f".x-{_gone_pid()}-0123abcd.tmp.shp"
    live = tmp_path / f".x-{os.getpid()}-4567abcd.tmp.shp"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "x.shp").write_text("half")  # not marked whole
    assert kept_files.remove_stale(tmp_path) == [dead]
    assert (tmp_path / "x.shp").read_text() == "old" and live.exists()


# -- the one writer ------------------------------------------------------------------------


def test_an_exception_inside_the_writer_leaves_no_temporary_file(tmp_path: Path) -> None:
    """Any exception in ``write`` (not only a failure to write): the old file stays, no
    temporary file beside it, whatever the writer did with the temporary path."""
    out = tmp_path / "profiles.json"
    out.write_text("before")

    def recreates_then_fails(temp: Path) -> None:
        temp.unlink()  # as GDAL does: the file made anew
        temp.write_text("half")
        raise KeyError("a bug in the writer")

    with pytest.raises(KeyError):
        kept_files.atomically(out, recreates_then_fails, mode=0o600)
    with pytest.raises(TypeError):
        kept_files.write_whole(out, "not bytes")  # type: ignore[arg-type]
    assert [p.name for p in tmp_path.iterdir()] == ["profiles.json"]
    assert out.read_text() == "before"


def test_the_mode_holds_even_when_the_writer_makes_the_file_anew(tmp_path: Path) -> None:
    out = tmp_path / "tiles.gpkg"

    def anew(temp: Path) -> None:
        temp.unlink()
        temp.write_text("whole")

    assert kept_files.atomically(out, anew, mode=0o640) == out
    assert out.stat().st_mode & 0o777 == 0o640 and out.read_text() == "whole"
    kept_files.write_whole(out, b"secret")
    assert out.stat().st_mode & 0o777 == 0o600 and out.read_bytes() == b"secret"


def test_stale_temporary_files_of_write_whole_are_removed_by_the_next_write(tmp_path: Path) -> None:
    """A writer killed (kill -9) between making its temporary file and renaming it leaves
    the file; the next write in that folder removes it once older than STALE_SECONDS, in
    this build's names and in those of the ``write_whole`` of earlier builds."""
    out = tmp_path / "profiles.json"
    left = kept_files.temporary_name(out)
    earlier = tmp_path / f".profiles.json-{'ab' * 16}.tmp"
    fresh = kept_files.temporary_name(out)  # a writer at work now: kept
    for path in (left, earlier, fresh):
        path.write_text("half")
    old = time.time() - kept_files.STALE_SECONDS - 60
    for path in (left, earlier):
        os.utime(path, (old, old))
    assert left.name.startswith(".profiles-") and left.name.endswith(".tmp.json")
    kept_files.write_whole(out, b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["profiles.json", fresh.name])


def test_a_killed_write_whole_leaves_a_file_the_next_write_removes(tmp_path: Path) -> None:
    """The real kill: a process killed with SIGKILL inside ``write_whole`` (its data half
    written) leaves its temporary file; the next write, once it is stale, removes it."""
    out = tmp_path / "vendors.json"
    code = (
        "import os, signal, sys\nfrom pathlib import Path\n"
        "from parcelsearch import kept_files\n"
        "def die(temp, handle):\n    handle.write(b'half'); handle.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "kept_files._replace_whole(Path(sys.argv[1]), die, 0o600)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    (left,) = tmp_path.iterdir()
    assert not out.exists() and left.read_bytes() == b"half"
    kept_files.write_whole(out, b"{}")
    assert left.exists()  # a writer may still be at work: kept until stale
    old = time.time() - kept_files.STALE_SECONDS - 60
    os.utime(left, (old, old))
    kept_files.write_whole(out, b"{}")
    assert [p.name for p in tmp_path.iterdir()] == ["vendors.json"]
