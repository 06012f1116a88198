"""SIGKILL the searching process mid-run, rerun: same ``ids`` as an uninterrupted run, and
the service's own request log shows no page paid for twice.

A page can only be lost to a kill in the instant between the service counting it and the
client's cache write returning (it is then, necessarily, fetched again). The kill is
therefore delivered at a moment when no answer is in flight: the process is frozen
(SIGSTOP), the service log is compared with the cache files on disk, and SIGKILL is sent
once every page the service counted is on disk (else the process runs on a few
milliseconds and the check is repeated).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pyarrow.parquet as pq
import pytest
from pandas.testing import assert_frame_equal
from shapely.geometry import box

from parcelsearch import Client, search
from parcelsearch_service import synth

SCRIPT = textwrap.dedent(
    """
    import sys
    import geopandas as gpd
    from parcelsearch import Client, search

    base_url, ca, cache, areas, out = sys.argv[1:]
    # the key from the environment; 10 calls/s: the 64 pages take ~6 s, longer than the
    # test's search for a quiet moment to kill in (at most ~4 s), so the kill lands mid-run
    client = Client(base_url=base_url, ca_bundle=ca, rate=10, cache_dir=cache)
    result = search(gpd.read_parquet(areas), client=client, id_column="area_id",
                    progress=False, workers=8)
    result.ids.to_parquet(out)
    """
)
KILL_AFTER = 15  # pages in the service log before the kill


def _pages(store: Any, name: str) -> list[tuple[str, int]]:
    log = store.requests(name)
    ok = log[log["counted"] & (log["status"] == 200)]
    return list(zip(ok["polygon_sha256"], ok["page"].astype(int), strict=True))


def _settled(store: Any) -> set[tuple[str, int]]:
    """The key's counted pages once the log has stopped growing (0.25 s without change)."""
    seen = set(_pages(store, "killed"))
    for _ in range(40):
        time.sleep(0.25)
        now = set(_pages(store, "killed"))
        if now == seen:
            return now
        seen = now
    raise AssertionError("the service kept counting pages for a frozen process")


def _cached(cache: Path) -> set[tuple[str, int]]:
    """(sha256 of polygon, page) of every page on disk, read without touching the folder."""
    found: set[tuple[str, int]] = set()
    for path in sorted(cache.glob("*.parquet")):
        if path.name.startswith(("seg-", "pages-")):  # a .tmp- file is not a page yet
            try:
                table = pq.read_table(path, columns=["polygon_json", "page"])
            except (OSError, FileNotFoundError):
                continue
            for polygon, page in zip(*table.to_pydict().values(), strict=True):
                found.add((hashlib.sha256(polygon.encode()).hexdigest(), int(page)))
    return found


@pytest.mark.slow
def test_sigkill_mid_run_then_rerun(start_own_service: Any, tmp_path: Path, figures: Any) -> None:
    parcels = synth.large_fabric(6000)
    own = start_own_service(parcels=parcels)
    x0, y0, x1, y1 = parcels.total_bounds
    strips = []  # six areas: three strips over each of the two markets
    for market in parcels["market"].unique():
        mx0, my0, mx1, my1 = parcels[parcels["market"] == market].total_bounds
        step = (my1 - my0) / 3
        strips += [
            box(mx0 - 1e-4, my0 + k * step - 1e-4, mx1 + 1e-4, my0 + (k + 1) * step)
            for k in range(3)
        ]
    areas = gpd.GeoDataFrame(
        {"area_id": [f"strip-{i}" for i in range(6)]}, geometry=strips, crs="EPSG:4326"
    )
    areas_file = tmp_path / "areas.parquet"
    areas.to_parquet(areas_file)
    script = tmp_path / "run_search.py"
    script.write_text(SCRIPT)

    killed = own.keys.create("killed", key_type="production", per_second=50, quota=100_000)
    cache = tmp_path / "cache"
    out = tmp_path / "ids.parquet"
    env = {**os.environ, "PARCELSEARCH_API_KEY": killed, "PYTHONUNBUFFERED": "1"}
    args = [
        sys.executable,
        str(script),
        own.base_url,
        str(own.ca_path),
        str(cache),
        str(areas_file),
        str(out),
    ]

    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(_pages(own.keys, "killed")) < KILL_AFTER:
            assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
            assert time.monotonic() < deadline, "the search did not start"
            time.sleep(0.005)
        for tries in range(1, 60):
            os.kill(proc.pid, signal.SIGSTOP)
            logged = _settled(own.keys)  # answers in flight reach the frozen process
            on_disk = _cached(cache)
            if logged <= on_disk:
                break
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.002 * tries)
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.time()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert logged <= on_disk, "no quiet moment to kill in"
    assert _settled(own.keys) == logged, "the service counted a page after the kill"
    before_kill = len(logged)
    assert not out.exists()

    rerun_at = time.time()
    rerun = subprocess.run(args, env=env, capture_output=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr.decode()[-2000:]
    resumed = pd.read_parquet(out)

    fresh = own.keys.create("uninterrupted", key_type="production", per_second=50, quota=100_000)
    client = Client(
        api_key=fresh,
        base_url=own.base_url,
        ca_bundle=str(own.ca_path),
        rate=40,
        cache_dir=tmp_path / "fresh-cache",
    )
    with client:
        whole = search(areas, client=client, id_column="area_id", progress=False)

    assert_frame_equal(resumed, whole.ids)
    pages = _pages(own.keys, "killed")
    log = own.keys.requests("killed")
    twice = log[log.duplicated(["polygon_sha256", "page"], keep=False) & log["counted"]]
    assert len(pages) == len(set(pages)), (
        f"a page was paid for twice (killed at {killed_at:.3f}, rerun at {rerun_at:.3f}, "
        f"{before_kill} logged, {len(on_disk)} on disk):\n{twice.to_string()}"
    )
    assert set(pages) == set(_pages(own.keys, "uninterrupted"))  # every page, exactly once
    total = len(set(pages))
    assert total >= 40 and KILL_AFTER <= before_kill < total  # the kill landed mid-run
    figures.add("calls counted", "SIGKILL: pages before the kill", before_kill)
    figures.add("calls counted", "SIGKILL: pages after the rerun", total - before_kill)
    figures.add("calls counted", "SIGKILL: pages counted twice", len(pages) - len(set(pages)))
    figures.add("IDs compared", "SIGKILL + rerun vs uninterrupted", len(whole.ids))
    figures.add("faults injected", "SIGKILL of the searching process", 1)
    figures.note(
        f"SIGKILL after {before_kill} of {total} pages; quiet moment found on try "
        f"{tries} (SIGSTOP, log vs cache, SIGCONT)"
    )
