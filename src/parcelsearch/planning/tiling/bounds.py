"""Lower bounds and estimates of the pieces an area needs, far cheaper than tiling it:
what :func:`parcelsearch.planning.plans.suggest_tolerance` uses to skip rungs without tiling them.
"""

from __future__ import annotations

import math

import numpy as np
import shapely
from shapely.geometry.base import BaseGeometry

from parcelsearch import settings
from parcelsearch.planning.tiling.antimeridian import joined_across_180
from parcelsearch.planning.tiling.connectors import (
    MAX_LINK_M,
    link_cos_lat,
    linked_groups,
    reach_groups,
)
from parcelsearch.planning.tiling.covers import M_PER_DEGREE, Frame, check_tolerance
from parcelsearch.planning.tiling.grid import polygons
from parcelsearch.planning.tiling.match_rule import link_limit_m
from parcelsearch.planning.tiling.pieces import TilingMemo
from parcelsearch.planning.tiling.request_budget import Budget

__all__ = ["estimate", "exact_least", "lower_bound", "parts_bound"]

#: Fewest metres in one degree of latitude anywhere on the WGS84 ellipsoid (at the equator:
#: a(1 − e²) × π/180), and fewest in one degree of longitude × cos(latitude) is more (a π/180).
_MIN_M_PER_DEGREE = 110_574.0


def lower_bound(
    geometry: BaseGeometry,
    tolerance: float = 0.0,
    budget: Budget | None = None,
    memo: TilingMemo | None = None,
    match: str = "representative-point",
    connectors: bool = True,
) -> int:
    """Fewest pieces :func:`~parcelsearch.planning.tiling.pieces.tile` could return within
    ``budget``
    (the default :class:`Budget` if None) under the matching rule ``match``: a cheap bound,
    with no tiling. The prepared areas it measures are what tiling starts from, made once
    in ``memo`` when one is given.

    Every vertex of the prepared area lies on some piece, a piece carries at most the
    budget's bytes of vertices, and parts that no chain of links the rule allows joins
    never share a piece (:func:`exact_least`; each part
    alone where no connector may be used). In tolerance mode the pieces are the cover's or
    the exact ones, whichever is better: the smaller bound holds. The default rule allows
    the longest links, so its bound holds under every rule.
    """
    memo = TilingMemo() if memo is None else memo
    budget = Budget() if budget is None else budget

    def least(at: float) -> int:
        link_m = link_limit_m(match, at) if connectors else 0.0
        return exact_least(memo.prepared(geometry, at), budget, True, link_m)[0]

    exact = least(0.0)
    if not check_tolerance(tolerance):
        return exact
    return min(exact, least(tolerance))


def exact_least(
    area: BaseGeometry, budget: Budget, connectors: bool = True, link_m: float = MAX_LINK_M
) -> tuple[int, int]:
    """Fewest pieces :func:`~parcelsearch.planning.tiling.partition.exact_pieces` can give
    ``area``, and fewest request bytes: the vertex bound
    (:meth:`~parcelsearch.planning.tiling.request_budget.Budget.vertex_bound`) of each group of
    parts a chain of links (at most ``link_m`` metres) joins (each part alone without
    ``connectors``), summed: no piece spans two groups."""
    parts = polygons(area)
    groups = (
        reach_groups(parts, link_cos_lat(area), link_m)
        if connectors
        else [[k] for k in range(len(parts))]
    )
    rings = size = 0
    for group in groups:
        found = budget.vertex_bound(shapely.multipolygons([parts[k] for k in group]))
        rings, size = rings + found[0], size + found[1]
    return rings, size


def estimate(
    geometry: BaseGeometry,
    *,
    tolerance: float,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
) -> int:
    """About how many pieces tolerance mode gives: a guess, not a bound.

    The vertex bound of the area simplified by half the tolerance, with no cover made
    (about a sixth of the cost of :func:`lower_bound`). It follows the true bound
    closely where parts stay apart, and overstates it where the cover would join parts
    (nearby ones, or those split at ±180°); it serves to choose which tolerance to check first.
    """
    check_tolerance(tolerance, allow_exact=False)
    frame = Frame.of(geometry)
    # Plain Douglas–Peucker, part by part (parts joined at ±180° touch, and GEOS would mend
    # them into one): a count is all it needs, about ten times faster than keeping topology.
    simple = shapely.get_parts(
        shapely.simplify(
            shapely.get_parts(frame.scaled()), tolerance / 2 / M_PER_DEGREE, preserve_topology=False
        )
    )
    budget = Budget(max_request_bytes, path)
    return budget.vertex_bound(frame.lonlat(shapely.geometrycollections(simple)))[0]


def parts_bound(geometry: BaseGeometry, tolerance: float, link_m: float = MAX_LINK_M) -> int:
    """Fewest parts — so fewest pieces — the area can have in tolerance mode, without a cover.

    Every point of a cover lies within ``tolerance`` metres of the area, so two parts of
    the area end up in one part of the cover only if a chain of parts, each within
    ``2 × tolerance`` of the next on the ground, joins them; and two parts of the cover share
    a piece only through a connector, at most
    :data:`~parcelsearch.planning.tiling.connectors.MAX_LINK_M` long (``link_m``: shorter, or 0,
    where the matching rule limits connectors). The parts are grouped by that
    reach, ``2 × tolerance + link_m`` (measured where a degree is shortest, so the
    reach is never understated; parts split at ±180° are joined first); every group needs
    a piece of its own. Far cheaper
    than :func:`lower_bound` (no cover), and on island groups often as strong.
    """
    check_tolerance(tolerance, allow_exact=False)
    joined, _ = joined_across_180(geometry)
    parts = np.asarray(polygons(joined), dtype=object)
    if len(parts) < 2:
        return len(parts)
    reach = (2 * tolerance + link_m) / _MIN_M_PER_DEGREE
    _, miny, _, maxy = joined.bounds
    c = math.cos(math.radians(min(90.0, max(abs(miny), abs(maxy)) + reach)))
    scaled = shapely.transform(parts, lambda xy: xy * [c, 1.0])
    left, right = shapely.STRtree(scaled).query(scaled, predicate="dwithin", distance=reach)
    return len(linked_groups(len(parts), left.tolist(), right.tolist()))
