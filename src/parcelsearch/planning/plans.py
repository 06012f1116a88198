"""Plan a search before spending anything: study areas → the pieces that will be sent.

:func:`plan` validates the areas (:mod:`parcelsearch.planning.areas`), tiles each one
(:mod:`parcelsearch.planning.tiling`) and returns a :class:`Plan`: every piece's exact
``searchPolygon`` text, its request-line bytes and the minimum calls the run needs.
Nothing here touches the network.

Examples
--------
>>> from shapely import box
>>> p = plan([box(-97.5, 32.7, -97.4, 32.8)])
>>> p  # doctest: +ELLIPSIS
<Plan: 1 area → 1 piece, at least 1 call (exact; request lines ≤ 7,168 bytes); price: ...>
>>> p.pieces[0].polygon_json
'[[-97.5,32.7],[-97.4,32.7],[-97.4,32.8],[-97.5,32.8],[-97.5,32.7]]'
"""

from __future__ import annotations

import functools
import html
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import pandas as pd
import shapely

from parcelsearch import _wire, settings
from parcelsearch.errors import InputError
from parcelsearch.planning.areas import validate_areas
from parcelsearch.planning.survey import pilot_size
from parcelsearch.planning.tiling.bounds import estimate, exact_least, lower_bound, parts_bound
from parcelsearch.planning.tiling.connectors import MAX_LINK_M
from parcelsearch.planning.tiling.covers import (
    check_tolerance,
    check_tolerance_width,
    tolerance_limit,
)
from parcelsearch.planning.tiling.grid import polygons
from parcelsearch.planning.tiling.match_rule import check_match, link_limit_m
from parcelsearch.planning.tiling.pieces import TilingMemo
from parcelsearch.planning.tiling.request_budget import BUDGET_PAGE, Budget

__all__ = [
    "Piece",
    "Plan",
    "plan",
    "resolve_match",
    "suggest_tolerance",
    "suggests_at_once",
    "tolerance_ceiling",
    "SUGGEST_AT_ONCE_UP_TO",
    "TOLERANCE_LADDER",
]

#: Tolerances (metres) :func:`suggest_tolerance` tries, smallest first.
TOLERANCE_LADDER: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500)
#: Vertices (all areas together) up to which a refused search suggests a tolerance at once.
SUGGEST_AT_ONCE_UP_TO = 2_000


def suggests_at_once(plan: Plan) -> bool:
    """Whether a search refused for ``plan`` names a tolerance that fits at once: only for
    areas of at most :data:`SUGGEST_AT_ONCE_UP_TO` vertices in all, where
    :func:`suggest_tolerance` takes a few milliseconds. For larger areas it covers and tiles
    other tolerances, which costs more than the plan did: the refusal says how to ask for
    it instead (``suggest_tolerance(plan, N)``, ``parcelsearch plan AREAS --max-calls N``)."""
    return (
        int(shapely.get_num_coordinates(plan.areas.geometry.to_numpy()).sum())
        <= SUGGEST_AT_ONCE_UP_TO
    )


@dataclass(frozen=True)
class Piece:
    """One ring to send: a whole request but for its page number.

    Attributes
    ----------
    area_id
        The id of the area the piece belongs to.
    piece_id
        0..n-1 within the area, stable for the same area and settings.
    polygon_json
        The exact ``searchPolygon`` text sent (:func:`parcelsearch._wire.ring_json`).
    geometry
        The ring as a polygon, EPSG:4326, coordinates exactly as sent.
    request_bytes
        Bytes of the request line at page 99999 (the budget's worst case).
    """

    area_id: Hashable
    piece_id: int
    polygon_json: str
    geometry: shapely.Polygon
    request_bytes: int

    @property
    def vertices(self) -> int:
        """Distinct vertices of the ring (the closing vertex not counted twice)."""
        return len(self.geometry.exterior.coords) - 1


class Plan:
    """The pieces a search will send, per area, and the minimum calls they need.

    Attributes
    ----------
    areas
        The validated areas: EPSG:4326, indexed by area id (index name :attr:`id_name`).
    pieces
        Every piece, grouped by area in the areas' order, ``piece_id`` ascending.
    tolerance, max_request_bytes, path, connectors, match
        The settings the plan was made with (``match``: the vendor's matching rule,
        :mod:`parcelsearch.planning.tiling.match_rule`).
    id_name
        Name of the area id (the column name used in outputs).
    memo
        The covers and tilings made for this plan's areas
        (:class:`parcelsearch.planning.tiling.TilingMemo`): the plan's own, and those
        :func:`suggest_tolerance` makes from it, each made once.
    """

    def __init__(
        self,
        areas: gpd.GeoDataFrame,
        pieces: Sequence[Piece],
        *,
        tolerance: float,
        max_request_bytes: int,
        path: str,
        memo: TilingMemo | None = None,
        connectors: bool = True,
        match: str = "unknown",
    ) -> None:
        self.areas = areas
        self.pieces = list(pieces)
        self.tolerance = float(tolerance)
        self.max_request_bytes = int(max_request_bytes)
        self.path = path
        self.id_name = str(areas.index.name)
        self.memo = TilingMemo() if memo is None else memo
        self.connectors = bool(connectors)
        self.match = check_match(match)
        #: The price known without spending, once :func:`parcelsearch.known_price` has read it.
        self.price: Any = None

    @property
    def min_calls(self) -> int:
        """Calls the plan needs at the very least: one per piece (page 1)."""
        return len(self.pieces)

    @property
    def tiles(self) -> gpd.GeoDataFrame:
        """One row per piece: area id, piece id, vertices, request bytes, minimum calls."""
        rows = {
            self.id_name: [p.area_id for p in self.pieces],
            "piece_id": [p.piece_id for p in self.pieces],
            "vertices": [p.vertices for p in self.pieces],
            "request_bytes": [p.request_bytes for p in self.pieces],
            "min_calls": [1] * len(self.pieces),
        }
        frame = pd.DataFrame(rows).astype(
            {
                "piece_id": "int64",
                "vertices": "int64",
                "request_bytes": "int64",
                "min_calls": "int64",
            }
        )
        return gpd.GeoDataFrame(frame, geometry=[p.geometry for p in self.pieces], crs="EPSG:4326")

    def summary(self) -> pd.DataFrame:
        """Per area: parts, holes, vertices, pieces and minimum calls."""
        geoms = self.areas.geometry
        parts = [shapely.get_parts(g) for g in geoms]
        counts = pd.Series([p.area_id for p in self.pieces], dtype=object).value_counts()
        frame = pd.DataFrame(
            {
                "parts": [len(p) for p in parts],
                "holes": [int(shapely.get_num_interior_rings(p).sum()) for p in parts],
                "vertices": [_vertices(p) for p in parts],
                "pieces": [int(counts.get(area_id, 0)) for area_id in self.areas.index],
            },
            index=self.areas.index.copy(),
        )
        frame["min_calls"] = frame["pieces"]
        return frame

    @functools.cached_property
    def point_savings(self) -> int:
        """Calls connectors could save at most if the vendor matched by a point, where the
        rule is not known to be that (0 under ``"representative-point"`` or without
        connectors): for each area of more than one piece and part, its pieces less the
        fewest pieces linked parts could take (the vertex bound of each group of parts
        within :data:`~parcelsearch.planning.tiling.connectors.MAX_LINK_M` of each other, of the
        area
        the pieces tile: :func:`~parcelsearch.planning.tiling.bounds.exact_least`). A bound, not
        a
        tiling: computed on first use, in about the time of reading the parts."""
        if self.match == "representative-point" or not self.connectors:
            return 0
        budget = Budget(self.max_request_bytes, self.path)
        counts = pd.Series([p.area_id for p in self.pieces], dtype=object).value_counts()
        saved = 0
        for area_id, geometry in self.areas.geometry.items():
            pieces = int(counts.get(area_id, 0))
            area = self.memo.prepared(geometry, self.tolerance)
            if pieces > 1 and len(polygons(area)) > 1:
                least = exact_least(area, budget, True, MAX_LINK_M)[0]
                saved += max(0, pieces - least)
        return saved

    def _headline(self) -> str:
        mode = "exact" if not self.tolerance else f"tolerance {self.tolerance:g} m"
        mode += "" if self.connectors else ", no connectors"
        mode += {
            "representative-point": ", matched by a point",
            "intersects": ", matched by footprint",
        }.get(self.match, "")
        areas, pieces = len(self.areas), len(self.pieces)
        saved = self.point_savings
        learn = (
            f"; connectors could save up to {saved:,} call{'s' * (saved != 1)} if the "
            "vendor matches by a point"
            if saved and self.match == "unknown"
            else ""
        )
        return (
            f"{areas:,} area{'s' * (areas != 1)} → {pieces:,} piece{'s' * (pieces != 1)}, "
            f"at least {self.min_calls:,} call{'s' * (self.min_calls != 1)} "
            f"({mode}; request lines ≤ {self.max_request_bytes:,} bytes){learn}"
        )

    def without(self, area_ids: Iterable[Hashable]) -> Plan:
        """The same plan less the given areas and their pieces (nothing is re-planned)."""
        dropped = set(area_ids)
        return Plan(
            self.areas[~self.areas.index.isin(list(dropped))],
            [p for p in self.pieces if p.area_id not in dropped],
            tolerance=self.tolerance,
            max_request_bytes=self.max_request_bytes,
            path=self.path,
            memo=self.memo,
            connectors=self.connectors,
            match=self.match,
        )

    def map(self, **kwargs: Any) -> Any:
        """An ipyleaflet map of the areas and the pieces that will be sent; see
        :func:`parcelsearch.maps.plan_map`."""
        from parcelsearch.maps import plan_map

        return plan_map(self, **kwargs)

    def price_text(self) -> str:
        """The price as the repr and the map show it: :func:`parcelsearch.known_price`'s once read,
        else the minimum and the survey that would price the rest."""
        if self.price is not None:
            return str(self.price.free_line())
        calls = self.min_calls
        return (
            f"price: at least {calls:,} call{'s' * (calls != 1)}; {self._pricing()} "
            "(parcelsearch.known_price(plan) reads what the cache and run history know, "
            "for free)"
        )

    def _pricing(self) -> str:
        """What would price the plan: page 1 of every piece, or a survey of some."""
        calls = self.min_calls
        survey = pilot_size(calls)
        if survey == calls:
            return (
                f"page 1 of every piece ({calls:,} call{'s' * (calls != 1)}) would price it exactly"
            )
        return f"a survey of about {survey:,} calls would price the rest"

    def price_facts(self) -> str:
        """What the repr says of the price after the minimum (the command line's ``plan``
        prints it too): the known price once read, else what would price the rest."""
        return str(self.price.free_line()) if self.price is not None else self._pricing()

    def __repr__(self) -> str:
        # the headline says the minimum already: the repr adds what would price the rest
        return f"<Plan: {self._headline()}; {self.price_facts()}>"

    def _repr_html_(self) -> str:
        table = self.summary().head(50).to_html(border=0)
        more = len(self.areas) - 50
        tail = f"<p>… and {more:,} more areas</p>" if more > 0 else ""
        return (
            f"<div><strong>Plan</strong>: {html.escape(self._headline())}"
            f"<p>{html.escape(self.price_text())}</p>{table}{tail}</div>"
        )


def _vertices(parts: Any) -> int:
    """Distinct vertices of polygons (closing vertices not counted)."""
    rings = shapely.get_rings(parts)
    return int(shapely.get_num_coordinates(rings).sum() - len(rings))


def plan(
    areas: Any,
    tolerance: float = 0.0,
    *,
    id_column: str | None = None,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
    memo: TilingMemo | None = None,
    connectors: bool = True,
    match: str | None = None,
    trust_crs: bool = False,
    trust_tolerance: bool = False,
) -> Plan:
    """The pieces a search of ``areas`` will send, and the minimum calls — zero calls made.

    Parameters
    ----------
    areas
        GeoDataFrame or GeoSeries (any CRS, which must be set), a shapely geometry or a
        list of them (taken as EPSG:4326). See :func:`parcelsearch.planning.areas.validate_areas`.
    tolerance
        0 (default): exact pieces, whose union covers each area (every parcel inside is
        found) and reaches at most two 6-decimal grid steps (2e-6°, about 22 cm) beyond
        it; a pocket sealed off by rounding is never searched. ``t`` metres (≥ 0.5): pieces
        cover each area and stay within ``t`` of it, so fewer pieces are needed; nearby
        parts and fine boundary detail may merge. Where the exact pieces of an area do better
        (fewer pieces and no more bytes, or fewer bytes and no more pieces), they are
        taken, where they are known: an area of one ring whose request fits (its exact
        piece), or exact pieces found in ``memo``. Any other area's tolerance pieces are
        returned unchecked, without making its exact pieces (a coarser tolerance is never
        the slow path). Checked here (:func:`~parcelsearch.planning.tiling.covers.check_tolerance`)
        unless it was already (a :class:`~parcelsearch.planning.tiling.covers.Tolerance`).
    id_column
        Column holding area ids; by default an ``area_id`` column, else the index (see
        :func:`parcelsearch.planning.areas.validate_areas` for the rule).
    max_request_bytes
        Longest request line (``GET <target> HTTP/1.1``) allowed, checked at page 99999.
    path
        The search path the requests go to.
    memo
        Covers and tilings made before for these areas, to reuse (e.g. the ``memo`` of a
        refused plan that :func:`suggest_tolerance` has filled); the plan keeps what it
        makes there. A new one by default.
    connectors
        True (default): parts of an area may share a piece through a connector (fewer
        calls), as ``match`` allows. False: never.
    match
        How the vendor matches parcels to a polygon: ``"unknown"`` (the default, from
        ``settings.options.match`` / ``$PARCELSEARCH_MATCH``), ``"intersects"`` (a parcel
        whose footprint touches it) or ``"representative-point"`` (a parcel whose point lies
        in it). Under the first two no piece reaches more than two grid steps beyond its
        area (exact) or ``t`` metres (tolerance), anywhere: exact mode uses no connector,
        tolerance mode only connectors whose sliver stays within ``t`` of the area. Under
        ``"representative-point"``, parts of an area up to 3 km apart may share a piece
        through a sliver within √2 grid steps of a straight link between them
        (:mod:`parcelsearch.planning.tiling.connectors`); the link may cross land outside the area,
        where a parcel whose representative point lies in the sliver (a few square
        centimetres per hundred metres of link) is matched too.
    trust_crs
        False (default): areas implausible for their declared CRS (degrees in a projected
        CRS, areas outside the region the CRS is meant for) are refused before anything is
        tiled (:func:`parcelsearch.planning.areas.validate_areas`). True: taken as declared.
    trust_tolerance
        False (default): a tolerance over half the widest area's width, or over
        5,000 m, is refused before anything is tiled
        (:func:`parcelsearch.planning.tiling.covers.check_tolerance_width`). True: taken.

    Returns
    -------
    Plan

    Raises
    ------
    InputError
        Areas that cannot be planned (the message names the row), or a bad tolerance
        (also one large against the areas, unless ``trust_tolerance``).
    """
    tolerance = check_tolerance(tolerance)
    match = resolve_match(match)
    memo = TilingMemo() if memo is None else memo
    validated = validate_areas(areas, id_column=id_column, trust_crs=trust_crs)
    if not trust_tolerance:  # before tiling: covers that large take minutes to make
        check_tolerance_width(tolerance, validated.geometry.to_numpy(), list(validated.index))
    pieces: list[Piece] = []
    budget = Budget(max_request_bytes, path)
    for area_id, geometry in validated.geometry.items():  # the tolerance checked once, above
        rings = memo.pieces(geometry, tolerance, budget, connectors, match)
        for piece_id, ring in enumerate(rings):
            text = _wire.ring_json(ring.exterior.coords)
            pieces.append(
                Piece(
                    area_id=area_id,
                    piece_id=piece_id,
                    polygon_json=text,
                    geometry=ring,
                    request_bytes=_wire.search_target_bytes(path, text, BUDGET_PAGE),
                )
            )
    return Plan(
        validated,
        pieces,
        tolerance=tolerance,
        max_request_bytes=max_request_bytes,
        path=path,
        memo=memo,
        connectors=connectors,
        match=match,
    )


def resolve_match(match: str | None) -> str:
    """The matching rule: ``match``, else ``settings.options.match`` (set, or
    ``$PARCELSEARCH_MATCH``, or ``"unknown"``).

    Raises
    ------
    InputError
        ``field="match"``: not one of the rules (the message says where it came from).
    """
    if match is not None:
        return check_match(match)
    value = settings.options.match
    try:
        return check_match("unknown" if value is None else value)
    except InputError as exc:
        source = settings.options.source("match")
        raise InputError(f"{exc.args[0]} (from {source})", field="match", hints=exc.hints) from None


def suggest_tolerance(
    areas: Any, max_calls: int, ladder: Sequence[float] = TOLERANCE_LADDER, **plan_kwargs: Any
) -> float | None:
    """The smallest tolerance whose plan needs at most ``max_calls`` calls.

    Exact mode (0.0) first, then the tolerances of ``ladder`` (metres). Given the
    :class:`Plan` that was refused, nothing it holds is made again: its validated areas
    and settings are used as they are, its own piece count answers for its tolerance, and
    only rungs above that tolerance are tried.

    How, and what it costs: a rung's *lower bounds* need no tiling — the part-count bound
    (:func:`parcelsearch.planning.tiling.parts_bound`: parts of an area farther apart than twice the
    tolerance never share a piece) not even a cover, the vertex bound
    (:func:`parcelsearch.planning.tiling.lower_bound`: bytes of the prepared area's vertices ÷ what
    one request carries, at least one piece a part) the rung's cover, made only while the
    cheap bounds still fit. A rung is tiled only once its lower bounds fit, and its count
    stops as soon as the pieces counted plus the lower bounds of the areas not yet tiled
    pass ``max_calls``. Where to start is chosen by *estimates*
    (:func:`parcelsearch.planning.tiling.estimate`, a sixth of a cover's cost): the smallest rung
    if its estimate fits (a budget a little short of the plan is the common refusal),
    else the first rung whose estimate fits, by bisection. From there it steps down while
    the rung below has lower bounds that fit (an estimate may overstate), then tiles
    upward from the first rung whose lower bounds fit — so only the rungs next to the
    answer get covers.
    Given a :class:`Plan`, every cover and tiling made is kept in its ``memo``
    (:class:`parcelsearch.planning.tiling.TilingMemo`), so planning the suggested tolerance next
    with ``plan(refused.areas, t, memo=refused.memo)`` tiles nothing again; given areas, a
    memo of its own is made and dropped.

    Parameters
    ----------
    areas
        As for :func:`plan`, or the :class:`Plan` that was refused.
    max_calls
        Calls available (a budget or the quota left).
    ladder
        Tolerances to try, in metres.
    **plan_kwargs
        ``id_column``, ``max_request_bytes``, ``path``, ``connectors``, ``match``,
        ``trust_crs``, as for :func:`plan` (taken from the plan when a :class:`Plan` is
        given).

    Returns
    -------
    float or None
        The tolerance of the given plan (0.0 if areas were given) if its plan fits; else
        the first rung above it whose plan fits, tiled upward from the first rung whose
        lower bounds fit (rungs whose bounds pass ``max_calls`` are not tiled); else None.
        Only rungs :func:`plan` takes for these areas are tried (at most half the
        widest area's width: :func:`~parcelsearch.planning.tiling.covers.tolerance_limit`),
        and None at once when ``max_calls`` is below the number of areas (each needs a
        call, whatever the tolerance).

    Notes
    -----
    *Guaranteed:* the tolerance returned is one whose plan *does* fit:
    ``plan(areas, t).min_calls <= max_calls`` (it was counted by the same tiling
    :func:`plan` runs). A refusal never suggests a tolerance that is refused again for the
    same calls.
    """
    if isinstance(areas, Plan):
        known = areas
        geoms = list(known.areas.geometry)
        budget = Budget(known.max_request_bytes, known.path)
        connectors = known.connectors
        match = known.match
        memo = known.memo
        if known.min_calls <= max_calls:
            return known.tolerance
        if max_calls < len(known.areas):  # every area needs a call, whatever the tolerance
            return None
        floor = known.tolerance
    else:
        validated = validate_areas(
            areas,
            id_column=plan_kwargs.pop("id_column", None),
            trust_crs=bool(plan_kwargs.pop("trust_crs", False)),
        )
        plan_kwargs.pop("trust_tolerance", None)
        if max_calls < len(validated):
            return None
        connectors = bool(plan_kwargs.pop("connectors", True))
        match = resolve_match(plan_kwargs.pop("match", None))
        budget = Budget(**plan_kwargs)
        geoms = list(validated.geometry)
        memo = TilingMemo()
        if _fits(geoms, 0.0, max_calls, budget, memo, connectors, match):
            return 0.0
        floor = 0.0
    rungs = sorted({check_tolerance(t) for t in ladder} - {0.0})
    limit = tolerance_limit(geoms)  # a wider one would be refused: never suggested
    rungs = [t for t in rungs if floor < t <= limit]
    if not rungs:
        return None
    bounds = _Bounds(geoms, max_calls, budget, memo, match, connectors)
    first = bounds.first_estimated(rungs)
    while first > 0 and bounds.fit(rungs[first - 1]):  # an estimate may overstate
        first -= 1
    for tolerance in rungs[first:]:
        if bounds.fit(tolerance) and _fits(
            geoms, tolerance, max_calls, budget, memo, connectors, match, bounds
        ):
            return tolerance
    return None


def tolerance_ceiling(plan: Plan, ladder: Sequence[float] = TOLERANCE_LADDER) -> float:
    """The largest tolerance :func:`suggest_tolerance` tries for ``plan``'s areas: the top of
    ``ladder``, or less where :func:`plan` would refuse a wider one
    (:func:`~parcelsearch.planning.tiling.covers.tolerance_limit`)."""
    limit = tolerance_limit(plan.areas.geometry.to_numpy())
    return max([t for t in ladder if t <= limit], default=0.0)


class _Bounds:
    """Lower bounds of the areas' pieces per rung, each computed once per area and rung: the
    part-count bound first (:func:`parcelsearch.planning.tiling.parts_bound`, no cover), then the
    vertex bound (:func:`parcelsearch.planning.tiling.lower_bound`, which makes the rung's
    cover)."""

    def __init__(
        self,
        geoms: list[Any],
        max_calls: int,
        budget: Budget,
        memo: TilingMemo,
        match: str = "representative-point",
        connectors: bool = True,
    ) -> None:
        self.match, self.connectors = match, connectors
        self.geoms = geoms
        self.max_calls = max_calls
        self.budget = budget
        self.memo = memo
        self.known: dict[tuple[int, float], int] = {}
        self.parts: dict[tuple[int, float], int] = {}
        # The most detailed areas first: a rung that does not fit is found out sooner.
        sizes = [int(shapely.get_num_coordinates(g)) for g in geoms]
        self.order = sorted(range(len(geoms)), key=lambda i: -sizes[i])

    def of(self, index: int, tolerance: float) -> int:
        """One area's vertex bound at ``tolerance`` (it makes, and caches, the cover)."""
        key = (index, tolerance)
        if key not in self.known:
            self.known[key] = lower_bound(
                self.geoms[index], tolerance, self.budget, self.memo, self.match, self.connectors
            )
        return self.known[key]

    def cheap(self, index: int, tolerance: float) -> int:
        """The best bound known for one area without making a cover."""
        key = (index, tolerance)
        if key in self.known:
            return self.known[key]
        if key not in self.parts:
            link_m = link_limit_m(self.match, tolerance) if self.connectors else 0.0
            self.parts[key] = parts_bound(self.geoms[index], tolerance, link_m)
        return self.parts[key]

    def fit(self, tolerance: float) -> bool:
        """Whether the Σ of the lower bounds at ``tolerance`` is within the calls: the cheap
        bounds of all areas first, then the vertex bounds, most detailed area first, while
        the bounds made plus the cheap bounds of the rest stay within the calls."""
        cheap = [self.cheap(index, tolerance) for index in self.order]
        left = sum(cheap)
        total = 0
        for index, bound in zip(self.order, cheap, strict=True):
            if total + left > self.max_calls:
                return False
            left -= bound
            total += max(bound, self.of(index, tolerance))
        return total + left <= self.max_calls

    def first_estimated(self, rungs: Sequence[float]) -> int:
        """Index of the first of ``rungs`` (ascending) whose Σ of estimates
        (:func:`parcelsearch.planning.tiling.estimate`, at least the cheap bound) is within the
        calls: the first rung at once (a budget a little short of the plan is the common
        refusal), else by bisection (estimates shrink as the tolerance grows);
        ``len(rungs)`` if none is."""
        if self._estimate_fits(rungs[0]):
            return 0
        low, high = 1, len(rungs)
        while low < high:
            middle = (low + high) // 2
            if self._estimate_fits(rungs[middle]):
                high = middle
            else:
                low = middle + 1
        return low

    def _estimate_fits(self, tolerance: float) -> bool:
        total = 0
        for index in self.order:
            if (index, tolerance) in self.known:
                total += self.known[index, tolerance]
            else:
                total += max(
                    self.cheap(index, tolerance),
                    estimate(
                        self.geoms[index],
                        tolerance=tolerance,
                        max_request_bytes=self.budget.max_request_bytes,
                        path=self.budget.path,
                    ),
                )
            if total > self.max_calls:
                return False
        return True

    def rest(self, indices: Sequence[int], tolerance: float) -> int:
        """Σ of the best bounds known (without a cover) for the areas ``indices``."""
        return sum(self.cheap(i, tolerance) for i in indices)


def _fits(
    geoms: list[Any],
    tolerance: float,
    max_calls: int,
    budget: Budget,
    memo: TilingMemo,
    connectors: bool = True,
    match: str = "unknown",
    bounds: _Bounds | None = None,
) -> bool:
    """Whether the areas' pieces at ``tolerance`` number at most ``max_calls`` in a plan made
    afresh (:meth:`~parcelsearch.planning.tiling.pieces.TilingMemo.afresh`: exact pieces already in
    ``memo`` would only lower the count, so a plan given them fits too): stops as soon as
    the pieces counted plus the known lower bounds of the areas left pass it."""
    total = 0
    for index, geometry in enumerate(geoms):
        total += memo.afresh(geometry, check_tolerance(tolerance), budget, connectors, match)
        left = bounds.rest(range(index + 1, len(geoms)), tolerance) if bounds is not None else 0
        if total + left > max_calls:
            return False
    return True
