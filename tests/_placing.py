"""Parcels placed millimetres either side of census tracts' boundaries: the boundary-band
test (tests/e2e/test_boundary_band.py) and its benchmark (bench/boundary_band.py) place them
alike."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import geopandas as gpd
import numpy as np
import shapely

#: San Francisco's census tracts (2020).
TRACTS = Path(__file__).resolve().parent / "data" / "sf_tracts_2020.geojson"
#: Side of a parcel's square footprint (degrees, about 0.1 mm): its point is its centre.
SIDE = 1e-9


def placed_across_boundaries(
    tracts: gpd.GeoDataFrame, offsets: Sequence[float], per_ring: int = 60
) -> gpd.GeoDataFrame:
    """Tiny parcels at each of ``offsets`` (metres from the boundary, negative inside the
    tract whose ring is walked) across segment midpoints of every tract's exterior, about
    ``per_ring`` a ring, and one well inside each tract."""
    points = []
    for geom in tracts.geometry:
        for part in shapely.get_parts(geom):
            ring = np.asarray(shapely.orient_polygons(part).exterior.coords)
            step = max(1, (len(ring) - 1) // per_ring)
            for a, b in zip(ring[:-1:step], ring[1::step], strict=False):
                kx = 111_320.0 * math.cos(math.radians(a[1]))  # metres per degree
                ky = 110_574.0
                dx, dy = (b[0] - a[0]) * kx, (b[1] - a[1]) * ky
                length = math.hypot(dx, dy)
                if length < 0.5:
                    continue
                # counter-clockwise exterior: the outward normal is (dy, -dx)
                nx, ny = dy / length, -dx / length
                mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
                points += [(mx + d * nx / kx, my + d * ny / ky) for d in offsets]
    for geom in tracts.geometry:  # and one well inside each tract
        point = geom.representative_point()
        points.append((point.x, point.y))
    xy = np.asarray(points)
    squares = shapely.box(
        xy[:, 0] - SIDE / 2, xy[:, 1] - SIDE / 2, xy[:, 0] + SIDE / 2, xy[:, 1] + SIDE / 2
    )
    n = len(xy)
    return gpd.GeoDataFrame(
        {
            "parcel_id": np.arange(1, n + 1),
            "group_id": [f"{i:017x}" for i in range(1, n + 1)],
            "x": xy[:, 0],
            "y": xy[:, 1],
        },
        geometry=squares,
        crs="EPSG:4326",
    )
