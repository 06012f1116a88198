"""Where a search writes is checked before it spends, and a better partial file is never
replaced by a worse one (issue 46, point 9; issue 48, point 4).

Witness: the service's request log (``served``): a refused ``--out`` costs no call.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from _cli import PYTHON, run, served

import parcelsearch


@pytest.fixture
def areas_file(tmp_path: Path) -> Path:
    path = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(path)
    return path


def _meta(path: Path) -> dict:
    return json.loads(pq.read_schema(path).metadata[b"parcelsearch"])


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """``folder`` read-only, for root too (which ignores permission bits): immutable."""
    folder.chmod(0o555)
    immutable = os.geteuid() == 0
    if immutable:
        subprocess.run(["chattr", "+i", str(folder)], check=True)
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def test_out_naming_a_folder_spends_nothing_and_says_so(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    for flag in ("--out", "--out-tiles", "--out-map"):
        argv = ["search", str(areas_file), "--id-column", "area_id", "--quiet"]
        argv += (
            [flag, str(folder)]
            if flag == "--out"
            else ["--out", str(tmp_path / "ids.parquet"), flag, str(folder)]
        )
        code, _, err = run(argv, capsys)
        assert code == 2, err
        assert f"cannot write '{folder}': it is a folder; name a file in it" in err
        assert f"{flag} {folder}/" in err  # the fix, as a flag
        assert ".tmp" not in err and not PYTHON.search(err)
    assert served(service, key) == 0
    assert list(folder.iterdir()) == []


def test_out_in_a_read_only_folder_spends_nothing(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    target = folder / "ids.parquet"
    with _read_only(folder):
        code, _, err = run(
            ["search", str(areas_file), "--id-column", "area_id", "--quiet", "--out", str(target)],
            capsys,
        )
    assert code == 2, err
    assert f"cannot write '{target}'" in err and "--out group_ids.parquet" in err
    assert ".tmp" not in err and not PYTHON.search(err)
    assert served(service, key) == 0  # refused before the first call
    assert list(folder.iterdir()) == []


def test_out_into_a_missing_folder_makes_it(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    target = tmp_path / "no" / "such" / "ids.parquet"
    tiles = tmp_path / "other" / "tiles.shp"
    code, _, err = run(
        [
            "search",
            str(areas_file),
            "--id-column",
            "area_id",
            "--quiet",
            "--out",
            str(target),
            "--out-tiles",
            str(tiles),
        ],
        capsys,
    )
    assert code == 0, err
    assert _meta(target)["complete"] is True and tiles.exists()
    planned = tmp_path / "plans" / "tiles.gpkg"
    code, _, err = run(["plan", str(areas_file), "--out-tiles", str(planned)], capsys)
    assert code == 0 and planned.exists(), err


@pytest.mark.slow
def test_a_worse_partial_run_keeps_the_better_partial_file(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    out = tmp_path / "ids.parquet"
    aside = tmp_path / "ids.partial.parquet"
    base = ["search", str(areas_file), "--id-column", "area_id", "--quiet", "--out", str(out)]
    code, _, err = run(base, capsys)
    assert code == 0, err
    complete = out.read_bytes()

    code, _, err = run([*base, "--refresh", "all", "--budget", "12", "--allow-partial"], capsys)
    assert code == 3, err
    better = _meta(aside)
    assert better["complete"] is False and better["areas_complete"]
    before = aside.read_bytes()

    code, _, err = run([*base, "--refresh", "all", "--budget", "1", "--allow-partial"], capsys)
    assert code == 3, err
    assert out.read_bytes() == complete and aside.read_bytes() == before  # both kept
    assert f"'{aside}' holds a partial result ({len(better['areas_complete'])} area" in err
    assert "this run was not written" in err
