"""Plain recursive halving, the baseline the planner's piece counts are measured against.

What PostGIS ``ST_Subdivide`` does with a vertex cap: each part is halved at the midpoint
of its bounding box's longer side until every piece is one ring that fits the budget; no
merging. It uses the planner's own grid, canonical rings and byte budget (public names of
:mod:`parcelsearch.planning.tiling`), so piece counts compare like for like. Only the benchmarks
and the tests that compare with it use it; the package never halves.
"""

from __future__ import annotations

import math

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import settings
from parcelsearch.planning.tiling.grid import (
    GRID,
    SCALE,
    canonical_ring,
    polygons,
    snap,
    sorted_pieces,
)
from parcelsearch.planning.tiling.request_budget import Budget

__all__ = ["halving_baseline"]

_MAX_SPLITS = 1_000_000


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
        The request-line budget, as for :func:`parcelsearch.planning.tiling.tile`.
    """
    budget = Budget(max_request_bytes, path)
    pieces: list[Polygon] = []
    for part in polygons(snap(geometry)):
        pieces.extend(_subdivide(part, budget))
    rings = [Polygon(canonical_ring(piece)) for piece in pieces]
    for ring in rings:  # halves of a snapped part are on the grid: rounding changes nothing
        assert ring.is_valid and budget.polygon_bytes(ring) <= budget.max_request_bytes
    return sorted_pieces(rings)


def _subdivide(polygon: Polygon, budget: Budget) -> list[Polygon]:
    """Halve ``polygon`` recursively until every piece is one ring that fits ``budget``."""
    done: list[Polygon] = []
    todo = [polygon]
    for _ in range(_MAX_SPLITS):
        if not todo:
            return done
        piece = todo.pop()
        if budget.fits(piece):
            done.append(piece)
            continue
        todo.extend(reversed(_cut(piece, *_midpoint_cut(piece))))
    raise RuntimeError("halving did not converge")  # a cut always shrinks a piece


def _midpoint_cut(polygon: Polygon) -> tuple[int, float]:
    """Where plain halving cuts: the midpoint of the bounding box's longer side."""
    bounds = np.asarray(polygon.bounds)
    for axis in (_long_axis(bounds), 1 - _long_axis(bounds)):
        at = _grid_line((bounds[axis] + bounds[axis + 2]) / 2, bounds[axis], bounds[axis + 2])
        if at is not None:
            return axis, at
    raise ValueError(f"a piece {polygon.wkt[:80]}... is too small to halve on the grid")


def _long_axis(bounds: np.ndarray) -> int:
    """0 (longitude) or 1 (latitude): the longer side of a bounding box on the ground."""
    minx, miny, maxx, maxy = bounds
    width = (maxx - minx) * math.cos(math.radians((miny + maxy) / 2))
    return 0 if width >= maxy - miny else 1


def _grid_line(target: float, lo: float, hi: float) -> float | None:
    """The grid value strictly inside (lo, hi) nearest ``target`` (None if there is none)."""
    k_lo, k_hi = round(lo * SCALE) + 1, round(hi * SCALE) - 1
    if k_lo > k_hi:
        return None
    return min(max(round(target * SCALE), k_lo), k_hi) / SCALE


def _cut(polygon: Polygon, axis: int, at: float) -> list[Polygon]:
    """The polygons on either side of the line ``x = at`` (axis 0) or ``y = at`` (axis 1)."""
    minx, miny, maxx, maxy = polygon.bounds
    lo, hi = (minx - 1, miny - 1, at, maxy + 1), (at, miny - 1, maxx + 1, maxy + 1)
    if axis == 1:
        lo, hi = (minx - 1, miny - 1, maxx + 1, at), (minx - 1, at, maxx + 1, maxy + 1)
    halves = shapely.intersection(polygon, shapely.box(*np.array([lo, hi]).T), grid_size=GRID)
    return [p for half in halves for p in polygons(shapely.simplify(half, 0.0))]
