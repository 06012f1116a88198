"""Generate ``demo_context.geojson``: the blocks of the demo parcel fabric, for offline maps.

The demo's maps (``parcelsearch demo``, the notebooks) draw these blocks under the study
areas so they read without map tiles: blocks in a pale fill, the streets between them as the
map's background. Each block is the union of its parcels (parcels of one block touch; the
streets keep blocks apart), simplified to half a metre, with coordinates to 5 decimals
(about a metre). Regenerate after the fabric changes::

    python data/make_demo_context.py            # writes data/demo_context.geojson

``tests/maps/test_context.py`` fails when the committed file no longer matches this script.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import geopandas as gpd
import pandas as pd
import shapely

HERE = Path(__file__).resolve().parent
PARCELS = HERE / "demo_parcels.parquet"
OUT = HERE / "demo_context.geojson"
#: Parcels are grown by this much (metres) before the union so shared edges merge cleanly.
GROW_M = 1.0
SIMPLIFY_M = 0.5
DECIMALS = 5


def blocks(parcels: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """One row per block (``market``, ``kind``), EPSG:4326, sorted by market then position."""
    frames = []
    for market, group in parcels.groupby("market", sort=True):
        local = group.to_crs(group.estimate_utm_crs())
        merged = shapely.union_all(local.geometry.buffer(GROW_M, join_style="mitre"))
        parts = gpd.GeoSeries(shapely.get_parts(merged), crs=local.crs)
        shrunk = parts.buffer(-GROW_M, join_style="mitre").simplify(SIMPLIFY_M).to_crs(4326)
        frame = gpd.GeoDataFrame(
            {"market": market, "kind": "block"},
            index=range(len(shrunk)),
            geometry=shrunk.values,
            crs=4326,
        )
        centres = shapely.centroid(parts.values)  # in metres: order north → south, west → east
        frames.append(
            frame.assign(_y=-shapely.get_y(centres), _x=shapely.get_x(centres)).sort_values(
                ["_y", "_x"]
            )
        )
    out = pd.concat(frames, ignore_index=True).drop(columns=["_y", "_x"])
    grid = 10.0**-DECIMALS
    out.geometry = shapely.set_precision(out.geometry.values, grid)
    return gpd.GeoDataFrame(out, geometry="geometry", crs=4326)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="file to write (GeoJSON)")
    args = parser.parse_args(argv)
    frame = blocks(gpd.read_parquet(PARCELS))
    args.out.unlink(missing_ok=True)
    frame.to_file(args.out, driver="GeoJSON", COORDINATE_PRECISION=DECIMALS)
    print(f"{args.out}: {len(frame)} blocks, {args.out.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
