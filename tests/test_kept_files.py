"""Files written whole and never destroyed: the rules and the readers of a file's run."""

from __future__ import annotations

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
