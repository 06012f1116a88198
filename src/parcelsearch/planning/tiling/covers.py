"""Tolerance mode: covers that are simpler than an area and stay within t metres of it, the
one check of a tolerance, and the area the pieces tile (:func:`prepared`).

``tolerance=t`` metres first replaces the area by a *cover* (:func:`cover`): holes every
point of which lies within ``t`` of the area are filled, the area is buffered out by t/2
(merging parts and closing gaps narrower than ``t``), simplified with a tolerance that keeps
the area covered (straight segments with free vertices,
:mod:`parcelsearch.planning.tiling.line_fitting`,
or Douglas–Peucker), then tiled exactly. Pieces then cover the whole area and no covered point
lies more than ``t`` metres from it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import shapely
from shapely.errors import GEOSException
from shapely.geometry.base import BaseGeometry

from parcelsearch.errors import Hint, InputError
from parcelsearch.planning.tiling.antimeridian import joined_across_180, split_antimeridian
from parcelsearch.planning.tiling.grid import clamped, grow_for_rounding, polygons, snap
from parcelsearch.planning.tiling.line_fitting import fitted

__all__ = [
    "M_PER_DEGREE",
    "MIN_TOLERANCE",
    "MAX_TOLERANCE",
    "MAX_TOLERANCE_SHARE",
    "Frame",
    "Tolerance",
    "check_tolerance",
    "check_tolerance_width",
    "tolerance_limit",
    "widths_m",
    "cover",
    "prepared",
]

#: Smallest non-zero tolerance in metres: rounding to 6 decimals moves a vertex ≤ 0.08 m.
MIN_TOLERANCE = 0.5
_ROUNDING_M = 0.1  # metres one 6-decimal rounding can move a vertex (≤ 0.079 m), rounded up
#: Share of the tolerance a detailed area is simplified by before it is buffered (:func:`_grown`).
_PRESIMPLIFY = 0.02
#: Upper bound of the metres in one degree of latitude, or of longitude × cos(latitude),
#: anywhere on the WGS84 ellipsoid (111,694 m: a degree of latitude at the poles).
M_PER_DEGREE = 111_700.0


class Tolerance(float):
    """A tolerance in metres that passed :func:`check_tolerance` (made only by it): the edge
    where a tolerance is given (``--tolerance``, :class:`~parcelsearch.SearchOptions`,
    :func:`~parcelsearch.planning.plans.plan`) checks it once, and the layers inside take the
    checked value as it is. A float in every other way (its repr, sums and comparisons)."""

    __slots__ = ()


def check_tolerance(tolerance: object, *, allow_exact: bool = True) -> Tolerance:
    """The tolerance in metres, checked: 0 (exact, where allowed) or at least
    :data:`MIN_TOLERANCE` — the one check of a tolerance, wherever it is given. A
    :class:`Tolerance` (checked already) is returned as it is (but 0 where exact is not
    allowed is refused as any 0).

    Raises
    ------
    InputError
        ``field="tolerance"``; the message reads after the option's name in either dialect
        (``argument --tolerance: must be …``), and its hint names the knob in both.
    """
    if isinstance(tolerance, Tolerance) and (tolerance or allow_exact):
        return tolerance
    try:
        value = float(tolerance)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _refused(f"takes a number of metres, got {tolerance!r}") from None
    shown = tolerance if isinstance(tolerance, str) else repr(tolerance)
    if not (math.isfinite(value) and value >= 0):
        raise _refused(f"must be at least 0, got {shown}")
    if value >= MIN_TOLERANCE or (value == 0 and allow_exact):
        return Tolerance(value)
    exact = "0 for exact pieces or " if allow_exact else ""
    raise _refused(
        f"must be {exact}at least {MIN_TOLERANCE:g} metres (coordinates are sent rounded to "
        f"6 decimals, about 0.1 m), got {shown}"
    )


#: Largest tolerance, in metres, taken whatever the areas (unless trusted): ten times the top
#: of the ladder a refusal suggests from.
MAX_TOLERANCE = 5_000.0
#: Largest share of the widest area's width a tolerance may be (unless trusted).
MAX_TOLERANCE_SHARE = 0.5
#: Metres in a degree of latitude, and of longitude at the equator (for widths, not bounds).
_M_PER_DEGREE_MEAN = 111_195.0


def widths_m(geoms: Sequence[BaseGeometry] | np.ndarray) -> np.ndarray:
    """Each area's width in metres: the longer side of its bounding box (EPSG:4326), a
    degree of longitude scaled by the cosine of the box's middle latitude."""
    bounds = shapely.bounds(np.asarray(geoms, dtype=object)).reshape(-1, 4)
    middle = np.radians((bounds[:, 1] + bounds[:, 3]) / 2)
    wide = (bounds[:, 2] - bounds[:, 0]) * np.cos(middle)
    tall = bounds[:, 3] - bounds[:, 1]
    return np.asarray(np.maximum(wide, tall) * _M_PER_DEGREE_MEAN, dtype=float)


def tolerance_limit(geoms: Sequence[BaseGeometry] | np.ndarray) -> float:
    """The largest tolerance (metres) :func:`check_tolerance_width` takes for these areas:
    :data:`MAX_TOLERANCE_SHARE` of the widest area's width, at most :data:`MAX_TOLERANCE`."""
    widths = widths_m(geoms)
    widest = float(widths.max()) if len(widths) else 0.0
    return min(MAX_TOLERANCE, MAX_TOLERANCE_SHARE * widest)


def check_tolerance_width(
    tolerance: float, geoms: Sequence[BaseGeometry] | np.ndarray, ids: Sequence[Hashable]
) -> None:
    """Refuse a tolerance that is large against the areas (EPSG:4326): more than
    :data:`MAX_TOLERANCE_SHARE` of the widest area's width, or more than
    :data:`MAX_TOLERANCE` metres. Checked before anything is tiled: pieces reaching that far
    outside the areas match parcels far away, pages that cost calls, and covers that large
    are slow to make.

    Raises
    ------
    InputError
        ``field="tolerance"``: the tolerance in metres and as a share of the widest area's
        width (named), the largest tolerance taken, and the override
        (``trust_tolerance=True`` / ``--trust-tolerance``).
    """
    if tolerance <= 0 or len(geoms) == 0:
        return
    limit = tolerance_limit(geoms)
    if tolerance <= limit:
        return
    widths = widths_m(geoms)
    widest = int(np.argmax(widths))
    width = float(widths[widest])
    share = f"{100 * tolerance / width:,.0f} %" if width > 0 else "many times"
    beyond = (
        f"more than {MAX_TOLERANCE:,.0f} m in any case"
        if limit == MAX_TOLERANCE
        else f"more than {100 * MAX_TOLERANCE_SHARE:g} % of it"
    )
    hints = [Hint("trust_tolerance", None, "if you mean it, pass {knob}")]
    if limit >= MIN_TOLERANCE:
        hints.insert(0, Hint("tolerance", f"{_round_down(limit):g}", "use at most {knob}"))
    raise InputError(
        f"a tolerance of {tolerance:,.6g} m is {share} of the width of the widest area "
        f"({ids[widest]!r}, {_distance(width)} wide), {beyond}: pieces would reach that far "
        "outside the areas and match parcels there, whose pages cost calls; nothing was "
        "planned or spent",
        row=ids[widest],
        field="tolerance",
        hints=hints,
    )


def _round_down(metres: float) -> float:
    """``metres`` rounded down to two significant figures (at least :data:`MIN_TOLERANCE`)."""
    scale = 10 ** max(0, math.floor(math.log10(metres)) - 1)
    return max(MIN_TOLERANCE, float(math.floor(metres / scale) * scale))


def _distance(metres: float) -> str:
    return f"{metres / 1000:,.1f} km" if metres >= 1000 else f"{metres:,.0f} m"


def _refused(message: str) -> InputError:
    return InputError(
        message, field="tolerance", hints=[Hint("tolerance", 0, "use {knob} for exact pieces")]
    )


def prepared(geometry: BaseGeometry, tolerance: float) -> BaseGeometry:
    """The area the pieces will tile exactly: grown (or covered), clipped, on the grid."""
    if check_tolerance(tolerance):
        return _covering(geometry, tolerance)[1]
    return snap(clamped(grow_for_rounding(geometry)))


def cover(geometry: BaseGeometry, tolerance: float) -> BaseGeometry:
    """A simpler area that covers ``geometry`` and stays within ``tolerance`` metres of it.

    Parameters
    ----------
    geometry
        Polygon or MultiPolygon in EPSG:4326 (longitudes in [-180, 180]).
    tolerance
        Metres, at least :data:`MIN_TOLERANCE`.

    Returns
    -------
    Polygon or MultiPolygon
        In EPSG:4326, split at the antimeridian if it crosses it, clipped to ±90°
        latitude. Every point of ``geometry`` is inside; every point inside is within
        ``tolerance`` metres of ``geometry`` on the ground (0.1 m is reserved for rounding
        to 6 decimals).

    Notes
    -----
    How it is made and why it holds: ``docs/guide/planning.md``, "How a tolerance cover is made".
    """
    return _covering(geometry, tolerance)[0]


def _covering(geometry: BaseGeometry, tolerance: float) -> tuple[BaseGeometry, BaseGeometry]:
    """:func:`cover`, and the cover clipped to the world and snapped to the grid (what the
    covering check has snapped already, so :func:`prepared` need not snap it again)."""
    check_tolerance(tolerance, allow_exact=False)
    frame = Frame.of(geometry)
    metre = 1.0 / M_PER_DEGREE
    area = _fill_narrow_holes(frame.scaled(), (tolerance - _ROUNDING_M) * metre)
    grown, spent = _grown(area, tolerance / 2 * metre, _PRESIMPLIFY * tolerance * metre)
    distance = (0.49 * tolerance - _ROUNDING_M) * metre - 2 * spent
    for simple in _simpler(grown, [distance, (0.24 * tolerance - _ROUNDING_M) * metre]):
        result = _back_to_lonlat(frame.lonlat(simple), frame.lon0)
        snapped = snap(clamped(result))
        if shapely.covers(snapped, geometry):
            return result, snapped
    # Only where clipping at a pole or rounding bites does the cover lose some of the area.
    result = shapely.union(result, clamped(grow_for_rounding(geometry)))
    return result, snap(clamped(result))


def _grown(area: BaseGeometry, distance: float, simplify_by: float) -> tuple[BaseGeometry, float]:
    """``area`` buffered by ``distance`` (4 segments a quarter circle), and by how much the
    area was simplified first (0 or ``simplify_by``).

    Where the distance is large against the area's detail, GEOS spends most of a buffer's
    time noding offset curves of vertices the buffer then swallows. There the area is first
    simplified by ``simplify_by`` (:func:`_presimplified`: every part's rings within that
    distance of the part's, both ways) and buffered by ``distance + simplify_by``, which
    still holds all of the area; it reaches ``2 × simplify_by`` farther than the area's
    buffer at most, which the caller takes from its simplification. Used only where the
    simplification keeps at most half the vertices, tried only where ``simplify_by`` is at
    least a tenth of the mean edge (figures: ``docs/guide/planning.md``, "Figures behind
    these choices").
    """
    vertices = shapely.get_num_coordinates(area)
    if simplify_by > 0 and simplify_by * 10 * vertices >= shapely.length(area):
        simpler = _presimplified(area, simplify_by)
        if 2 * shapely.get_num_coordinates(simpler) <= vertices:
            return shapely.buffer(simpler, distance + simplify_by, quad_segs=4), simplify_by
    return shapely.buffer(area, distance, quad_segs=4), 0.0


def _presimplified(area: BaseGeometry, distance: float) -> BaseGeometry:
    """A valid area whose parts are ``area``'s simplified within ``distance``, both ways.

    Plain Douglas–Peucker (:func:`_douglas_peucker`) of the whole area where that is valid;
    else part by part: parts simplified apart may overlap (an island off a bay whose shore
    the simplification straightens), which only their union resolves. A part whose plain
    simplification is not valid gets the topology-preserving kind, or stays as it is where
    that is not valid either. Each part's simplification is within ``distance`` of the part
    both ways (:func:`cover`'s notes), so their union is within it of the area's.
    """
    simpler = _douglas_peucker(area, distance, preserve_topology=False)
    if shapely.is_valid(simpler):
        return simpler
    parts, simple = polygons(area), polygons(simpler)
    if len(parts) != len(simple):  # pragma: no cover - _douglas_peucker keeps every part
        return area
    made = [
        new if shapely.is_valid(new) else _kept(old, distance)
        for old, new in zip(parts, simple, strict=True)
    ]
    try:
        return shapely.union_all(made)
    except GEOSException:  # pragma: no cover - valid parts union cleanly
        return area


def _kept(part: shapely.Polygon, distance: float) -> BaseGeometry:
    """``part`` simplified within ``distance`` keeping its topology, or as it is where
    that is not valid."""
    kept = _douglas_peucker(part, distance, preserve_topology=True)
    return kept if shapely.is_valid(kept) else part


def _simpler(grown: BaseGeometry, by: list[float]) -> Iterator[BaseGeometry]:
    """Simplifications of the buffer ``grown`` to try in turn, each within its distance of
    ``by``, then ``grown`` itself.

    First the fitted one (:func:`~parcelsearch.planning.tiling.line_fitting.fitted`, free vertices
    within ``by[0]``; a ring it would make cross itself is Douglas–Peucker's instead), if
    it is valid (then it lies within ``by[0]`` of ``grown``: see :func:`cover`); then
    plain Douglas–Peucker (Hausdorff, both ways:
    :func:`_douglas_peucker`; faster than keeping topology; used only where it stays
    valid), then the topology-preserving kind at each
    distance."""
    if by and by[0] > 0:
        fast = functools.cache(lambda: _douglas_peucker(grown, by[0], preserve_topology=False))
        free = _fitted(grown, by[0], fast)
        if shapely.is_valid(free):
            yield free
        if shapely.is_valid(fast()):
            yield fast()
    for distance in by:
        if distance > 0:
            kept = _douglas_peucker(grown, distance, preserve_topology=True)
            if shapely.is_valid(kept):
                yield kept
    yield grown


def _fitted(
    area: BaseGeometry, distance: float, fallback: Callable[[], BaseGeometry]
) -> BaseGeometry:
    """``area`` with every ring fitted within ``distance`` (as two open halves, whose ends
    are kept), or the ring of ``fallback()`` (made only then) where the fitted one would
    cross itself."""
    shapes, rings = _rings(area)
    fits = [
        np.vstack(
            [fitted(xy[: len(xy) // 2 + 1], distance), fitted(xy[len(xy) // 2 :], distance)[1:]]
        )
        for xy in rings
    ]
    sizes = np.array([len(xy) for xy in fits])
    simple = sizes >= 4
    simple[simple] = shapely.is_simple(
        shapely.linearrings(
            np.concatenate([fits[i] for i in np.flatnonzero(simple)]),
            indices=np.repeat(np.arange(simple.sum()), sizes[simple]),
        )
    )
    if simple.all():
        return _rebuilt(shapes, fits)
    _, others = _rings(fallback())
    return _rebuilt(
        shapes,
        [new if ok else old for new, ok, old in zip(fits, simple.tolist(), others, strict=True)],
    )


def _rings(area: BaseGeometry) -> tuple[list[shapely.Polygon], list[np.ndarray]]:
    """The polygons of ``area`` and the coordinates of their rings, exterior then holes."""
    shapes = polygons(area)
    return shapes, [
        np.asarray(ring.coords) for shape in shapes for ring in (shape.exterior, *shape.interiors)
    ]


def _rebuilt(shapes: list[shapely.Polygon], rings: list[np.ndarray]) -> BaseGeometry:
    """``shapes`` with their rings replaced, in :func:`_rings`' order."""
    kept = iter(rings)
    made = [shapely.Polygon(next(kept), [next(kept) for _ in shape.interiors]) for shape in shapes]
    return made[0] if len(made) == 1 else shapely.MultiPolygon(made)


def _douglas_peucker(area: BaseGeometry, distance: float, preserve_topology: bool) -> BaseGeometry:
    """``area`` with every ring simplified within ``distance`` of itself, both ways.

    GEOS (3.12 and later) also drops a ring's start vertex when it lies within ``distance``
    of the segment joining its kept neighbours, and that segment can then pass farther than
    ``distance`` from the vertices dropped before (2.7 m at 2.3 m, measured). An open line
    keeps its ends, so each ring is simplified as two open halves, all of them at once (the
    topology-preserving kind keeps them from crossing each other); a ring that would
    collapse is kept as it is.
    """
    shapes, rings = _rings(area)
    halves = []
    for xy in rings:
        middle = len(xy) // 2
        halves += [shapely.LineString(xy[: middle + 1]), shapely.LineString(xy[middle:])]
    lines = shapely.get_parts(
        shapely.simplify(
            shapely.multilinestrings(halves), distance, preserve_topology=preserve_topology
        )
    )
    if len(lines) != len(halves):  # pragma: no cover - open lines are never dropped
        return area
    simple = [
        np.vstack([shapely.get_coordinates(first), shapely.get_coordinates(second)[1:]])
        for first, second in zip(lines[0::2], lines[1::2], strict=True)
    ]
    return _rebuilt(
        shapes, [new if len(new) >= 4 else old for old, new in zip(rings, simple, strict=True)]
    )


@dataclass(frozen=True)
class Frame:
    """The area joined across ±180°
    (:func:`~parcelsearch.planning.tiling.antimeridian.joined_across_180`),
    its middle longitude ``lon0``, and the factor ``c`` that makes a degree of longitude
    about as long as one of latitude there: where distances in metres map to degrees alike
    on both axes."""

    unwrapped: BaseGeometry
    lon0: float
    c: float

    @classmethod
    def of(cls, geometry: BaseGeometry) -> Frame:
        unwrapped, lon0 = joined_across_180(geometry)
        _, miny, _, maxy = unwrapped.bounds
        c = 1.0 if miny <= 0 <= maxy else math.cos(math.radians(min(abs(miny), abs(maxy))))
        return cls(unwrapped, lon0, max(c, 1e-6))

    def scaled(self) -> BaseGeometry:
        """The unwrapped area in the frame's scaled degrees."""
        return shapely.transform(
            self.unwrapped, lambda xy: np.column_stack([(xy[:, 0] - self.lon0) * self.c, xy[:, 1]])
        )

    def lonlat(self, geometry: BaseGeometry) -> BaseGeometry:
        """``geometry`` in scaled degrees back in (continuous) longitude and latitude."""
        return shapely.transform(
            geometry, lambda xy: np.column_stack([xy[:, 0] / self.c + self.lon0, xy[:, 1]])
        )


def _back_to_lonlat(lonlat: BaseGeometry, lon0: float) -> BaseGeometry:
    """A cover in continuous longitudes, clipped to ±90° latitude and split at ±180°."""
    if not shapely.is_valid(lonlat):  # pragma: no cover - buffers and simplify keep validity
        lonlat = shapely.make_valid(lonlat, method="structure", keep_collapsed=False)
    minx, miny, maxx, maxy = lonlat.bounds
    if miny < -90 or maxy > 90 or minx < lon0 - 360 or maxx > lon0 + 360:
        lonlat = shapely.intersection(lonlat, shapely.box(lon0 - 360, -90, lon0 + 360, 90))
    return split_antimeridian(lonlat)


def _fill_narrow_holes(area: BaseGeometry, reach: float) -> BaseGeometry:
    """Fill the holes whose every point lies within ``reach`` of their edge.

    A hole is that narrow exactly when shrinking it by ``reach`` leaves nothing; a hole
    whose bounding box is at most ``2 × reach`` wide is that narrow for sure.
    """
    parts = []
    filled = False
    for part in polygons(area):
        holes = [shapely.Polygon(ring) for ring in part.interiors]
        if not holes:
            parts.append(part)
            continue
        boxes = shapely.bounds(np.asarray(holes))
        thin = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]) <= 2 * reach
        keep = [
            h.exterior
            for h, is_thin in zip(holes, thin.tolist(), strict=True)
            if not is_thin and not shapely.buffer(h, -reach, quad_segs=2).is_empty
        ]
        filled |= len(keep) < len(holes)
        parts.append(shapely.Polygon(part.exterior, keep))
    if len(parts) == 1:
        return parts[0]
    if filled:  # a filled hole may hold another part (an island in a lake): merge them
        return shapely.union_all(parts)
    return shapely.MultiPolygon(parts)
