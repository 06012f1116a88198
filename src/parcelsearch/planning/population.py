"""Where people live: the bundled population layer, summed inside the survey's pieces.

Parcels follow housing and housing follows people, so the people inside a piece are a free
guess at its calls that knows where a state's metro counties are (the survey's size measure
:mod:`parcelsearch.planning.survey` may choose it). The layer is the bundled
``population.parquet`` (see ``data/make_population.py``): the GeoNames gazetteer's populated
places of 1,000 people or more (GeoNames, geonames.org, CC BY 4.0), one point a place with
its population. It is read on first use (about 20 ms: three columns) and kept.

Examples
--------
>>> from shapely import box
>>> [int(p) > 100_000 for p in people_in([box(-122.52, 37.70, -122.35, 37.83),
...                                        box(-140.0, 0.0, -139.9, 0.1)])]
[True, False]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq
import shapely

from parcelsearch._shared import data_path

__all__ = ["people_in", "layer"]


@dataclass(frozen=True)
class Layer:
    """The places, sorted by longitude: their longitudes, latitudes and populations."""

    lon: np.ndarray
    lat: np.ndarray
    population: np.ndarray


@functools.cache
def layer() -> Layer:
    """The bundled places, read once (no geometry is built: a piece's places are found by
    its longitudes in the sorted column, then tested against the piece)."""
    table = pq.ParquetFile(data_path("population.parquet")).read()  # no dataset machinery
    return Layer(
        table.column("lon").to_numpy().astype(float),
        table.column("lat").to_numpy().astype(float),
        table.column("population").to_numpy().astype(float),
    )


def people_in(polygons: Sequence[shapely.Geometry]) -> np.ndarray:
    """The people of the places inside each polygon (longitude/latitude); a place on two
    pieces' shared edge counts in each."""
    places = layer()
    people = np.zeros(len(polygons))
    for k, polygon in enumerate(polygons):
        west, south, east, north = shapely.bounds(polygon)
        lo = int(np.searchsorted(places.lon, west, side="left"))
        hi = int(np.searchsorted(places.lon, east, side="right"))
        lat = places.lat[lo:hi]
        near = np.flatnonzero((lat >= south) & (lat <= north))
        if len(near):
            inside = shapely.intersects_xy(polygon, places.lon[lo:hi][near], lat[near])
            people[k] = float(places.population[lo:hi][near][inside].sum())
    return people
