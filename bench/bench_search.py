"""End-to-end search benchmark: calls against the parcel floor, pacing, and cache reruns.

Run ``python bench/bench_search.py``. Over a dense synthetic fabric laid under the three
hard study areas of ``bench_tiling`` it prints, side by side in one run:

1. per area and mode (exact, tolerance 5 m, plain halving at the same byte budget): pieces
   and the calls they cost (Σ ⌈rows/100⌉, at least 1 per piece), against the floor
   ⌈parcels/100⌉ and the vertex bound;
2. sustained calls/s and 429s of a real search over HTTPS against a 10/s server;
3. the time of a ≥ 1,000-page rerun served from the cache.

Figures go to the ``search`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path

import geopandas as gpd
import pandas as pd
import shapely

sys.path.insert(0, str(Path(__file__).parent))

from _results import write_section  # noqa: E402
from bench_tiling import hard_areas, piece_counts  # noqa: E402

import parcelsearch  # noqa: E402
from parcelsearch import tiling  # noqa: E402
from parcelsearch.errors import BudgetExhaustedError  # noqa: E402
from parcelsearch.service import synth  # noqa: E402
from parcelsearch.service.server import start_service  # noqa: E402
from parcelsearch.service.store import ParcelStore  # noqa: E402

TOLERANCE = 5.0
PACED_CALLS = 150  # bounded: ~15 s at 10/s


def fabric_under(areas: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """A dense street-and-lot fabric covering each area's bounding box (one grid per area)."""
    specs = []
    for area_id, geom in areas.geometry.items():
        minx, miny, maxx, maxy = geom.bounds
        width = (maxx - minx) * 111_320 * math.cos(math.radians((miny + maxy) / 2))
        height = (maxy - miny) * 110_574
        specs.append(
            synth.MarketSpec(f"{area_id}, TX", minx, miny,
                             blocks_x=int(width / 225) + 2, blocks_y=int(height / 100) + 2)
        )
    return synth.fabric(specs, seed=7)


def calls_for(store: ParcelStore, pieces: list[shapely.Polygon]) -> tuple[int, int]:
    """(calls, matched parcels) the pieces cost: Σ max(1, ⌈rows/100⌉)."""
    calls = rows = 0
    for piece in pieces:
        n = int(shapely.intersects_xy(piece, store.x, store.y).sum())
        calls += max(1, math.ceil(n / 100))
        rows += n
    return calls, rows


def floors_and_calls(areas: gpd.GeoDataFrame, store: ParcelStore) -> pd.DataFrame:
    counts = piece_counts(areas, tolerance=TOLERANCE)
    rows = []
    for area_id, geom in areas.geometry.items():
        parcels = int(shapely.intersects_xy(geom, store.x, store.y).sum())
        row = {"area": area_id, "parcels": parcels, "floor": math.ceil(parcels / 100),
               "vertex_bound": int(counts.loc[area_id, "vertex_bound"])}
        for label, pieces in (
            ("exact", tiling.tile(geom)),
            ("tol5", tiling.tile(geom, tolerance=TOLERANCE)),
            ("halving", tiling.halving_baseline(geom, max_request_bytes=7168)),
        ):
            calls, matched = calls_for(store, pieces)
            row[f"{label}_pieces"] = len(pieces)
            row[f"{label}_calls"] = calls
            if label == "tol5":
                row["tol5_extra_parcels"] = matched - parcels
        row["exact/halving pieces"] = round(row["exact_pieces"] / row["halving_pieces"], 3)
        row["tol5 calls/floor"] = round(row["tol5_calls"] / row["floor"], 3)
        row["exact calls/floor"] = round(row["exact_calls"] / row["floor"], 3)
        rows.append(row)
    return pd.DataFrame(rows).set_index("area")


def paced_run(svc, areas: gpd.GeoDataFrame, workdir: Path) -> dict[str, float]:
    """A real search against a 10/s key: calls/s and 429s over ``PACED_CALLS`` calls."""
    key = svc.keys.create("paced", key_type="production", quota=100_000)
    client = parcelsearch.Client(api_key=key, base_url=svc.base_url, ca_bundle=str(svc.ca_path),
                                 rate=10.0, cache_dir=workdir / "paced-cache")
    cached_plan = parcelsearch.plan(areas.iloc[[0]], TOLERANCE)
    started = time.perf_counter()
    try:
        parcelsearch.search(None, plan=cached_plan, client=client, budget=PACED_CALLS,
                            allow_partial=True, progress=False)
        calls = None
    except BudgetExhaustedError as stop:
        calls = stop.spent
    elapsed = time.perf_counter() - started
    log = svc.keys.requests("paced")
    calls = calls if calls is not None else len(log)
    retried_429 = client.stats.get("retried 429", 0)
    return {"calls": calls, "seconds": round(elapsed, 2),
            "calls_per_s": round((calls - 1) / elapsed, 2) if calls > 1 else 0.0,
            "429s": retried_429, "server_counted": int(log["counted"].sum())}


def cache_rerun(svc, areas: gpd.GeoDataFrame, workdir: Path) -> dict[str, float]:
    """Fill a cache with ≥ 1,000 pages through a fast key, then time reruns from it."""
    key = svc.keys.create("fast", key_type="production", quota=1_000_000, per_second=2_000)
    kwargs = dict(api_key=key, base_url=svc.base_url, ca_bundle=str(svc.ca_path), rate=1_000.0,
                  cache_dir=workdir / "fast-cache")
    first = parcelsearch.search(areas, client=parcelsearch.Client(**kwargs), progress=False)
    pages = first.calls
    client = parcelsearch.Client(**kwargs)  # a fresh client and cache: nothing in memory
    started = time.perf_counter()
    again = parcelsearch.search(areas, client=client, progress=False)
    whole = time.perf_counter() - started
    cached_plan = again.plan
    client = parcelsearch.Client(**kwargs)
    started = time.perf_counter()
    fetch_only = parcelsearch.search(None, plan=cached_plan, client=client, progress=False)
    fetch = time.perf_counter() - started
    assert again.calls == 0 and fetch_only.calls == 0 and again.ids.equals(first.ids)
    return {"pages": pages, "rerun_s": round(whole, 3), "rerun_without_planning_s": round(fetch, 3),
            "ids": len(again.ids)}


def main() -> None:
    areas = hard_areas()
    t0 = time.perf_counter()
    parcels = fabric_under(areas)
    store = ParcelStore(parcels)
    print(f"fabric: {len(parcels):,} parcels in {time.perf_counter() - t0:.1f} s")
    table = floors_and_calls(areas, store)
    print(table.astype(object).T.to_string())
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with start_service(parcels=parcels, keys=workdir / "keys.sqlite",
                           cert_dir=workdir / "certs") as svc:
            paced = paced_run(svc, areas, workdir)
            print("paced:", paced)
            rerun = cache_rerun(svc, areas.iloc[[1]], workdir)
            print("cache:", rerun)
    totals = table[["exact_pieces", "halving_pieces", "tol5_calls", "floor"]].sum()
    markdown = "\n".join([
        f"Dense synthetic fabric: {len(parcels):,} parcels under the three hard areas of "
        "`bench_tiling.py`; request lines ≤ 7,168 bytes. Calls = Σ max(1, ⌈rows/100⌉) "
        "over the pieces (rows counted by the reference service's own store).",
        "",
        "```",
        table.astype(object).T.to_string(),
        "```",
        "",
        f"- exact pieces / halving pieces (all areas): "
        f"{totals['exact_pieces'] / totals['halving_pieces']:.3f} (target ≤ 0.6)",
        f"- tolerance 5 m calls / floor (all areas): "
        f"{totals['tol5_calls'] / totals['floor']:.3f} (target ≤ 1.10)",
        f"- paced search against a 10/s server: {paced['calls']} calls in {paced['seconds']} s "
        f"= {paced['calls_per_s']} calls/s, {paced['429s']} × 429 "
        "(target ≥ 9.5 calls/s, zero 429s)",
        f"- rerun of a {rerun['pages']:,}-page search from the cache: {rerun['rerun_s']} s "
        f"including planning, {rerun['rerun_without_planning_s']} s with the plan given "
        "(target < 1 s)",
    ])
    print(markdown)
    write_section("search", markdown)


if __name__ == "__main__":
    main()
