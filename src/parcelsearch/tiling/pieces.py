"""The pieces of one area — prepared (grown, or covered), then partitioned exactly — and the
memo that keeps them for whoever owns it.

A :class:`TilingMemo` belongs to one owner, a :class:`parcelsearch.planning.Plan`: the
plan's own tilings, and every cover and tiling
:func:`parcelsearch.planning.suggest_tolerance` makes from that plan, are kept in the
plan's memo, so nothing is made twice for it and nothing is kept beyond it (no
process-wide cache).

Examples
--------
>>> from shapely import box
>>> [p.exterior.coords[0] for p in tile(box(-97.5, 32.7, -97.4, 32.8))]
[(-97.5, 32.7)]
"""

from __future__ import annotations

from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import settings
from parcelsearch.tiling.covers import check_tolerance, prepared
from parcelsearch.tiling.partition import exact_least, exact_pieces
from parcelsearch.tiling.request_budget import Budget

__all__ = ["TilingMemo", "tile"]


class TilingMemo:
    """Prepared areas (:func:`parcelsearch.tiling.covers.prepared`: the exact growth or the
    cover) and their pieces, per area and tolerance, kept for their owner's reuse.

    Shapely geometries are immutable and hash by value, so an area is its own key.
    """

    def __init__(self) -> None:
        self._prepared: dict[tuple[BaseGeometry, float], BaseGeometry] = {}
        self._pieces: dict[tuple[BaseGeometry, float, Budget, bool], tuple[Polygon, ...]] = {}

    def prepared(self, geometry: BaseGeometry, tolerance: float) -> BaseGeometry:
        """The area the pieces of ``geometry`` at ``tolerance`` tile, made once."""
        key = (geometry, float(tolerance))
        if key not in self._prepared:
            self._prepared[key] = prepared(geometry, tolerance)
        return self._prepared[key]

    def pieces(self, geometry: BaseGeometry, tolerance: float, budget: Budget,
               connectors: bool = True) -> tuple[Polygon, ...]:
        """The pieces of ``geometry`` at ``tolerance`` within ``budget`` (with or without
        connectors), made once."""
        key = (geometry, float(tolerance), budget, bool(connectors))
        if key not in self._pieces:
            made = exact_pieces(self.prepared(geometry, tolerance), budget, connectors)
            if tolerance and not self._better_than_exact(geometry, made, budget, connectors):
                made = self.pieces(geometry, 0.0, budget, connectors)
            self._pieces[key] = made
        return self._pieces[key]

    def _better_than_exact(self, geometry: BaseGeometry, covering: tuple[Polygon, ...],
                           budget: Budget, connectors: bool) -> bool:
        """Whether tolerance pieces beat the exact ones: no more pieces, no more request
        bytes, and fewer of one. (Exact pieces stay within two grid steps of the area but for
        their connectors, which tolerance pieces have too, so they are tolerance pieces as
        well: tolerance mode never does worse than exact mode.)

        The exact pieces are made only when they are not made already and the exact area's
        lower bounds (:func:`~parcelsearch.tiling.partition.exact_least`: fewest pieces,
        fewest bytes) do not settle it.
        """
        measure = (len(covering), int(budget.polygon_bytes_each(covering).sum()))
        if (geometry, 0.0, budget, bool(connectors)) not in self._pieces:
            least = exact_least(self.prepared(geometry, 0.0), budget, connectors)
            if measure[0] <= least[0] and measure[1] < least[1]:
                return True
        exact = self.pieces(geometry, 0.0, budget, connectors)
        known = (len(exact), int(budget.polygon_bytes_each(exact).sum()))
        return measure[0] <= known[0] and measure[1] <= known[1] and measure != known

    def tolerances(self) -> set[float]:
        """The tolerances something was made at (prepared or tiled)."""
        return {tolerance for _, tolerance in self._prepared}

    def tiled(self, tolerance: float) -> int:
        """How many areas were tiled at ``tolerance``."""
        return sum(1 for _, t, _, _ in self._pieces if t == tolerance)

    def __repr__(self) -> str:
        return (f"<TilingMemo: {len(self._prepared)} prepared areas, "
                f"{len(self._pieces)} tilings>")


def tile(
    geometry: BaseGeometry,
    *,
    tolerance: float = 0.0,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
    memo: TilingMemo | None = None,
    connectors: bool = True,
) -> list[Polygon]:
    """Pieces of one area: single canonical rings whose request lines fit the budget.

    Parameters
    ----------
    geometry
        Polygon or MultiPolygon in EPSG:4326, longitudes in [-180, 180] (as
        :func:`parcelsearch.areas.validate_areas` returns them).
    tolerance
        0 for exact pieces: their union covers the area and reaches at most two grid steps
        (2e-6°) beyond it, with no sealed-off pocket filled (see
        :mod:`parcelsearch.tiling.grid`), but for connectors: parts of the area up to
        :data:`~parcelsearch.tiling.connectors.MAX_LINK_M` apart may share a ring through a
        sliver within √2 grid steps of a straight link between them, which may cross land
        outside the area (:mod:`parcelsearch.tiling.connectors`); ``t`` metres (at least
        :data:`~parcelsearch.tiling.covers.MIN_TOLERANCE`) for pieces that cover the area
        and stay within ``t`` of it (connectors aside, as in exact mode): the pieces of its
        cover when they are fewer or
        shorter than the exact pieces and neither more nor longer, else the exact pieces.
    max_request_bytes, path
        The request-line budget and the search path it is measured on (at page 99999).
    memo
        Where to keep (and find) what is made, for reuse by its owner; none by default.
    connectors
        True (default): parts of the area may share a piece through a connector, as above.
        False: never; the pieces of exact mode then reach at most two grid steps beyond the
        area everywhere, and a piece never spans two parts that the tolerance does not join.

    Returns
    -------
    list of shapely.Polygon
        Canonical pieces (see :func:`~parcelsearch.tiling.grid.canonical_ring`), sorted by
        their first vertex; every coordinate lies in [-180, 180] × [-90, 90], every ring is
        valid and closed.
    """
    value = check_tolerance(tolerance)
    budget = Budget(max_request_bytes, path)
    memo = TilingMemo() if memo is None else memo
    return list(memo.pieces(geometry, value, budget, connectors))
