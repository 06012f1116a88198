"""How close ``parcels synth``'s estimate is to what it makes, on real boundaries.

Run ``python bench/bench_synth.py`` (``pip install -e ".[bench]"`` first, for the real
boundaries). For the San Francisco census tracts of ``tests/data`` (dense city blocks) and
New Zealand's regional councils of ``nzgeom`` (county- to state-sized, rural by their size)
it prints, per set of areas: the kind of place chosen, the parcels estimated
(:func:`parcelsearch_service.synth.plan_fabric`) and made (:func:`fabric_for`), their ratio,
and the seconds taken. The estimate must be within a quarter of what is made
(``tests/service/test_synth.py`` checks three of these). Regions whose fabric would pass
``--max-parcels`` (1,000,000) are reported as refused, with the estimate.
"""

from __future__ import annotations

import time
from pathlib import Path

import geopandas as gpd

from parcelsearch_service.synth import MAX_PARCELS, fabric_for, plan_fabric

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def area_sets() -> dict[str, gpd.GeoDataFrame]:
    """The sets of real areas measured, by name."""
    tracts = gpd.read_file(DATA / "sf_tracts_2020.geojson")
    sets = {"SF tracts 1-4": tracts.iloc[:4], "SF tracts, all 24": tracts}
    try:
        from nzgeom.regions import NZRegions
    except ImportError:
        print("nzgeom is not installed (pip install -e '.[bench]'): New Zealand regions left out")
        return sets
    regions = NZRegions().gdf
    for name in ("Nelson Region", "Taranaki Region", "Gisborne Region", "Auckland Region"):
        sets[name] = regions[regions.REGC2018_V1_00_NAME == name][["geometry"]]
    return sets


def main() -> None:
    """Print one line per set of areas."""
    print(
        f"{'areas':<20} {'place':<18} {'estimated':>10} {'made':>10} {'made/est':>8} {'seconds':>8}"
    )
    for name, areas in area_sets().items():
        start = time.perf_counter()
        plan = plan_fabric(areas)
        places = ", ".join(f"{k} {n}" for k, n in plan.areas_by_place.items())
        if plan.estimate > MAX_PARCELS:
            print(f"{name:<20} {places:<18} {plan.estimate:>10,.0f} {'refused':>10}")
            continue
        made = len(fabric_for(areas))
        print(
            f"{name:<20} {places:<18} {plan.estimate:>10,.0f} {made:>10,} "
            f"{made / plan.estimate:>8.3f} {time.perf_counter() - start:>8.1f}"
        )


if __name__ == "__main__":
    main()
