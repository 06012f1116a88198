"""Pure geometry: one study area → the fewest single-ring pieces that fit a request line.

The Search service takes one closed ring per request, and its gateway refuses request
lines longer than a byte budget. :func:`tile` turns an area (a Polygon or MultiPolygon
in EPSG:4326) into pieces that are each

- a valid polygon with a single ring (holes are cut away, parts are split);
- on the 6-decimal grid the service receives (snapped with :func:`shapely.set_precision`
  *before* anything else, so rounding can never make a ring invalid);
- small enough that ``GET <path>?searchPolygon=<ring>&page=99999 HTTP/1.1`` fits the
  budget (five-digit page numbers are reserved for);
- canonical: counter-clockwise, starting at the lowest-left vertex, pieces sorted, so the
  same area always yields byte-identical requests (stable cache keys).

How (exact mode): each part that does not fit is triangulated (constrained Delaunay:
no new vertex), the triangles' dual graph gives a spanning tree, and the tree is cut
into the fewest connected components whose rings fit (a piece's bytes add up over its
triangles; Kundu & Misra's bottom-up rule is optimal for a tree). A component that is
not one valid ring (it wraps round a hole, or pinches) is split again along the tree.
Neighbouring pieces are then merged while the merged ring still fits and stays a valid
single ring. Pieces are unions of whole triangles, so their union is exactly the
snapped area and no cut adds a vertex: this is what beats recursive halving, whose
straight cuts add vertices and, across a wiggly coast, fragments.

What "exact" means, precisely: the union of the pieces covers the area (every point of
the area, so every parcel whose representative point lies inside it, is searched) and
reaches at most two grid steps (2e-6°, about 22 cm) beyond it. To survive rounding
to the grid, an area that is not already on it is first grown by
:data:`ROUNDING_MARGIN` (sharp corners bevelled) and clipped to
[-180, 180] × [-90, 90]. Growing may close a slit narrower than two grid steps; the
slit itself is then searched (it lies within a grid step of the area), but whatever
lies behind it stays out: every pocket the growth seals off is kept as a hole.

``tolerance=t`` metres first replaces the area by a *cover* (:func:`cover`): holes every
point of which lies within ``t`` of the area are filled, the area is buffered out by t/2
in a local azimuthal-equidistant projection (merging parts and closing gaps narrower
than ``t``), simplified with a tolerance that keeps the area covered, then tiled exactly.
Pieces then cover the whole area and no covered point lies more than ``t`` metres from it.

Examples
--------
>>> from shapely import box
>>> [p.exterior.coords[0] for p in tile(box(-97.5, 32.7, -97.4, 32.8))]
[(-97.5, 32.7)]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import _wire, settings
from parcelsearch.errors import InputError

__all__ = [
    "BUDGET_PAGE",
    "GRID",
    "MIN_TOLERANCE",
    "Budget",
    "canonical_ring",
    "cover",
    "estimate",
    "lower_bound",
    "parts_bound",
    "prepared",
    "split_antimeridian",
    "tile",
]

#: The page number whose request line the budget is checked at (room for five digits).
BUDGET_PAGE = 99999
#: Spacing of the coordinate grid the service receives (6 decimals).
GRID = 10.0**-settings.COORD_DECIMALS
_SCALE = 10**settings.COORD_DECIMALS
#: Smallest non-zero tolerance in metres: rounding to 6 decimals moves a vertex ≤ 0.08 m.
MIN_TOLERANCE = 0.5
_ROUNDING_M = 0.1  # metres one 6-decimal rounding can move a vertex (≤ 0.079 m), rounded up
_MAX_SPLITS = 1_000_000


# -- the byte budget --------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """The request-line byte budget of one search path.

    Parameters
    ----------
    max_request_bytes
        Longest request line allowed (``GET <target> HTTP/1.1``), in bytes.
    path
        The search path, e.g. ``"/v1/search"``.
    """

    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES
    path: str = settings.SEARCH_PATH

    def __post_init__(self) -> None:
        smallest = self.base + 16 * 30  # a 16-vertex ring of the longest coordinates
        if self.max_request_bytes < smallest:
            raise InputError(
                f"max_request_bytes={self.max_request_bytes} cannot hold a useful ring on "
                f"{self.path!r}; use at least {smallest}",
                field="max_request_bytes",
            )

    @functools.cached_property
    def base(self) -> int:
        """Bytes of the request line with an empty ring ``[]`` at page 99999."""
        return request_bytes("[]", self.path)

    def ring_bytes(self, ring: Sequence[Sequence[float]] | np.ndarray) -> int:
        """Request-line bytes of a closed ring (closing vertex included), at page 99999."""
        return self.base - 1 + int(_wire.vertex_bytes_array(np.asarray(ring)).sum())

    def polygon_bytes(self, polygon: Polygon) -> int:
        """Request-line bytes of a polygon's exterior ring, at page 99999."""
        return self.ring_bytes(shapely.get_coordinates(polygon.exterior))

    def fits(self, polygon: Polygon) -> bool:
        """One ring that fits the budget."""
        return not polygon.interiors and self.polygon_bytes(polygon) <= self.max_request_bytes


def request_bytes(
    polygon_json: str, path: str = settings.SEARCH_PATH, page: int = BUDGET_PAGE
) -> int:
    """Bytes of the request line that sends ``polygon_json`` (via :mod:`parcelsearch._wire`)."""
    return _wire.search_target_bytes(path, polygon_json, page)


# -- grid, parts and canonical rings ---------------------------------------------------------


def _snap(geom: BaseGeometry) -> BaseGeometry:
    """``geom`` on the 6-decimal grid, valid, exactly-collinear vertices removed, normalised.

    Normalising (rings from their smallest vertex, fixed orientation, parts sorted) makes
    every representation of the same area tile identically.
    """
    return shapely.normalize(shapely.simplify(shapely.set_precision(geom, GRID), 0.0))


#: How far exact mode grows an area before snapping it to the grid: a little more than the
#: farthest a vertex can move when each coordinate is rounded to 6 decimals (√2 × GRID / 2).
ROUNDING_MARGIN = 0.708 * GRID
#: Mitre limit of that growth (× the margin): a sharp corner is bevelled 1.5 margins out,
#: whose ends lie √(1.5² + 1) margins away, so growth plus rounding stay within
#: 1.803 × 0.708 + 0.708 ≈ 1.98 grid steps of the area.
_MITRE_LIMIT = 1.5
#: Longitudes and latitudes the service accepts: every piece is clipped to them.
WORLD = shapely.box(-180.0, -90.0, 180.0, 90.0)


def grow_for_rounding(geom: BaseGeometry) -> BaseGeometry:
    """``geom``, grown by :data:`ROUNDING_MARGIN` if snapping it would lose any of it.

    Snapping moves every boundary point by at most √2 × GRID / 2. An area already on the
    grid (or one whose rounding only adds area) is kept as it is; any other is grown first
    (mitres limited to 1.5 margins: a sharp corner gets one bevel, any other corner no new
    vertex), which guarantees the snapped pieces still cover the
    whole area: rounding never drops a parcel whose representative point lies inside.
    Every hole of the grown area is kept, including pockets sealed off behind a slit
    narrower than twice the margin, so nothing farther than two grid steps from the area is
    ever searched.
    """
    if _snap(geom).covers(geom):
        return geom
    return shapely.buffer(geom, ROUNDING_MARGIN, join_style="mitre", mitre_limit=_MITRE_LIMIT)


def _clamped(geom: BaseGeometry) -> BaseGeometry:
    """``geom`` less anything beyond ±180° longitude or ±90° latitude (growth can reach it)."""
    minx, miny, maxx, maxy = geom.bounds
    if minx >= -180 and miny >= -90 and maxx <= 180 and maxy <= 90:
        return geom
    return shapely.union_all(_polygons(shapely.intersection(geom, WORLD)))


def _polygons(geom: BaseGeometry) -> list[Polygon]:
    """The non-empty Polygons of a (multi)polygon or collection."""
    return [p for p in shapely.get_parts(geom) if p.geom_type == "Polygon" and not p.is_empty]


def canonical_ring(polygon: Polygon) -> np.ndarray:
    """The exterior ring as sent: on the grid, counter-clockwise, from its lowest-left vertex.

    Returns
    -------
    numpy.ndarray
        ``(n + 1, 2)`` closed ring; the start is the smallest ``(lon, lat)`` vertex.
    """
    coords = shapely.get_coordinates(shapely.orient_polygons(polygon).exterior)[:-1]
    coords = np.round(coords * _SCALE) / _SCALE
    start = np.lexsort((coords[:, 1], coords[:, 0]))[0]
    coords = np.roll(coords, -start, axis=0)
    return np.vstack([coords, coords[:1]])


def _canonical_polygon(polygon: Polygon) -> Polygon:
    return Polygon(canonical_ring(polygon))


# -- cutting -----------------------------------------------------------------------------


def _long_axis(bounds: np.ndarray) -> int:
    """0 (longitude) or 1 (latitude): the longer side of a bounding box on the ground."""
    minx, miny, maxx, maxy = bounds
    width = (maxx - minx) * math.cos(math.radians((miny + maxy) / 2))
    return 0 if width >= maxy - miny else 1


def _grid_line(target: float, lo: float, hi: float, taken: set[int]) -> float | None:
    """A grid value strictly inside (lo, hi), nearest ``target``, avoiding vertex lines."""
    k_lo, k_hi = round(lo * _SCALE) + 1, round(hi * _SCALE) - 1
    if k_lo > k_hi:
        return None
    k = min(max(round(target * _SCALE), k_lo), k_hi)
    for step in range(64):
        for kk in (k + step, k - step):
            if k_lo <= kk <= k_hi and kk not in taken:
                return kk / _SCALE
    return k / _SCALE


def _cut(polygon: Polygon, axis: int, at: float) -> list[Polygon]:
    """The polygons on either side of the line ``x = at`` (axis 0) or ``y = at`` (axis 1)."""
    minx, miny, maxx, maxy = polygon.bounds
    lo, hi = (minx - 1, miny - 1, at, maxy + 1), (at, miny - 1, maxx + 1, maxy + 1)
    if axis == 1:
        lo, hi = (minx - 1, miny - 1, maxx + 1, at), (minx - 1, at, maxx + 1, maxy + 1)
    halves = shapely.intersection(polygon, shapely.box(*np.array([lo, hi]).T), grid_size=GRID)
    return [p for half in halves for p in _polygons(shapely.simplify(half, 0.0))]


CutRule = Callable[[Polygon, "Budget"], tuple[int, float]]


def _balanced_cut(polygon: Polygon, budget: Budget) -> tuple[int, float]:
    """Where to cut: through the holes while a piece has some, else at the median vertex."""
    bounds = np.asarray(polygon.bounds)
    coords = shapely.get_coordinates(polygon)
    axes = (_long_axis(bounds), 1 - _long_axis(bounds))
    if polygon.interiors and budget.polygon_bytes(polygon) <= budget.max_request_bytes:
        holes = shapely.bounds(shapely.polygons(list(polygon.interiors)))
        for axis in axes:
            at = _stab_holes(holes, axis, coords)
            if at is not None:
                return axis, at
    for axis in axes:
        taken = set(np.rint(coords[:, axis] * _SCALE).astype(np.int64).tolist())
        at = _grid_line(float(np.median(coords[:, axis])), bounds[axis], bounds[axis + 2], taken)
        if at is not None:
            return axis, at
    raise _uncuttable(polygon)


def _stab_holes(holes: np.ndarray, axis: int, coords: np.ndarray) -> float | None:
    """A grid line across as many holes as possible (None if no hole is wide enough)."""
    lows, highs = holes[:, axis], holes[:, axis + 2]
    taken = set(np.rint(coords[:, axis] * _SCALE).astype(np.int64).tolist())
    best: tuple[int, float] | None = None
    for lo, hi in zip(lows, highs, strict=True):
        at = _grid_line((lo + hi) / 2, lo, hi, taken)
        if at is None:
            continue
        stabbed = int(np.count_nonzero((lows < at) & (highs > at)))
        if best is None or stabbed > best[0]:
            best = (stabbed, at)
    return None if best is None else best[1]


def _uncuttable(polygon: Polygon) -> InputError:
    return InputError(
        f"a piece {polygon.wkt[:80]}... is too small to cut on the 6-decimal grid yet does "
        "not fit the request budget; raise max_request_bytes",
        field="geometry",
    )


def _subdivide(polygon: Polygon, budget: Budget, rule: CutRule, limit: int) -> list[Polygon]:
    """Cut ``polygon`` recursively until every piece is one ring of at most ``limit`` bytes."""
    done: list[Polygon] = []
    todo = [polygon]
    for _ in range(_MAX_SPLITS):
        if not todo:
            return done
        piece = todo.pop()
        if not piece.interiors and budget.polygon_bytes(piece) <= limit:
            done.append(piece)
            continue
        todo.extend(reversed(_cut(piece, *rule(piece, budget))))
    raise _uncuttable(polygon)  # pragma: no cover - a cut always shrinks a piece


# -- pieces from a triangulation ---------------------------------------------------------------

#: Added to grid coordinates (|value| ≤ 1.8e8 < 2**30) to make them non-negative 31-bit ints.
_OFFSET = 2**30
_MAX_VERTEX_BYTES = 30  # the longest vertex "%5B-180.123456,-90.123456%5D," is 29 bytes


def _triangle_tree(
    polygon: Polygon,
) -> tuple[np.ndarray, np.ndarray, list[list[tuple[int, int]]], list[int]]:
    """Constrained Delaunay triangles of ``polygon`` and a spanning tree of their dual graph.

    Returns
    -------
    triangles, corners, children, order
        The triangles (no new vertices: every corner is a vertex of ``polygon``), their
        corner vertex ids ``(T, 3)``, for each triangle its tree children as
        ``(child, shared-edge id)``, and the breadth-first order (root first).
    """
    triangles = shapely.get_parts(shapely.constrained_delaunay_triangles(polygon))
    triangles = triangles[shapely.get_num_coordinates(triangles) == 4]
    keys = np.rint(shapely.get_coordinates(triangles) * _SCALE).astype(np.int64) + _OFFSET
    # One int64 per vertex, ordered as (lon, lat) are: a 1-d unique is far cheaper.
    _, vertex = np.unique((keys[:, 0] << 31) | keys[:, 1], return_inverse=True)
    corners = vertex.reshape(-1, 4)[:, :3]
    count = len(corners)
    a = corners[:, [0, 1, 2]].ravel()
    b = corners[:, [1, 2, 0]].ravel()
    nv = int(vertex.max()) + 1
    codes = np.minimum(a, b).astype(np.int64) * nv + np.maximum(a, b)
    owner = np.repeat(np.arange(count), 3)
    ranked = np.argsort(codes, kind="stable")
    same = codes[ranked[1:]] == codes[ranked[:-1]]
    first, second = owner[ranked[:-1][same]], owner[ranked[1:][same]]
    edges = codes[ranked[:-1][same]]
    near: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    for t, u, e in zip(first.tolist(), second.tolist(), edges.tolist(), strict=True):
        near[t].append((u, e))
        near[u].append((t, e))
    root = int(np.argmin(shapely.bounds(triangles)[:, 0]))
    children: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    seen = np.zeros(count, dtype=bool)
    seen[root] = True
    order = [root]
    for t in order:  # breadth first; grows while iterating
        for u, e in near[t]:
            if not seen[u]:
                seen[u] = True
                children[t].append((u, e))
                order.append(u)
    return triangles, corners, children, order


def _tree_pieces(polygon: Polygon, budget: Budget) -> list[Polygon] | None:
    """Partition ``polygon`` into the fewest triangle-tree components that fit the budget.

    The triangles of a constrained Delaunay triangulation use only the polygon's own
    vertices, and a piece made of connected triangles has as its ring exactly the
    vertices of its triangles; so a piece's bytes add up over the triangles, minus the
    two vertices each pair of joined triangles shares. Cutting a tree into the fewest
    connected parts under a weight cap is solved exactly bottom-up by detaching the
    heaviest child subtrees first (Kundu & Misra, 1977). A component whose union is not
    one valid ring within the budget (a pinch, or one wrapped round a hole) is split in
    two along the tree again. Pieces are unions of whole triangles (coverage unions: no
    new vertex, no rounding), so they tile the polygon exactly.

    Returns None if the triangulation is unusable (then the caller cuts geometrically).
    """
    triangles, corners, children, order = _triangle_tree(polygon)
    if len(order) < len(triangles) or not _covers_exactly(triangles, polygon):
        return None
    nv = int(corners.max()) + 1
    xy = (
        np.rint(shapely.get_coordinates(triangles) * _SCALE)
        .astype(np.int64)
        .reshape(-1, 4, 2)[:, :3]
    )
    vertex_xy = np.zeros((nv, 2), dtype=np.int64)
    vertex_xy[corners.ravel()] = xy.reshape(-1, 2)
    vbytes = _wire.vertex_bytes_array(vertex_xy / _SCALE)
    own = vbytes[corners].sum(axis=1)
    shared = np.zeros(len(triangles), dtype=np.int64)  # bytes a triangle shares with its parent
    parent = np.full(len(triangles), -1)
    for t in order:
        for child, edge in children[t]:
            parent[child] = t
            shared[child] = vbytes[edge // nv] + vbytes[edge % nv]
    limit = budget.max_request_bytes - budget.base + 1 - _MAX_VERTEX_BYTES
    detached = _kundu_misra(order, children, own - shared, own, limit)
    label = np.arange(len(triangles))
    for t in order:
        if parent[t] >= 0 and not detached[t]:
            label[t] = label[parent[t]]
    pieces: list[Polygon] = []
    todo = [
        np.flatnonzero(label == root) for root in np.flatnonzero(label == np.arange(len(triangles)))
    ]
    while todo:
        group = todo.pop()
        union = shapely.coverage_union_all(triangles[group])
        if union.geom_type == "Polygon" and union.is_valid and budget.fits(union):
            pieces.append(union)
        else:
            todo.extend(_halve_group(group, parent, own - shared))
    return pieces


def _covers_exactly(triangles: np.ndarray, polygon: Polygon) -> bool:
    """The triangles tile ``polygon``: their areas add up to its area (up to rounding).

    (Counting triangles would not do: a hole touching the shell at a vertex, as growing
    creates where it seals a pocket, takes two triangles fewer than a free hole.)
    """
    total = float(shapely.area(triangles).sum())
    return bool(abs(total - polygon.area) <= 1e-9 * polygon.area)


def _kundu_misra(
    order: list[int],
    children: list[list[tuple[int, int]]],
    attach: np.ndarray,
    own: np.ndarray,
    limit: int,
) -> np.ndarray:
    """Which tree nodes to detach so every component weighs at most ``limit``, fewest parts.

    ``own[t]`` is a node's weight alone, ``attach[t]`` what it adds to its parent's
    component (its weight less what it shares with the parent). Bottom-up, each node keeps
    its lightest children and detaches the heaviest until its component fits.
    """
    weight = own.astype(np.int64).copy()
    detached = np.zeros(len(own), dtype=bool)
    for t in reversed(order):
        kids = sorted(
            ((int(weight[c] - own[c] + attach[c]), c) for c, _ in children[t]), reverse=True
        )
        total = int(own[t]) + sum(w for w, _ in kids)
        for w, child in kids:
            if total <= limit:
                break
            detached[child] = True
            total -= w
        weight[t] = total
    return detached


def _halve_group(group: np.ndarray, parent: np.ndarray, attach: np.ndarray) -> list[np.ndarray]:
    """Split a connected group of triangles in two connected groups of about equal weight."""
    members = set(group.tolist())
    inside = [t for t in group.tolist() if parent[t] in members]
    root = next(t for t in group.tolist() if parent[t] not in members)
    depth: dict[int, int] = {root: 0}
    pending = list(inside)
    while pending:  # depth within the group, to add subtree weights bottom-up
        rest = []
        for t in pending:
            if parent[t] in depth:
                depth[t] = depth[parent[t]] + 1
            else:
                rest.append(t)
        pending = rest
    weight = {t: int(attach[t]) for t in group.tolist()}
    for t in sorted(inside, key=lambda t: -depth[t]):
        weight[parent[t]] += weight[t]
    half = weight[root] / 2
    cut = min(inside, key=lambda t: (abs(weight[t] - half), t))
    below = {cut}
    for t in sorted(inside, key=lambda t: depth[t]):
        if parent[t] in below:
            below.add(t)
    lower = np.array(sorted(below))
    upper = np.array(sorted(members - below))
    return [upper, lower]


def _neighbours(pieces: list[Polygon]) -> list[set[int]]:
    """For each piece, the pieces sharing a stretch of boundary (not just a point) with it."""
    graph: list[set[int]] = [set() for _ in pieces]
    if len(pieces) < 2:
        return graph
    arr = np.asarray(pieces, dtype=object)
    left, right = shapely.STRtree(arr).query(arr, predicate="intersects")
    keep = left < right
    left, right = left[keep], right[keep]
    shares = shapely.relate_pattern(arr[left], arr[right], "F***1****")
    for i, j in zip(left[shares].tolist(), right[shares].tolist(), strict=True):
        graph[i].add(j)
        graph[j].add(i)
    return graph


def _join(a: Polygon, b: Polygon, budget: Budget) -> tuple[Polygon, int] | None:
    """The union of two pieces if it is one valid ring within the budget, with its bytes.

    Pieces tile their part exactly (shared edges have the same vertices), so a coverage
    union joins them without any rounding.
    """
    union = shapely.coverage_union(a, b)
    if union.geom_type != "Polygon" or union.interiors or not union.is_valid:
        return None
    size = budget.polygon_bytes(union)
    return (union, size) if size <= budget.max_request_bytes else None


def _merge_pieces(pieces: list[Polygon], graph: list[set[int]], budget: Budget) -> list[Polygon]:
    """Merge neighbouring pieces, smallest pairs first, while the union is one ring that fits."""
    alive: dict[int, Polygon] = dict(enumerate(pieces))
    sizes = {i: budget.polygon_bytes(p) for i, p in alive.items()}
    near = {i: set(n) for i, n in enumerate(graph)}
    failed: set[tuple[int, int]] = set()
    while True:
        pairs = sorted(
            (sizes[i] + sizes[j], i, j)
            for i in alive
            for j in near[i]
            if i < j and (i, j) not in failed
        )
        for _, i, j in pairs:
            joined = _join(alive[i], alive[j], budget)
            if joined is None:
                failed.add((i, j))
                continue
            alive[i], sizes[i] = joined
            del alive[j], sizes[j]
            for k in near.pop(j) - {i}:
                near[k].discard(j)
                near[k].add(i)
                near[i].add(k)
            near[i].discard(j)
            failed = {pair for pair in failed if i not in pair}
            break
        else:
            return list(alive.values())


# -- public tiling ---------------------------------------------------------------------------


def tile(
    geometry: BaseGeometry,
    *,
    tolerance: float = 0.0,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
) -> list[Polygon]:
    """Pieces of one area: single canonical rings whose request lines fit the budget.

    Parameters
    ----------
    geometry
        Polygon or MultiPolygon in EPSG:4326, longitudes in [-180, 180] (as
        :func:`parcelsearch.areas.validate_areas` returns them).
    tolerance
        0 for exact pieces: their union covers the area and reaches at most two grid steps
        (2e-6°) beyond it, with no sealed-off pocket filled (see the module notes);
        ``t`` metres (at least :data:`MIN_TOLERANCE`) for pieces that cover the area and
        stay within ``t`` of it.
    max_request_bytes, path
        The request-line budget and the search path it is measured on (at page 99999).

    Returns
    -------
    list of shapely.Polygon
        Canonical pieces (see :func:`canonical_ring`), sorted by their first vertex; every
        coordinate lies in [-180, 180] × [-90, 90], every ring is valid and closed.
    """
    _check_tolerance(tolerance)
    return list(_tiled(geometry, float(tolerance), Budget(max_request_bytes, path)))


#: Areas (and their tilings) kept for reuse: planning the same areas again — a refused
#: search's plan, then :func:`parcelsearch.planning.suggest_tolerance` — tiles nothing twice.
_CACHED = 64


@functools.lru_cache(maxsize=_CACHED)
def prepared(geometry: BaseGeometry, tolerance: float) -> BaseGeometry:
    """The area the pieces will tile exactly: grown (or covered), clipped, on the grid.

    Shapely geometries are immutable and hash by value, so results are kept for reuse.
    """
    _check_tolerance(tolerance)
    if tolerance:
        return _covering(geometry, tolerance)[1]
    return _snap(_clamped(grow_for_rounding(geometry)))


def lower_bound(
    geometry: BaseGeometry,
    *,
    tolerance: float = 0.0,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
) -> int:
    """Fewest pieces :func:`tile` could return: a cheap bound (no tiling).

    Every vertex of the prepared area lies on some piece, and a piece carries at most the
    budget's bytes of vertices; every part needs a piece of its own.
    """
    return _vertex_bound(prepared(geometry, float(tolerance)), Budget(max_request_bytes, path))


def _vertex_bound(geometry: BaseGeometry, budget: Budget) -> int:
    """Σ over parts of ⌈bytes of the part's vertices ÷ what one request carries⌉."""
    capacity = budget.max_request_bytes - budget.base + 1
    bound = 0
    for part in _polygons(geometry):
        rings = shapely.get_rings(part)
        xy = np.concatenate([shapely.get_coordinates(r)[:-1] for r in rings])
        size = int(_wire.vertex_bytes_array(xy).sum())
        bound += max(1, math.ceil(size / capacity))
    return bound


def estimate(
    geometry: BaseGeometry,
    *,
    tolerance: float,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
    path: str = settings.SEARCH_PATH,
) -> int:
    """About how many pieces :func:`tile` returns in tolerance mode: a guess, not a bound.

    The vertex bound of the area simplified by half the tolerance, with no cover made
    (about a sixth of the cost of :func:`lower_bound`). It follows the true bound
    closely where parts stay apart, and overstates it where the cover would join parts
    (nearby ones, or those split at ±180°); it serves to choose which tolerance to check first.
    """
    _check_tolerance(tolerance, exact=False)
    frame = _Frame.of(geometry)
    # Plain Douglas–Peucker, part by part (parts joined at ±180° touch, and GEOS would mend
    # them into one): a count is all it needs, about ten times faster than keeping topology.
    simple = shapely.get_parts(shapely.simplify(
        shapely.get_parts(frame.scaled()), tolerance / 2 / _M_PER_DEGREE,
        preserve_topology=False))
    return _vertex_bound(frame.lonlat(shapely.geometrycollections(simple)),
                         Budget(max_request_bytes, path))


#: Fewest metres in one degree of latitude anywhere on the WGS84 ellipsoid (at the equator:
#: a(1 − e²) × π/180), and fewest in one degree of longitude × cos(latitude) is more (a π/180).
_MIN_M_PER_DEGREE = 110_574.0


def parts_bound(geometry: BaseGeometry, tolerance: float) -> int:
    """Fewest parts — so fewest pieces — the area can have in tolerance mode, without a cover.

    Every point of a cover lies within ``tolerance`` metres of the area, so two parts of
    the area end up in one part of the cover only if a chain of parts, each within
    ``2 × tolerance`` of the next on the ground, joins them. The parts are grouped by that
    reach (measured where a degree is shortest, so the reach is never understated; parts
    split at ±180° are joined first); every group needs a piece of its own. Far cheaper
    than :func:`lower_bound` (no cover), and on island groups often as strong.
    """
    _check_tolerance(tolerance, exact=False)
    joined, _ = _joined_across_180(geometry)
    parts = np.asarray(_polygons(joined), dtype=object)
    if len(parts) < 2:
        return len(parts)
    reach = 2 * tolerance / _MIN_M_PER_DEGREE
    _, miny, _, maxy = joined.bounds
    c = math.cos(math.radians(min(90.0, max(abs(miny), abs(maxy)) + reach)))
    scaled = shapely.transform(parts, lambda xy: xy * [c, 1.0])
    left, right = shapely.STRtree(scaled).query(scaled, predicate="dwithin", distance=reach)
    group = list(range(len(parts)))

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i, j in zip(left.tolist(), right.tolist(), strict=True):
        a, b = root(i), root(j)
        if a != b:
            group[max(a, b)] = min(a, b)
    return sum(1 for i in range(len(parts)) if root(i) == i)


@functools.lru_cache(maxsize=_CACHED)
def _tiled(geometry: BaseGeometry, tolerance: float, budget: Budget) -> tuple[Polygon, ...]:
    pieces: list[Polygon] = []
    for part in _polygons(prepared(geometry, tolerance)):
        if budget.fits(part):
            pieces.append(part)
            continue
        found = _tree_pieces(part, budget)
        if found is None:  # pragma: no cover - GEOS triangulates every valid polygon
            pieces.extend(_subdivide(part, budget, _balanced_cut, budget.max_request_bytes))
            continue
        pieces.extend(_merge_pieces(found, _neighbours(found), budget))
    return tuple(_finish(pieces, budget))


def _finish(pieces: list[Polygon], budget: Budget) -> list[Polygon]:
    """Canonical rings, each checked valid and within budget (else cut again), sorted."""
    done: list[Polygon] = []
    todo = list(pieces)
    while todo:
        piece = todo.pop()
        ring = _canonical_polygon(piece)
        if ring.is_valid and budget.ring_bytes(ring.exterior.coords) <= budget.max_request_bytes:
            done.append(ring)
            continue
        for part in _polygons(_snap(piece)):  # pragma: no cover - defensive: never seen
            todo.extend(_subdivide(part, budget, _balanced_cut, budget.max_request_bytes // 2))
    done.sort(key=lambda p: tuple(p.exterior.coords[0]) + (len(p.exterior.coords),))
    return done


# -- the antimeridian ------------------------------------------------------------------------


def split_antimeridian(geom: BaseGeometry) -> BaseGeometry:
    """Cut a geometry with continuous longitudes at ±180° and wrap the parts back.

    Parameters
    ----------
    geom
        A Polygon or MultiPolygon whose longitudes may lie in [-540, 540].

    Returns
    -------
    Polygon or MultiPolygon
        The same area with every longitude in [-180, 180]: parts beyond 180° are
        moved to the western side of the antimeridian and vice versa.
    """
    minx, _, maxx, _ = geom.bounds
    if minx >= -180 and maxx <= 180:
        return geom
    pieces = []
    for turn in (-1, 0, 1):
        window = shapely.box(-180 + 360 * turn, -90, 180 + 360 * turn, 90)
        if not shapely.intersects(geom, window):
            continue
        piece = shapely.intersection(geom, window)
        if not piece.is_empty:
            pieces.append(shapely.transform(piece, lambda xy, t=turn: xy - [360.0 * t, 0.0]))
    polygons = [p for piece in pieces for p in _polygons(piece)]
    if not polygons:
        return shapely.Polygon()
    return polygons[0] if len(polygons) == 1 else shapely.MultiPolygon(polygons)


# -- tolerance mode: a covering -----------------------------------------------------------------


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
    The work is done in *scaled degrees*: longitude × c and latitude, where c is the
    largest cos(latitude) over the area. That is an affine map, so straight edges stay
    straight (nothing to densify) and no projection is needed; one scaled degree is at
    most :data:`_M_PER_DEGREE` metres anywhere in the area (WGS84), so distances measured
    in it never understate the ground distance.

    1. the area is simplified (topology-preserving Douglas–Peucker, which keeps it within
       ``0.05 t`` of the area and the area within ``0.05 t`` of it), so that the buffer
       below costs little whatever the tolerance;
    2. holes whose every point lies within ``t - 0.1`` m of their edge are filled;
    3. the area is buffered out by ``t/2``: parts and gaps closer than ``t`` merge, and
       the buffer's boundary stays at least ``0.45 t`` off the area;
    4. the buffer is simplified by at most ``0.4 t - 0.1`` m, which keeps its boundary off
       the area (and ``0.05 t + 0.5 t + 0.4 t - 0.1 < t``): plain Douglas–Peucker first,
       which is fast but may drop area; if the covering check fails, the
       topology-preserving kind, then half the distance, then none.
    """
    return _covering(geometry, tolerance)[0]


def _covering(geometry: BaseGeometry, tolerance: float) -> tuple[BaseGeometry, BaseGeometry]:
    """:func:`cover`, and the cover clipped to the world and snapped to the grid (what the
    covering check has snapped already, so :func:`prepared` need not snap it again)."""
    _check_tolerance(tolerance, exact=False)
    frame = _Frame.of(geometry)
    metre = 1.0 / _M_PER_DEGREE
    first = 0.05 * tolerance * metre  # simplify the area first: buffering it is then cheap
    area = shapely.simplify(frame.scaled(), first)
    area = _fill_narrow_holes(area, (tolerance - _ROUNDING_M) * metre - first)
    grown = shapely.buffer(area, tolerance / 2 * metre, quad_segs=4)
    for simple in _simpler(grown, [(0.4 * tolerance - _ROUNDING_M) * metre,
                                   (0.2 * tolerance - _ROUNDING_M) * metre]):
        result = _back_to_lonlat(frame.lonlat(simple), frame.lon0)
        snapped = _snap(_clamped(result))
        if shapely.covers(snapped, geometry):
            return result, snapped
    # Only where clipping at a pole or rounding bites does the cover lose some of the area.
    result = shapely.union(result, _clamped(grow_for_rounding(geometry)))
    return result, _snap(_clamped(result))


def _simpler(grown: BaseGeometry, by: list[float]) -> Iterator[BaseGeometry]:
    """Simplifications of the buffer ``grown`` to try in turn, each within its distance of
    ``by`` (Hausdorff, both ways), then ``grown`` itself: plain Douglas–Peucker first (about
    ten times faster than keeping topology on a large buffer; GEOS mends what it makes
    invalid, which may only drop area, and the covering check catches that), then the
    topology-preserving kind at each distance."""
    if by and by[0] > 0:
        fast = shapely.simplify(grown, by[0], preserve_topology=False)
        if shapely.is_valid(fast):
            yield fast
    for distance in by:
        if distance > 0:
            yield shapely.simplify(grown, distance)
    yield grown


@dataclass(frozen=True)
class _Frame:
    """The area joined across ±180° (:func:`_joined_across_180`), its middle longitude
    ``lon0``, and the factor ``c`` that makes a degree of longitude about as long as one of
    latitude there: where distances in metres map to degrees alike on both axes."""

    unwrapped: BaseGeometry
    lon0: float
    c: float

    @classmethod
    def of(cls, geometry: BaseGeometry) -> _Frame:
        unwrapped, lon0 = _joined_across_180(geometry)
        _, miny, _, maxy = unwrapped.bounds
        c = 1.0 if miny <= 0 <= maxy else math.cos(math.radians(min(abs(miny), abs(maxy))))
        return cls(unwrapped, lon0, max(c, 1e-6))

    def scaled(self) -> BaseGeometry:
        """The unwrapped area in the frame's scaled degrees."""
        return shapely.transform(
            self.unwrapped,
            lambda xy: np.column_stack([(xy[:, 0] - self.lon0) * self.c, xy[:, 1]]))

    def lonlat(self, geometry: BaseGeometry) -> BaseGeometry:
        """``geometry`` in scaled degrees back in (continuous) longitude and latitude."""
        return shapely.transform(
            geometry, lambda xy: np.column_stack([xy[:, 0] / self.c + self.lon0, xy[:, 1]]))


#: Upper bound of the metres in one degree of latitude, or of longitude × cos(latitude),
#: anywhere on the WGS84 ellipsoid (111,694 m: a degree of latitude at the poles).
_M_PER_DEGREE = 111_700.0


def _check_tolerance(tolerance: float, *, exact: bool = True) -> None:
    """Refuse a tolerance that is neither 0 (exact, if allowed) nor at least
    :data:`MIN_TOLERANCE`."""
    if (tolerance != 0 or not exact) and not (
        math.isfinite(tolerance) and tolerance >= MIN_TOLERANCE
    ):
        raise InputError(
            f"tolerance={tolerance!r} m: use 0 for exact pieces or at least {MIN_TOLERANCE} m "
            "(coordinates are sent rounded to 6 decimals, about 0.1 m)",
            field="tolerance",
        )


def _joined_across_180(geometry: BaseGeometry) -> tuple[BaseGeometry, float]:
    """``geometry`` with whole parts moved by 360° so that parts split at ±180° meet again,
    and the longitude in the middle of what it spans.

    The parts' longitude spans are laid on the circle; the circle is cut in the widest gap
    no part covers, and every part before the cut is moved one turn east. A part is never
    torn: it moves whole.
    """
    parts = _polygons(geometry)
    bounds = shapely.bounds(np.asarray(parts, dtype=object))
    order = np.argsort(bounds[:, 0], kind="stable")
    merged: list[list[float]] = []
    for lo, hi in bounds[order][:, [0, 2]].tolist():
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    gaps = [merged[i + 1][0] - merged[i][1] for i in range(len(merged) - 1)]
    wrap = merged[0][0] + 360 - merged[-1][1]
    if not gaps or wrap >= max(gaps):
        return geometry, (merged[0][0] + merged[-1][1]) / 2
    cut = int(np.argmax(gaps))
    east_of = merged[cut][1]  # parts up to here move one turn east
    moved = [
        shapely.transform(p, lambda xy: xy + [360.0, 0.0]) if b[2] <= east_of else p
        for p, b in zip(parts, bounds.tolist(), strict=True)
    ]
    return shapely.MultiPolygon(moved), (merged[cut + 1][0] + east_of + 360) / 2


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
    polygons = []
    filled = False
    for part in _polygons(area):
        holes = [shapely.Polygon(ring) for ring in part.interiors]
        if not holes:
            polygons.append(part)
            continue
        boxes = shapely.bounds(np.asarray(holes))
        thin = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]) <= 2 * reach
        keep = [
            h.exterior
            for h, is_thin in zip(holes, thin.tolist(), strict=True)
            if not is_thin and not shapely.buffer(h, -reach, quad_segs=2).is_empty
        ]
        filled |= len(keep) < len(holes)
        polygons.append(shapely.Polygon(part.exterior, keep))
    if len(polygons) == 1:
        return polygons[0]
    if filled:  # a filled hole may hold another part (an island in a lake): merge them
        return shapely.union_all(polygons)
    return shapely.MultiPolygon(polygons)
