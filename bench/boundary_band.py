"""How far beyond its area an exact search lists parcels, and how many it marks.

Run ``python bench/boundary_band.py`` (issue 48, point 6). The 24 San Francisco tracts of
``tests/data`` go through a state plane and back (off the 6-decimal grid, as drawn areas
arrive) and are searched exactly on the reference service, twice:

- over parcels placed 1 mm to 30 cm either side of every tract's boundary (40 places a
  ring): rows beyond their tract, the farthest (metres, UTM 10N), how many are marked
  ``may_lie_outside`` and how far the unmarked ones (outside every tract) reach;
- over the synthetic fabric (``parcelsearch_service.synth.fabric_for``): rows whose
  parcel's point lies outside their tract, of them marked, and rows marked though inside.

Also the time the marking takes when every GroupID is listed twice (the tracts searched
under two ids each). Figures go to the ``boundary-band`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))
from _placing import TRACTS, placed_across_boundaries  # noqa: E402
from _results import write_section  # noqa: E402

import parcelsearch  # noqa: E402
from parcelsearch._run import result_frames  # noqa: E402
from parcelsearch_service.synth import fabric_for  # noqa: E402

OFFSETS = tuple(s * d for d in (0.001, 0.01, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30) for s in (-1, 1))


def _search(areas: gpd.GeoDataFrame, parcels: gpd.GeoDataFrame) -> Any:
    with parcelsearch.local_service(parcels=parcels, quota=1_000_000) as client:
        return parcelsearch.search(areas, client=client, progress=False, confirm=True)


def _marks(ids: pd.DataFrame) -> pd.Series:
    return ids.get("may_lie_outside", pd.Series(False, index=ids.index)).astype(bool)


def _beyond(ids: pd.DataFrame, tracts: gpd.GeoDataFrame, points: np.ndarray) -> np.ndarray:
    """Metres each row's parcel point lies beyond its tract (0 inside)."""
    utm = tracts.to_crs(32610).geometry
    projected = gpd.GeoSeries(points, crs=4326).to_crs(32610).values
    return np.array([utm.loc[a].distance(p) for a, p in zip(ids["tract"], projected, strict=True)])


def placed(tracts: gpd.GeoDataFrame) -> list[str]:
    parcels = placed_across_boundaries(tracts, OFFSETS, per_ring=40)
    result = _search(tracts, parcels.drop(columns=["x", "y"]))
    ids = result.ids.merge(parcels[["group_id", "x", "y"]], on="group_id")
    beyond = _beyond(ids, tracts, shapely.points(ids["x"], ids["y"]))
    marked = _marks(ids).to_numpy()
    out = beyond > 0
    return [
        f"| placed 1 mm–30 cm either side | {len(parcels):,} | {len(ids):,} | {out.sum():,} "
        f"| {beyond.max() * 100:.1f} cm | {(out & marked).sum():,} | {(out & ~marked).sum():,} "
        f"({beyond[out & ~marked].max(initial=0) * 100:.1f} cm) | {(~out & marked).sum():,} |"
    ]


def synthetic(tracts: gpd.GeoDataFrame) -> list[str]:
    fabric = fabric_for(tracts)
    result = _search(tracts, fabric)
    points = fabric.assign(point=shapely.point_on_surface(fabric.geometry.values))
    ids = result.ids.assign(marked=_marks(result.ids).to_numpy()).merge(
        points[["group_id", "point"]], on="group_id"
    )
    ids["beyond"] = _beyond(ids, tracts, ids["point"].values)
    rows = ids.groupby(["tract", "group_id"]).agg(
        beyond=("beyond", "min"), marked=("marked", "first")
    )
    out = rows["beyond"] > 0
    return [
        f"| synthetic fabric | {len(fabric):,} | {len(rows):,} | {out.sum():,} "
        f"| {rows['beyond'].max() * 100:.1f} cm | {(out & rows['marked']).sum():,} "
        f"| {(out & ~rows['marked']).sum():,} | {(~out & rows['marked']).sum():,} |"
    ]


def marking_time(tracts: gpd.GeoDataFrame) -> str:
    twice = pd.concat([tracts, tracts.set_axis("b" + tracts.index)])
    original = result_frames._found_in_shared_band
    spent: list[float] = []

    def timed(*args: Any) -> pd.Series:
        start = time.perf_counter()
        out = original(*args)
        spent.append(time.perf_counter() - start)
        return out

    result_frames._found_in_shared_band = timed
    try:
        result = _search(twice, fabric_for(tracts))
    finally:
        result_frames._found_in_shared_band = original
    return (
        f"Marking when every GroupID is listed twice ({len(result.ids):,} rows, "
        f"{int(_marks(result.ids).sum()):,} marked): {spent[0]:.2f} s."
    )


def main() -> None:
    tracts = gpd.read_file(TRACTS).set_index("tract")
    tracts = tracts.to_crs("EPSG:2227").to_crs("EPSG:4326")
    lines = [
        f"Exact search of {len(tracts)} SF tracts (via EPSG:2227); band stated: 22 cm.",
        "",
        "| parcels | placed | rows | rows beyond their tract | farthest | beyond, marked "
        "| beyond, unmarked (farthest) | inside, marked |",
        "|---|---|---|---|---|---|---|---|",
        *placed(tracts),
        *synthetic(tracts),
        "",
        marking_time(tracts),
    ]
    text = "\n".join(lines)
    print(text)
    write_section("boundary-band", text)


if __name__ == "__main__":
    main()
