"""Plain recursive halving, the baseline the planner's piece counts are measured against.

What PostGIS ``ST_Subdivide`` does with a vertex cap: each part is halved at the midpoint
of its bounding box's longer side until every piece is one ring that fits the budget; no
merging. It uses the planner's own grid, rings and byte budget, so piece counts compare
like for like. Only the benchmarks use it.
"""

from __future__ import annotations

import numpy as np
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import settings
from parcelsearch.tiling import (
    Budget,
    _finish,
    _grid_line,
    _long_axis,
    _polygons,
    _snap,
    _subdivide,
    _uncuttable,
)

__all__ = ["halving_baseline"]


def _midpoint_cut(polygon: Polygon, budget: Budget) -> tuple[int, float]:
    """Where plain halving cuts: the midpoint of the bounding box's longer side."""
    bounds = np.asarray(polygon.bounds)
    for axis in (_long_axis(bounds), 1 - _long_axis(bounds)):
        at = _grid_line(
            (bounds[axis] + bounds[axis + 2]) / 2, bounds[axis], bounds[axis + 2], set()
        )
        if at is not None:
            return axis, at
    raise _uncuttable(polygon)


def halving_baseline(
    geometry: BaseGeometry,
    *,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
) -> list[Polygon]:
    """Pieces of ``geometry`` by plain recursive halving (canonical rings, sorted).

    Parameters
    ----------
    geometry
        Polygon or MultiPolygon in EPSG:4326.
    max_request_bytes, path
        The request-line budget, as for :func:`parcelsearch.tiling.tile`.
    """
    budget = Budget(max_request_bytes, path)
    pieces: list[Polygon] = []
    for part in _polygons(_snap(geometry)):
        pieces.extend(_subdivide(part, budget, _midpoint_cut, budget.max_request_bytes))
    return _finish(pieces, budget)
