"""What the free "far from land" and "far from every market" checks add to planning (issue 49).

``python bench/land_check.py`` times (CPU seconds, ``time.process_time``, median of 5) on
the 24 SF tracts as read (EPSG:4326) and declared in a state plane (EPSG:2227, feet), and
on 3,000 squares of 500 m spread over the United States' land, in web mercator:

- the first use's load of the bundled ``land.parquet`` (once per process);
- :func:`~parcelsearch.planning.areas.validate_areas` with the checks and with
  ``trust_crs=True`` (which skips them), and the land check alone;
- the market check alone (the reference service's 45 markets);
- the land check of 3,000 areas out at sea (the refusal: measured until five are sure).

It prints a table and writes it to the ``land-check`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import geopandas as gpd
import numpy as np
import shapely

from parcelsearch.errors import InputError
from parcelsearch.planning import land
from parcelsearch.planning.areas import validate_areas

HERE = Path(__file__).resolve().parent
TRACTS = HERE.parent / "data" / "sf_tracts_2020.geojson"
MARKETS = (HERE.parent / "data" / "markets.txt").read_text().splitlines()
ROUNDS = 5


def _seconds(work: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _on_land(count: int, seed: int = 1) -> gpd.GeoDataFrame:
    """``count`` squares of 500 m inside the bundled United States' 1:110m land."""
    layer = land._layer()
    usa = shapely.union_all(
        layer.geoms[(layer.kinds == "country") & (layer.names == "United States of America")]
    )
    rng = np.random.default_rng(seed)
    points: list[shapely.Point] = []
    while len(points) < count:
        xs, ys = rng.uniform(-125, -67, 4 * count), rng.uniform(25, 49, 4 * count)
        candidates = shapely.points(xs, ys)
        points += list(candidates[shapely.contains_xy(usa, xs, ys)])
    centres = gpd.GeoSeries(points[:count], crs=4326).to_crs(3857)
    squares = centres.buffer(250, cap_style="square")
    return gpd.GeoDataFrame({"area_id": [f"a{i}" for i in range(count)]}, geometry=squares)


def _refusal(geoms: np.ndarray) -> None:
    try:
        land.check_near_land(geoms, list(range(len(geoms))), "EPSG:3857")
    except InputError:
        return
    raise AssertionError("areas at sea were not refused")


def main() -> int:
    start = time.process_time()
    land._layer()
    load = time.process_time() - start
    read = gpd.read_file(TRACTS)
    tracts = read.to_crs("EPSG:2227")
    spread = _on_land(3_000)
    rows = [f"| load `land.parquet` (once a process) | {load * 1000:.1f} ms | |"]
    for name, areas, ids in (
        ("24 SF tracts (EPSG:4326, as read)", read, "tract"),
        ("24 SF tracts (EPSG:2227)", tracts, "tract"),
        ("3,000 squares over the US (EPSG:3857)", spread, "area_id"),
    ):
        checked = _seconds(lambda a=areas, i=ids: validate_areas(a, id_column=i))
        trusted = _seconds(lambda a=areas, i=ids: validate_areas(a, id_column=i, trust_crs=True))
        lonlat = validate_areas(areas, id_column=ids)
        geoms, names = lonlat.geometry.to_numpy(), list(lonlat.index)
        alone = _seconds(lambda g=geoms, n=names: land.check_near_land(g, n, "x"))
        near_texas = _seconds(lambda g=geoms, n=names: _markets(g, n))
        rows.append(
            f"| {name}: validate_areas, checked / trusted | {checked * 1000:.1f} ms / "
            f"{trusted * 1000:.1f} ms | land check alone {alone * 1000:.1f} ms; "
            f"market check {near_texas * 1000:.1f} ms |"
        )
    rng = np.random.default_rng(2)
    xs, ys = rng.uniform(-30, -15, 3_000), rng.uniform(-40, -20, 3_000)
    sea = shapely.box(xs, ys, xs + 0.005, ys + 0.005)
    refused = _seconds(lambda: _refusal(sea))
    rows.append(f"| 3,000 areas in the South Atlantic: refused | {refused * 1000:.1f} ms | |")
    table = "\n".join(["| case | CPU time (median of 5) | |", "|---|---|---|", *rows])
    print(table)
    sys.path.insert(0, str(HERE))
    from _results import write_section

    write_section(
        "land-check", "## Free land and market checks (`bench/land_check.py`)\n\n" + table + "\n"
    )
    return 0


def _markets(geoms: np.ndarray, names: list[object]) -> None:
    try:
        land.check_near_markets(geoms, names, MARKETS)
    except InputError:
        pass  # SF is refused (no market in CA); the time is what is measured


if __name__ == "__main__":
    sys.exit(main())
