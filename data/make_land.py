"""Generate ``land.parquet``: where land is, coarsely, for the free "far from any land" check.

Three public-domain layers, one row per part (columns ``kind``, ``name``, ``geometry`` as
WKB, EPSG:4326), 1,400 rows, about 100 KB:

- ``country``: the land of Natural Earth's 1:110m countries (public domain; the
  ``naturalearth_lowres`` layer that geopandas <= 0.14 wheels carried), one row per part,
  coordinates to 2 decimals (about a kilometre);
- ``extent``: the boxes of the EPSG database's onshore and island areas of use (``proj.db``,
  shipped with pyproj; EPSG data, free to use) at most 25 square degrees: the islands the
  1:110m layer leaves out (Guam, Bermuda, Pitcairn, Niihau …);
- ``state``: each US state's box in the same database ("USA - Texas"; ``name`` its two-letter
  code): land too (the Keys, the Channel Islands), and where the markets are (a market is
  "City, ST");
- ``capital``: Natural Earth's 1:110m populated places (points): the capitals of island
  states too small for the other two (Tarawa, Funafuti, Majuro …).

Regenerate (``pip download geopandas==0.14.4 --no-deps``, unzip it into ``WHEEL``)::

    python data/make_land.py WHEEL        # writes data/land.parquet

``tests/planning/test_land.py`` checks the file's rows against the EPSG database installed.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path

import geopandas as gpd
import pyarrow as pa
import pyarrow.parquet as pq
import pyproj
import shapely

from parcelsearch.market_list import STATES

HERE = Path(__file__).resolve().parent
OUT = HERE / "land.parquet"
DECIMALS = 2
#: Boxes larger than this (square degrees) are regions, not islands: left out.
MAX_BOX = 25.0


def extents() -> list[tuple[str, str, shapely.Polygon]]:
    """The EPSG database's onshore and island boxes at most :data:`MAX_BOX`, and the US
    states' boxes, sorted by name (boxes across the antimeridian split in two)."""
    database = os.path.join(pyproj.datadir.get_data_dir(), "proj.db")
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT name, south_lat, north_lat, west_lon, east_lon FROM extent "
            "WHERE deprecated = 0 AND name NOT LIKE '%offshore%' AND "
            "(name LIKE '%onshore%' OR name LIKE '%island%' OR name LIKE 'USA - %')"
        ).fetchall()
    boxes = []
    for name, south, north, west, east in sorted(set(rows)):
        state = STATES.get(name.removeprefix("USA - ").removesuffix(" - onshore").casefold())
        parts = [(west, east)] if west <= east else [(west, 180.0), (-180.0, east)]
        size = sum(e - w for w, e in parts) * (north - south)
        if state is None and (
            name.startswith("USA - ") and "onshore" not in name or size > MAX_BOX
        ):
            continue
        kind, label = ("state", state.upper()) if state else ("extent", name)
        boxes += [(kind, label, shapely.box(w, south, e, north)) for w, e in parts]
        if state == "md":  # the District of Columbia has no box of its own: it lies in this one
            boxes += [("state", "DC", shapely.box(west, south, east, north))]
    return boxes


def land(wheel: Path) -> gpd.GeoDataFrame:
    """The three layers as one frame (``kind``, ``name``, geometry), EPSG:4326."""
    datasets = wheel / "geopandas" / "datasets"
    countries = gpd.read_file(datasets / "naturalearth_lowres" / "naturalearth_lowres.shp")
    countries = countries.explode(index_parts=False)
    cities = gpd.read_file(datasets / "naturalearth_cities" / "naturalearth_cities.shp")
    boxes = extents()
    frame = gpd.GeoDataFrame(
        {
            "kind": ["country"] * len(countries)
            + [k for k, _, _ in boxes]
            + ["capital"] * len(cities),
            "name": [*countries["name"], *(n for _, n, _ in boxes), *cities["name"]],
        },
        geometry=[*countries.geometry, *(b for _, _, b in boxes), *cities.geometry],
        crs=4326,
    )
    frame["geometry"] = shapely.set_precision(frame.geometry.to_numpy(), 10.0**-DECIMALS)
    return frame[~frame.geometry.is_empty].reset_index(drop=True)


def write(frame: gpd.GeoDataFrame, path: Path) -> None:
    """Plain Parquet (``kind``, ``name``, ``wkb``): read back without geopandas."""
    table = pa.table(
        {
            "kind": frame["kind"].tolist(),
            "name": frame["name"].tolist(),
            "wkb": shapely.to_wkb(frame.geometry.to_numpy()),
        }
    )
    pq.write_table(table, path, compression="zstd")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path, help="the unzipped geopandas 0.14.4 wheel")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    frame = land(args.wheel)
    write(frame, args.out)
    print(
        f"{len(frame)} rows ({frame['kind'].value_counts().to_dict()}), "
        f"{args.out.stat().st_size:,} bytes -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
