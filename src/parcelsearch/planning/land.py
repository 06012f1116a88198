"""Where areas lie against land and the active markets: two mistakes caught before any call.

Coordinates in another CRS than the one declared (kilometres in a CRS that counts metres, a
wrong zone) put the study areas far out at sea, where a search spends its calls and finds
nothing. :func:`check_near_land` refuses areas that lie more than :data:`LAND_KM` from any
land; :func:`check_near_markets` refuses areas more than :data:`MARKET_KM` from every US state
that has an active market (a market is ``"City, ST"``), when the market list is at hand.

"Land" is the bundled ``land.parquet`` (see ``data/make_land.py``): Natural Earth's 1:110m
countries (public domain), the EPSG database's boxes of onshore and island areas up to
25 square degrees and of the US states, and Natural Earth's 1:110m capitals (the islands
too small for the other layers). The states' boxes are those of the same database.

Examples
--------
>>> from shapely import box
>>> import numpy as np
>>> check_near_land(np.array([box(-122.45, 37.75, -122.44, 37.76)]), ["sf"], "EPSG:3857")
>>> far = np.array([box(-0.13, 0.04, -0.12, 0.05)])
>>> check_near_land(far, ["gulf"], "EPSG:3857")
Traceback (most recent call last):
...
parcelsearch.errors.InputError: area 'gulf' lies about 556 km from the nearest land ...
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import shapely

from parcelsearch._shared import data_path
from parcelsearch.errors import Hint, InputError

__all__ = [
    "LAND_KM",
    "MARKET_KM",
    "check_near_land",
    "check_near_markets",
    "distances_km",
    "market_states",
    "state_at",
]

#: Areas wholly farther than this (km) from any land are refused. Coordinates in the wrong
#: CRS land hundreds of km out (near 0, 0: 556 km); real islands and coasts lie within 40 km
#: of the bundled land (the 1:110m coast is coarse, so the island and state boxes fill in).
LAND_KM = 50.0
#: Areas wholly farther than this (km) from the box of every state with an active market are
#: refused (a metro area may spill over its state's border).
MARKET_KM = 50.0
#: Longest step (degrees) between the points distances are measured between (see
#: :func:`distances_km`): each distance is over the truth by at most 2 × 5.6 km.
_STEP = 0.1
#: Most km a degree spans anywhere (a degree of latitude near the poles): two points less
#: than d degrees apart in longitude/latitude are less than d × this apart on the ground.
_KM_PER_DEGREE = 111.7
_EARTH_KM = 6371.0
_SHOWN = 5


@dataclass(frozen=True)
class _Layer:
    """The bundled land: each part's kind, name and geometry, a tree over them, and the
    points along their edges distances are measured to."""

    kinds: np.ndarray
    names: np.ndarray
    geoms: np.ndarray
    tree: shapely.STRtree

    def points(self, which: np.ndarray) -> np.ndarray:
        return _edge_points(self.geoms[which])


@functools.cache
def _layer() -> _Layer:
    table = pq.read_table(data_path("land.parquet"))
    geoms = shapely.from_wkb(np.asarray(table.column("wkb").to_pylist(), dtype=object))
    return _Layer(
        np.asarray(table.column("kind").to_pylist(), dtype=object),
        np.asarray(table.column("name").to_pylist(), dtype=object),
        geoms,
        shapely.STRtree(geoms),
    )


@functools.cache
def _land_points() -> np.ndarray:
    layer = _layer()
    return _by_latitude(layer.points(np.ones(len(layer.geoms), dtype=bool)))


def _by_latitude(points: np.ndarray) -> np.ndarray:
    return points[np.argsort(points[:, 1], kind="stable")]


def _edge_points(geoms: np.ndarray) -> np.ndarray:
    """Longitude/latitude of points at most :data:`_STEP` apart along ``geoms``' edges."""
    return np.asarray(shapely.get_coordinates(shapely.segmentize(geoms, _STEP)))


def _near(geoms: np.ndarray, targets: np.ndarray, km: float) -> np.ndarray:
    """Which of ``geoms`` surely lie within ``km`` of one of ``targets``: within the degrees
    that span at most ``km`` anywhere (one tree query for all of them)."""
    tree = _layer().tree if targets is _layer().geoms else shapely.STRtree(targets)
    hits = tree.query(geoms, predicate="dwithin", distance=km / _KM_PER_DEGREE)
    near = np.zeros(len(geoms), dtype=bool)
    near[hits[0]] = True
    return near


def distances_km(geom: Any, points: np.ndarray) -> float:
    """The great-circle distance (km) from ``geom`` (longitude/latitude) to the nearest of
    ``points`` (sorted by latitude), measured between points at most :data:`_STEP` apart
    along its hull's edge: over the distance from the hull (never more than the area's) by
    at most 5.6 km, and as much again for ``points``' spacing along their edges. Points
    within 10° of latitude are tried first (all of them when none lies nearer than that
    band's width)."""
    hull = shapely.convex_hull(geom)
    _, south, _, north = shapely.bounds(hull)
    lo, hi = np.searchsorted(points[:, 1], [south - _BAND, north + _BAND])
    best = _haversine_min(hull, points[lo:hi])
    if best > _BAND * 110.5:  # something beyond the band may be nearer
        best = _haversine_min(hull, points)
    return best


#: Degrees of latitude either side of an area whose points are measured first.
_BAND = 10.0


def _haversine_min(hull: Any, points: np.ndarray) -> float:
    own = np.radians(_edge_points(np.array([hull])))
    other = np.radians(points)
    best = np.inf
    if len(other) == 0:
        return best
    for lon, lat in own:
        half = (
            np.sin((other[:, 1] - lat) / 2) ** 2
            + np.cos(lat) * np.cos(other[:, 1]) * np.sin((other[:, 0] - lon) / 2) ** 2
        )
        best = min(best, float(2 * _EARTH_KM * np.arcsin(np.sqrt(half.min()))))
    return best


def _far(
    geoms: np.ndarray, ids: Sequence[Hashable], km: float, targets: np.ndarray, points: Any
) -> tuple[list[tuple[Hashable, float]], int]:
    """The first :data:`_SHOWN` areas wholly farther than ``km`` from ``targets``, with their
    distance (km), and how many other areas were not measured once those were found.

    Most areas are near: one tree query says so. Only the others are measured, until
    :data:`_SHOWN` are found far (enough to refuse)."""
    far: list[tuple[Hashable, float]] = []
    candidates = np.flatnonzero(~_near(geoms, targets, km)).tolist()
    for done, i in enumerate(candidates, start=1):
        distance = distances_km(geoms[i], points())
        if distance - 2 * _STEP / 2 * _KM_PER_DEGREE > km:  # over the truth: sure beyond km
            far.append((ids[i], distance))
            if len(far) == _SHOWN:
                return far, len(candidates) - done
    return far, 0


def _rows(far: list[tuple[Hashable, float]], unmeasured: int) -> str:
    """``area 'a' lies about 557 km`` or ``areas 'a', 'b' lie about 557, 560 km``."""
    if len(far) == 1 and not unmeasured:
        return f"area {far[0][0]!r} lies about {far[0][1]:,.0f} km"
    rows = ", ".join(repr(row) for row, _ in far)
    kms = ", ".join(f"{km:,.0f}" for _, km in far)
    more = f" (and maybe others of the {unmeasured:,} not measured)" if unmeasured else ""
    return f"areas {rows}{more} lie about {kms} km"


def check_near_land(geoms: np.ndarray, ids: Sequence[Hashable], crs: Any) -> None:
    """Refuse areas that lie wholly farther than :data:`LAND_KM` from any land.

    Parameters
    ----------
    geoms
        The areas in longitude/latitude (EPSG:4326), within ±180°.
    ids
        Their ids, in the same order.
    crs
        The CRS they were declared in (named in the message).

    Raises
    ------
    InputError
        Naming the rows, their distance, the CRS to declare and ``trust_crs``.
    """
    layer = _layer()
    far, unmeasured = _far(geoms, ids, LAND_KM, layer.geoms, _land_points)
    if not far:
        return
    name = crs.to_string() if hasattr(crs, "to_string") else str(crs)
    causes = (
        "latitude and longitude swapped, a sign dropped"
        if getattr(crs, "is_geographic", False)
        else "kilometres or feet where metres were declared, another zone"
    )
    raise InputError(
        f"{_rows(far, unmeasured)} from the nearest land (farther than {LAND_KM:g} km) "
        f"once read in {name}: out at sea, where nothing can be found, so the "
        f"coordinates are almost surely in another CRS ({causes}); nothing was planned or "
        "spent",
        row=far[0][0],
        field="crs",
        hints=[
            Hint("crs_override", None, "declare the CRS they are really in with {knob}"),
            Hint("trust_crs", None, "if the CRS is right, pass {knob}"),
        ],
    )


def market_states(markets: Iterable[str]) -> list[str]:
    """The two-letter states of ``markets`` (``"City, ST"``) that have a box, sorted.

    Examples
    --------
    >>> market_states(["Abilene, TX", "Boise, ID", "Tarrant County Unincorporated, TX", "x"])
    ['ID', 'TX']
    """
    layer = _layer()
    boxed = set(layer.names[layer.kinds == "state"].tolist())
    codes = {
        name.rsplit(",", 1)[1].strip().upper()
        for name in markets
        if isinstance(name, str) and "," in name
    }
    return sorted(codes & boxed)


def check_near_markets(
    geoms: np.ndarray,
    ids: Sequence[Hashable],
    markets: Sequence[str],
    listed: str = "the cached market list",
) -> None:
    """Refuse areas wholly farther than :data:`MARKET_KM` from the box of every state
    that has an active market. Says nothing when no market names a state with a box.

    Raises
    ------
    InputError
        Naming the rows, their distance, the states, the list (``listed``: which, how old)
        and ``trust_markets``.
    """
    states = market_states(markets)
    if not states:
        return
    layer = _layer()
    which = (layer.kinds == "state") & np.isin(layer.names, states)
    boxes = layer.geoms[which]
    far, unmeasured = _far(geoms, ids, MARKET_KM, boxes, lambda: _by_latitude(_edge_points(boxes)))
    if not far:
        return
    raise InputError(
        f"{_rows(far, unmeasured)} from every state with an active market (farther than "
        f"{MARKET_KM:g} km from {', '.join(states)}: {len(markets)} markets in {listed}), "
        "where the vendor has no parcels to find; nothing was planned or spent",
        row=far[0][0],
        field="geometry",
        hints=[Hint("trust_markets", None, "if the areas are right, pass {knob}")],
    )


def state_at(lon: float, lat: float) -> str | None:
    """The two-letter US state whose box holds the point (the smallest such box, where boxes
    overlap), or None outside every state's box.

    Examples
    --------
    >>> state_at(-99.74, 32.44), state_at(2.35, 48.85)
    ('TX', None)
    """
    layer = _layer()
    point = shapely.Point(lon, lat)
    hits = [
        i
        for i in layer.tree.query(point, predicate="intersects").tolist()
        if layer.kinds[i] == "state"
    ]
    if not hits:
        return None
    return str(layer.names[min(hits, key=lambda i: shapely.area(layer.geoms[i]))])
