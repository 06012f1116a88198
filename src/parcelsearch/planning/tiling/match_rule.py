"""The rule the vendor matches parcels by, and how far a connector's sliver may reach under it.

The spec says search returns the parcels that "fall inside" a polygon, not how. A vendor
may match a parcel by a point of it (``"representative-point"``) or by its footprint
touching the polygon (``"intersects"``); ``"unknown"`` (the default) is either.

- Under ``"representative-point"`` a connector's sliver (:mod:`.connectors`: within √2 grid
  steps of a straight link up to :data:`~parcelsearch.planning.tiling.connectors.MAX_LINK_M` long)
  adds only the parcels whose point lies in the sliver: a few square centimetres per
  hundred metres of link, so connectors are used wherever they save a piece.
- Under ``"intersects"`` or ``"unknown"`` every parcel the sliver touches would be
  matched, so no piece may reach beyond the mode's promise anywhere: exact mode uses no
  connector (a link between two parts runs outside the area, and the promise is two
  grid steps), tolerance ``t`` only connectors whose added sliver lies within ``t`` of the
  area (:class:`SliverReach`; links at most ``2 t`` long).
"""

from __future__ import annotations

import math

import numpy as np
import shapely
from shapely.geometry.base import BaseGeometry

from parcelsearch.errors import Hint, InputError
from parcelsearch.planning.tiling.connectors import MAX_LINK_M
from parcelsearch.planning.tiling.covers import M_PER_DEGREE, Frame
from parcelsearch.planning.tiling.grid import SCALE

__all__ = ["DEFAULT_MATCH", "MATCH_RULES", "SliverReach", "check_match", "link_limit_m"]

#: The rules, by the reference service's names (``serve --match``), and ``"unknown"``.
MATCH_RULES: tuple[str, ...] = ("representative-point", "intersects", "unknown")
#: The rule assumed when none is given: either, so no piece reaches beyond the promise.
DEFAULT_MATCH = "unknown"
#: Metres (at most) a point of a connector's strip lies from its link, and the widest a
#: triangle at its ends is: √2 grid steps, 0.157 m, rounded up for the frame's scale.
_WIDTH_M = 0.2
#: Most samples measured for one connector; a connector needing more is not used.
_MAX_SAMPLES = 256


def check_match(value: object) -> str:
    """The matching rule's name, if it is one of :data:`MATCH_RULES`.

    Raises
    ------
    InputError
        ``field="match"``, naming the rules.
    """
    if isinstance(value, str) and value.strip() in MATCH_RULES:
        return value.strip()
    names = ", ".join(MATCH_RULES)
    raise InputError(
        f"must be one of {names}, got {value!r}",
        field="match",
        hints=[
            Hint(
                "match",
                "representative-point",
                "if the vendor matches parcels by a point, use {knob}",
            )
        ],
    )


def link_limit_m(match: str, tolerance: float) -> float:
    """Longest link (metres) a connector may take under ``match`` at ``tolerance``: 0 means
    no connector (exact mode under a rule that matches footprints, or may)."""
    if match == "representative-point":
        return MAX_LINK_M
    return min(MAX_LINK_M, 2.0 * tolerance)


class SliverReach:
    """Whether what a connector adds lies within ``tolerance`` metres of the area.

    A connector adds the strip along its link ``a → b`` (every point within √2 grid steps,
    at most :data:`_WIDTH_M`, of the link) and two thin triangles, ``a, a', a+1`` along the
    edge ``a → a+1`` it leaves (and ``b-1, b', b`` along ``b-1 → b``): a point of one lies
    within ``(1 - u) ×`` :data:`_WIDTH_M` of the edge's point a fraction ``u`` of the way from
    ``a`` (the triangle narrows to nothing at ``a+1``). Samples are taken along the link and
    both edges, ``spacing`` apart, and each must lie within the tolerance of the area less
    half the spacing and the width there; the distance to a set moves no faster than the
    point, so every added point is then within the tolerance. Distances are measured in
    the cover's scaled degrees (:class:`~parcelsearch.planning.tiling.covers.Frame`, never short of
    the ground distance), to the area the user gave, not to its cover. A connector needing
    more than :data:`_MAX_SAMPLES` samples is not taken.
    """

    def __init__(self, geometry: BaseGeometry, tolerance: float) -> None:
        self.frame = Frame.of(geometry)
        self.area = self.frame.scaled()
        shapely.prepare(self.area)
        self.tolerance = tolerance
        self.spacing_m = tolerance / 16

    def __call__(self, segments: np.ndarray) -> bool:
        """Whether every point added along ``segments`` (``(3, 2, 2)`` grid units: the link
        ``a → b``, then the edges left ``a → a+1`` and ``b-1 → b``) lies within the tolerance
        of the area."""
        ends = segments / SCALE
        ends[2] = ends[2][::-1]  # b → b-1: the triangle is widest at b
        counts = np.ceil(_ground_m(ends) / self.spacing_m).astype(int) + 1
        if counts.sum() > _MAX_SAMPLES:
            return False
        xy, limits = [], []
        for k, ((start, end), count) in enumerate(zip(ends, counts.tolist(), strict=True)):
            u = np.linspace(0.0, 1.0, count)
            xy.append(start + u[:, None] * (end - start))
            half = 0.5 / (count - 1) if count > 1 else 0.0
            width = _WIDTH_M if k == 0 else _WIDTH_M * np.minimum(1.0, 1.0 - u + half)
            limits.append(self.tolerance - self.spacing_m / 2 - width + np.zeros(count))
        points, limit = np.concatenate(xy), np.concatenate(limits)
        if (limit <= 0).any():
            return False
        lon = self.frame.lon0 + (points[:, 0] - self.frame.lon0 + 180.0) % 360.0 - 180.0
        scaled = shapely.points((lon - self.frame.lon0) * self.frame.c, points[:, 1])
        return bool(shapely.dwithin(self.area, scaled, limit / M_PER_DEGREE).all())


def _ground_m(ends: np.ndarray) -> np.ndarray:
    """Metres (at most) of each segment ``(n, 2, 2)`` in degrees."""
    delta = np.abs(ends[:, 1] - ends[:, 0])
    delta[:, 0] = np.minimum(delta[:, 0], 360.0 - delta[:, 0])
    return np.asarray(
        np.hypot(delta[:, 0], delta[:, 1]) * M_PER_DEGREE * (1 + 1e-9) + math.ulp(1.0)
    )
