"""The pieces of one area — prepared (grown, or covered), then partitioned exactly — and the
memo that keeps them for whoever owns it.

A :class:`TilingMemo` belongs to one owner, a :class:`parcelsearch.planning.plans.Plan`: the
plan's own tilings, and every cover and tiling
:func:`parcelsearch.planning.plans.suggest_tolerance` makes from that plan, are kept in the
plan's memo, so nothing is made twice for it and nothing is kept beyond it (no
process-wide cache).

Examples
--------
>>> from shapely import box
>>> [p.exterior.coords[0] for p in tile(box(-97.5, 32.7, -97.4, 32.8))]
[(-97.5, 32.7)]
"""

from __future__ import annotations

import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import settings
from parcelsearch.planning.tiling.covers import check_tolerance, prepared
from parcelsearch.planning.tiling.grid import polygons
from parcelsearch.planning.tiling.match_rule import (
    DEFAULT_MATCH,
    SliverReach,
    check_match,
    link_limit_m,
)
from parcelsearch.planning.tiling.partition import exact_pieces
from parcelsearch.planning.tiling.request_budget import Budget

__all__ = ["TilingMemo", "tile"]


class TilingMemo:
    """Prepared areas (:func:`parcelsearch.planning.tiling.covers.prepared`: the exact growth or the
    cover) and their pieces, per area and tolerance, kept for their owner's reuse.

    Shapely geometries are immutable and hash by value, so an area is its own key.
    """

    def __init__(self) -> None:
        self._prepared: dict[tuple[BaseGeometry, float], BaseGeometry] = {}
        self._pieces: dict[tuple[BaseGeometry, float, Budget, bool, bool], tuple[Polygon, ...]] = {}
        self._afresh: dict[tuple[BaseGeometry, float, Budget, bool, bool], int] = {}

    def prepared(self, geometry: BaseGeometry, tolerance: float) -> BaseGeometry:
        """The area the pieces of ``geometry`` at ``tolerance`` tile, made once."""
        key = (geometry, float(tolerance))
        if key not in self._prepared:
            self._prepared[key] = prepared(geometry, tolerance)
        return self._prepared[key]

    def pieces(
        self,
        geometry: BaseGeometry,
        tolerance: float,
        budget: Budget,
        connectors: bool = True,
        match: str = DEFAULT_MATCH,
    ) -> tuple[Polygon, ...]:
        """The pieces of ``geometry`` at ``tolerance`` within ``budget`` (with or without
        connectors, under the matching rule ``match``), made once.

        Tolerance pieces are checked against the exact pieces of the same area where those
        are made already (in this memo) or cheap to make (:func:`_one_request`: one ring
        short enough for one request), and the exact ones taken where they are as few and
        no longer (:func:`_exact_wins`); a larger area's exact pieces are never made for
        the purpose, so that a coarser tolerance is never the slow path."""
        key = self._key(geometry, tolerance, budget, connectors, match)
        if key not in self._pieces:
            point = key[-1]
            link_m = link_limit_m(match, tolerance) if connectors else 0.0
            within = None if point or not link_m else SliverReach(geometry, tolerance)
            made = exact_pieces(
                self.prepared(geometry, tolerance), budget, connectors, link_m=link_m, within=within
            )
            afresh = made
            if tolerance and _one_request(geometry, budget):
                exact = self.pieces(geometry, 0.0, budget, connectors, match)
                made = afresh = exact if _exact_wins(exact, made, budget) else made
            elif tolerance:
                known = self._pieces.get((geometry, 0.0, budget, bool(connectors), point))
                if known is not None and _exact_wins(known, made, budget):
                    made = known
            self._pieces[key] = made
            self._afresh[key] = len(afresh)
        return self._pieces[key]

    def afresh(
        self,
        geometry: BaseGeometry,
        tolerance: float,
        budget: Budget,
        connectors: bool = True,
        match: str = DEFAULT_MATCH,
    ) -> int:
        """How many pieces :meth:`pieces` gives with no exact pieces made before (what a
        plan made afresh, with a memo of its own, counts): never fewer than it gives here,
        made once."""
        self.pieces(geometry, tolerance, budget, connectors, match)
        return self._afresh[self._key(geometry, tolerance, budget, connectors, match)]

    @staticmethod
    def _key(
        geometry: BaseGeometry, tolerance: float, budget: Budget, connectors: bool, match: str
    ) -> tuple[BaseGeometry, float, Budget, bool, bool]:
        point = check_match(match) == "representative-point"
        return (geometry, float(tolerance), budget, bool(connectors), point)

    def has(
        self,
        geometry: BaseGeometry,
        tolerance: float,
        budget: Budget,
        connectors: bool = True,
        match: str = DEFAULT_MATCH,
    ) -> bool:
        """Whether the pieces of ``geometry`` at ``tolerance`` (and these settings) are made."""
        return self._key(geometry, tolerance, budget, connectors, match) in self._pieces

    def tolerances(self) -> set[float]:
        """The tolerances something was made at (prepared or tiled)."""
        return {tolerance for _, tolerance in self._prepared}

    def tiled(self, tolerance: float) -> int:
        """How many areas were tiled at ``tolerance``."""
        return sum(1 for _, t, *_ in self._pieces if t == tolerance)

    def __repr__(self) -> str:
        return f"<TilingMemo: {len(self._prepared)} prepared areas, {len(self._pieces)} tilings>"


def _one_request(geometry: BaseGeometry, budget: Budget) -> bool:
    """Whether ``geometry`` is one ring without holes whose request fits ``budget``: its
    exact pieces are then that ring (grown for rounding), cheap to make whatever they are
    (no more vertices than one request carries), so a tolerance plan checks against them."""
    if shapely.get_num_coordinates(geometry) > budget.max_request_bytes:
        return False
    shapes = polygons(geometry)
    return len(shapes) == 1 and budget.fits(shapes[0])


def _exact_wins(exact: tuple[Polygon, ...], covering: tuple[Polygon, ...], budget: Budget) -> bool:
    """Whether the exact pieces are to be sent instead of the tolerance ones: fewer, or as
    many and no more request bytes in all. (Exact pieces keep every promise tolerance
    pieces make; pieces are calls, so the fewer win, and bytes settle a tie. Taking them
    never makes more pieces, so a plan with exact pieces in its memo never needs more
    calls than one made afresh.)"""
    measure = (len(covering), int(budget.polygon_bytes_each(covering).sum()))
    known = (len(exact), int(budget.polygon_bytes_each(exact).sum()))
    return known <= measure


def tile(
    geometry: BaseGeometry,
    *,
    tolerance: float = 0.0,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
    memo: TilingMemo | None = None,
    connectors: bool = True,
    match: str = DEFAULT_MATCH,
) -> list[Polygon]:
    """Pieces of one area: single canonical rings whose request lines fit the budget.

    Parameters
    ----------
    geometry
        Polygon or MultiPolygon in EPSG:4326, longitudes in [-180, 180] (as
        :func:`parcelsearch.planning.areas.validate_areas` returns them).
    tolerance
        0 for exact pieces: their union covers the area and reaches at most two grid steps
        (2e-6°) beyond it, with no sealed-off pocket filled (see
        :mod:`parcelsearch.planning.tiling.grid`); ``t`` metres (at least
        :data:`~parcelsearch.planning.tiling.covers.MIN_TOLERANCE`) for pieces that cover the area
        and stay within ``t`` of it: the pieces of its cover, or the exact pieces where
        those are fewer, or as many and no longer in all, where they are known: an
        area of one ring whose request fits the budget (its exact piece is that ring), or
        one whose exact pieces are in ``memo`` already (a plan's, or a refused plan's). No
        other area's exact pieces are made to check: its cover's pieces are returned
        unchecked.
    max_request_bytes, path
        The request-line budget and the search path it is measured on (at page 99999).
    memo
        Where to keep (and find) what is made, for reuse by its owner; none by default.
    connectors
        True (default): parts of the area may share a piece through a connector, as
        ``match`` allows. False: never.
    match
        How the vendor matches parcels (:mod:`parcelsearch.planning.tiling.match_rule`).
        ``"unknown"`` (default) and ``"intersects"``: no piece reaches beyond the promise
        of ``tolerance`` anywhere: exact mode uses no connector, tolerance ``t`` only those
        whose sliver lies within ``t`` of the area. ``"representative-point"``: parts up
        to :data:`~parcelsearch.planning.tiling.connectors.MAX_LINK_M` apart may share a ring
        through a sliver within √2 grid steps of a straight link between them, which may
        cross land outside the area (:mod:`parcelsearch.planning.tiling.connectors`): a parcel
        whose point lies in the sliver is matched.

    Returns
    -------
    list of shapely.Polygon
        Canonical pieces (see :func:`~parcelsearch.planning.tiling.grid.canonical_ring`), sorted by
        their first vertex; every coordinate lies in [-180, 180] × [-90, 90], every ring is
        valid and closed.
    """
    value = check_tolerance(tolerance)
    budget = Budget(max_request_bytes, path)
    memo = TilingMemo() if memo is None else memo
    return list(memo.pieces(geometry, value, budget, connectors, match))
