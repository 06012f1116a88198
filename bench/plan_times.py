"""Planning CPU seconds of the region city, the island city, the island set, the real
boundaries and the synthetic hard areas, exact and tolerance 5 m.

``python bench/plan_times.py`` plans ``bench_tiling.region_city()``, ``bench_tiling.island_city()``,
``bench_tiling.island_set()``, ``bench_tiling.real_areas()`` and
``bench_tiling.hard_areas()`` (``pip install -e ".[bench]"``) with whichever parcelsearch
is importable and prints the CPU seconds of each plan (``time.process_time``: less noisy
than wall time on a shared machine), pieces and request bytes. To compare two versions,
write the areas once (``--save DIR``) and run each version on them (``--load DIR``),
alternated, in one session.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import geopandas as gpd

import parcelsearch

_NAMES = ("region", "city", "set", "real", "hard")


def _areas(argv: list[str]) -> dict[str, gpd.GeoDataFrame]:
    if argv[:1] == ["--load"]:
        folder = Path(argv[1])
        return {name: gpd.read_parquet(folder / f"{name}.parquet") for name in _NAMES}
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_tiling import hard_areas, island_city, island_set, real_areas, region_city

    found = {"region": region_city(), "city": island_city(), "set": island_set(),
             "real": real_areas(), "hard": hard_areas()}
    if argv[:1] == ["--save"]:
        for name, frame in found.items():
            frame.to_parquet(Path(argv[1]) / f"{name}.parquet")
    return found


def main(argv: list[str]) -> None:
    for name, areas in _areas(argv).items():
        for tolerance in (0.0, 5.0):
            started = time.process_time()
            made = parcelsearch.plan(areas, tolerance)
            seconds = time.process_time() - started
            print(f"{name:5} tolerance {tolerance:g} m: {len(made.pieces):5d} pieces, "
                  f"{sum(p.request_bytes for p in made.pieces):10,} bytes, {seconds:5.1f} s CPU")


if __name__ == "__main__":
    main(sys.argv[1:])
