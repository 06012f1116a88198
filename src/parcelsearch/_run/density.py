"""The price learnt from earlier searches nearby: parcel density without a survey.

Pieces searched completely before (the run history, :meth:`parcelsearch.stores.history.History.
nearby`) tell how many calls a piece of a given area costs where they lie. A piece never
searched, with at least :data:`NEIGHBOURS` such pieces close around it (the farthest of them
within :data:`REACH` of their typical size), costs one call and ``r`` more per m², ``r`` the
ratio of calls beyond the first to area of those nearest pieces (a local ratio estimator:
neighbouring pieces share density). How well that predicts is measured on the earlier pieces
themselves, each predicted from its own nearest others (leave one out): the residuals' spread
and mean give the 95 % interval of the whole, widened by
:data:`parcelsearch.planning.survey.SKEW_MARGIN` and never below one call a piece.

A piece not surrounded (the history does not reach it; the farthest of its neighbours more
than :data:`REACH` times its own width or the earlier pieces' typical one away) is surveyed
as before: the survey is smaller, or none. Earlier pieces are evidence only where they
predict: when their leave-one-out predictions miss by more than the earlier pieces' own
spread (a mean would do better), nothing is learnt and the pieces are surveyed; and a search
never learns from its own pieces (an earlier survey of the same job, whose complete pieces
are its cheap ones: ``parcelsearch._run.search_run``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import shapely

from parcelsearch.planning.survey import SKEW_MARGIN

__all__ = ["Learnt", "learn", "NEIGHBOURS", "REACH", "area_m2"]

#: Earlier pieces a piece's density is learnt from (its nearest), and at least.
NEIGHBOURS = 8
#: The farthest of them at most this many piece widths away (the piece's own or, if
#: smaller, the earlier pieces' median).
REACH = 6.0
#: Earlier pieces needed in all before anything is learnt.
LEAST = 20
#: Earlier pieces whose leave-one-out predictions miss by more than this many times their
#: own variance (a mean does better) are no evidence: nothing is learnt from them.
WORSE = 1.0


@dataclass(frozen=True)
class Learnt:
    """The calls of ``pieces`` pieces never searched (``members``: their indices among
    those given), learnt from ``earlier`` pieces nearby: ``value``, 95 % interval
    ``low``–``high``."""

    value: int
    low: int
    high: int
    pieces: int
    earlier: int
    members: tuple[int, ...] = ()


def area_m2(polygon: shapely.Geometry) -> float:
    """A polygon's area in m² (near enough: degrees² scaled at its latitude)."""
    return float(polygon.area * 111_320.0 * 110_574.0 * math.cos(math.radians(polygon.centroid.y)))


def _centres(polygons: Sequence[shapely.Geometry]) -> np.ndarray:
    """Centroids as an (n, 2) array, longitude scaled to metres-like units at each latitude."""
    xy = shapely.get_coordinates(shapely.centroid(np.asarray(polygons, dtype=object)))
    return np.column_stack([xy[:, 0] * np.cos(np.radians(xy[:, 1])), xy[:, 1]])


def _nearest(
    points: np.ndarray, centres: np.ndarray, k: int, skip_self: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The indices of the ``k`` nearest ``centres`` of each point and the farthest one's
    distance (leaving out the point itself when ``skip_self``)."""
    distances = np.hypot(
        points[:, None, 0] - centres[None, :, 0], points[:, None, 1] - centres[None, :, 1]
    )
    if skip_self:
        np.fill_diagonal(distances, np.inf)
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(distances, order[:, -1:], axis=1)[:, 0]


def _predict(
    order: np.ndarray, areas: np.ndarray, extra: np.ndarray, own: np.ndarray
) -> np.ndarray:
    """Calls of pieces of area ``own``: one and the ratio of their neighbours' calls beyond
    the first (``extra``) to their area."""
    ratio = extra[order].sum(axis=1) / np.maximum(areas[order].sum(axis=1), 1e-9)
    return np.asarray(1.0 + ratio * own)


def learn(
    unknown: Sequence[shapely.Geometry], earlier: Sequence[tuple[shapely.Geometry, int]]
) -> Learnt | None:
    """The calls of the ``unknown`` pieces the ``earlier`` pieces (polygon, calls) surround,
    learnt from them (see the module's docstring); ``None`` when they surround none."""
    if not unknown or len(earlier) < LEAST:
        return None
    polygons = [p for p, _ in earlier]
    calls = np.array([max(1, c) for _, c in earlier], dtype=float)
    areas = np.array([area_m2(p) for p in polygons])
    extra = calls - 1
    centres = _centres(polygons)
    width = float(np.median(np.sqrt(np.asarray(shapely.area(np.asarray(polygons, dtype=object))))))
    k = min(NEIGHBOURS, len(earlier) - 1)
    order, farthest = _nearest(_centres(unknown), centres, k)
    scale = np.maximum(np.sqrt(np.asarray(shapely.area(np.asarray(unknown, dtype=object)))), width)
    near = np.flatnonzero(farthest <= REACH * scale)
    if len(near) == 0:
        return None
    order = order[near]
    own = np.array([area_m2(unknown[int(i)]) for i in near])
    value = float(_predict(order, areas, extra, own).sum())
    # Leave one out: each earlier piece predicted from its nearest others.
    loo, _ = _nearest(centres, centres, k, skip_self=True)
    residuals = calls - _predict(loo, areas, extra, areas)
    if float(np.mean(residuals**2)) > max(float(calls.var()), 0.5) * WORSE:
        return None  # the neighbours predict worse than the earlier pieces' mean: no evidence
    n, m = len(near), len(earlier)
    s2 = max(float(residuals.var(ddof=1)), 0.5)
    bias = float(residuals.mean())
    variance = n * s2 + n * n * (s2 / m + bias * bias)
    half = SKEW_MARGIN * 1.96 * math.sqrt(variance)
    point = max(float(n), value)
    return Learnt(
        value=round(point),
        low=max(n, math.floor(point - half)),
        high=max(n, math.ceil(point + half)),
        pieces=n,
        earlier=m,
        members=tuple(int(i) for i in near),
    )
