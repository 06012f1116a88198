"""SIGKILL a process while it writes an output (issue 46, point 9): the file or set of files
already there stays readable, and the temporary files the killed writer left are removed by
the next write in that folder (only ours: our naming, the writer gone or long stale).

The writer is a real subprocess (``outputs.write_tiles`` on a frame large enough to take a
few seconds); it is killed once the file it writes has bytes on disk, i.e. mid-write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest
import shapely

from parcelsearch import outputs
from parcelsearch.kept_files import STALE_SECONDS

pytestmark = pytest.mark.slow

WRITER = textwrap.dedent(
    """
    import sys
    import geopandas as gpd
    from parcelsearch import outputs

    outputs.write_tiles(gpd.read_parquet(sys.argv[1]), sys.argv[2], force=True)
    """
)
BIG = 100_000  # pieces: a few seconds to write, so the kill lands mid-write


def _tiles(n: int, value: int) -> gpd.GeoDataFrame:
    x = np.arange(n) % 1000 * 0.01
    y = np.arange(n) // 1000 * 0.01
    return gpd.GeoDataFrame(
        {"piece": np.arange(n), "rows": np.full(n, value)},
        geometry=shapely.box(x, y, x + 0.01, y + 0.01),
        crs="EPSG:4326",
    )


def _kill_mid_write(folder: Path, out: Path, tmp_path: Path) -> None:
    """Write ``BIG`` pieces to ``out`` in a subprocess and SIGKILL it once a file of the new
    output (wherever it is written: ``out`` itself or a temporary beside it) has bytes."""
    frame = tmp_path / "big.parquet"
    _tiles(BIG, 2).to_parquet(frame)
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    started = time.time_ns()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(frame), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "the writer never started writing"
            writing = [
                p
                for p in folder.rglob(f"*{out.suffix}")
                if p.is_file()
                and p.stat().st_mtime_ns >= started
                and before.get(p) != p.stat().st_mtime_ns
                and p.stat().st_size > 100_000
            ]
            if writing:
                break
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _ours_left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp." in p.name)


def test_sigkill_mid_shapefile_write_leaves_the_previous_set_readable(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    out = folder / "x.shp"
    outputs.write_tiles(_tiles(50, 1), out)
    previous = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert {".shp", ".shx", ".dbf"} <= {Path(name).suffix for name in previous}

    _kill_mid_write(folder, out, tmp_path)

    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == previous
    kept = gpd.read_file(out)  # readable, and the previous set
    assert len(kept) == 50 and set(kept["rows"]) == {1}
    assert _ours_left(folder)  # the killed writer's temporary folder

    outputs.write_tiles(_tiles(60, 3), out)  # the next write removes it
    assert _ours_left(folder) == []
    assert len(gpd.read_file(out)) == 60


def test_temporary_files_of_a_killed_writer_go_with_the_next_write(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    out = folder / "x.gpkg"
    outputs.write_tiles(_tiles(50, 1), out)
    _kill_mid_write(folder, out, tmp_path)
    left = [p for p in folder.iterdir() if ".tmp." in p.name]
    assert left, "the kill left no temporary file"
    assert len(gpd.read_file(out)) == 50  # the file itself was never touched

    outputs.write_tiles(_tiles(10, 3), folder / "other.gpkg")
    assert all(p.exists() for p in left)  # a writer may still be at work: left alone
    long_ago = time.time() - STALE_SECONDS - 60
    for path in left:
        os.utime(path, (long_ago, long_ago))  # as found by a run some minutes later
    foreign = folder / ".notes-12345678.txt"  # not ours: never touched
    foreign.write_text("mine")
    os.utime(foreign, (long_ago, long_ago))
    outputs.write_tiles(_tiles(10, 3), folder / "other.gpkg")
    assert _ours_left(folder) == [] and foreign.exists()
