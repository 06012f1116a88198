"""Connectors: two pieces of one area that do not touch joined into one ring by a sliver.

A piece is one ring, so two pieces apart (islands of one area, or two half-full pieces of
one part) can share a request only through a *connector*: the ring leaves piece A at a
vertex ``a``, runs straight to a vertex ``b`` of piece B, goes round B, steps to ``b'`` (a
grid neighbour of ``b``), runs back to ``a'`` (a grid neighbour of ``a``) and goes on round
A. Everything is done in integer grid units, so the ring is exactly what is sent.

What a connector adds to the pieces' union, precisely:

- the *strip* ``a, b, b', a'``: every point of it lies within one grid step (diagonal:
  √2 steps) of the straight *link* from ``a`` to ``b``, at most :data:`MAX_LINK_M` metres
  long; ``a'`` and ``b'`` are chosen, among the grid neighbours, to make the strip as thin
  as the grid allows (its width across the link is usually a small fraction of a grid
  step, so its area is a few square centimetres a hundred metres of link);
- two thin triangles where the ring leaves and rejoins A and B, each within one grid
  step (√2 diagonally) of an edge of the area's boundary.

A connector starts and ends on edges of the area's own boundary (never on a cut between
two pieces), so pieces still meet edge to edge, and A and B are kept whole: the joined
ring covers both (checked exactly: its area, in grid units, is theirs plus the strip's and
the triangles').
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch.planning.tiling.grid import SCALE

__all__ = [
    "MAX_LINK_M",
    "connect",
    "crossing",
    "grid_rings",
    "grid_vertices",
    "link_cos_lat",
    "link_reach_degrees",
    "linked_groups",
    "pairs_within_reach",
    "reach_groups",
]

#: Longest link a connector may take, in metres on the ground.
MAX_LINK_M = 3_000.0
#: Metres in one grid step of latitude (at least; 1e-6° ≥ 0.1106 m anywhere).
_M_PER_STEP = 0.1106
#: Vertex pairs (closest first) tried for one connector.
_PAIRS = 12
#: Vertex pairs up to which :func:`_closest_pairs` measures every pair instead of pruning.
_MEASURE_ALL = 4096
#: Grid neighbours a connector's ends may step to.
_STEPS = [(1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)]


def link_cos_lat(area: BaseGeometry) -> float:
    """cos(latitude) links are measured with in ``area``: where a degree of longitude is
    shortest (so a link is never measured shorter than it is)."""
    _, miny, _, maxy = area.bounds
    return math.cos(math.radians(min(89.9, max(abs(miny), abs(maxy)))))


def link_reach_degrees(link_m: float = MAX_LINK_M) -> float:
    """``link_m`` (:data:`MAX_LINK_M` by default) in degrees of latitude (or of longitude ×
    cos(latitude)), at least: the reach within which pieces may be linked."""
    return link_m / (_M_PER_STEP * SCALE)


def reach_groups(
    parts: Sequence[Polygon], cos_lat: float, link_m: float = MAX_LINK_M
) -> list[list[int]]:
    """The parts (indices) grouped by chains of links: two parts are in one group if a chain
    of parts, each within a link's reach (``link_m``) of the next (longitude scaled by
    ``cos_lat``, as pieces are when linked), joins them. No piece spans two groups."""
    if len(parts) < 2 or link_m <= 0:
        return [[k] for k in range(len(parts))]
    left, right = pairs_within_reach(parts, cos_lat, link_m=link_m)
    return linked_groups(len(parts), left.tolist(), right.tolist())


def pairs_within_reach(
    shapes: Sequence[Polygon],
    cos_lat: float,
    labels: Sequence[int] | None = None,
    link_m: float = MAX_LINK_M,
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs ``(i, j)``, ``i < j``, of ``shapes`` within a link's reach (``link_m``) of
    each other (longitude scaled by ``cos_lat``, as links are measured); with ``labels``, only pairs
    whose labels differ. Boxes grown by the reach find the candidates, which alone are
    measured, each against the other prepared (indexed: far quicker than a tree's own
    distance query on shapes of thousands of vertices)."""
    scaled = shapely.transform(np.asarray(shapes, dtype=object), lambda xy: xy * [cos_lat, 1.0])
    reach = link_reach_degrees(link_m)
    low_x, low_y, high_x, high_y = shapely.bounds(scaled).T
    grown = shapely.box(low_x - reach, low_y - reach, high_x + reach, high_y + reach)
    left, right = shapely.STRtree(scaled).query(grown)
    keep = left < right
    if labels is not None:
        label = np.asarray(labels)
        keep &= label[left] != label[right]
    left, right = left[keep], right[keep]
    shapely.prepare(scaled)
    close = shapely.dwithin(scaled[left], scaled[right], reach)
    return left[close], right[close]


def linked_groups(count: int, left: Sequence[int], right: Sequence[int]) -> list[list[int]]:
    """``range(count)`` grouped by the links ``left[k] — right[k]`` (and chains of them):
    each group's members ascending, the groups in the order of their smallest member."""
    root = list(range(count))

    def find(k: int) -> int:
        while root[k] != k:
            root[k] = root[root[k]]
            k = root[k]
        return k

    for i, j in zip(left, right, strict=True):
        root[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for k in range(count):
        groups.setdefault(find(k), []).append(k)
    return list(groups.values())


def grid_vertices(rings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of closed rings on the grid (grid units, int64), read all at once and
    laid end to end, each ring's closing vertex left out; and where each ring but the first
    starts among them."""
    xy, which = shapely.get_coordinates(rings, return_index=True)
    kept = np.append(which[1:] == which[:-1], False)  # not a ring's closing vertex
    starts = np.flatnonzero(np.diff(which[kept])) + 1
    return np.rint(xy[kept] * SCALE).astype(np.int64), starts


def grid_rings(pieces: Sequence[Polygon]) -> list[np.ndarray]:
    """The exterior ring of each of ``pieces`` on the grid (:func:`grid_vertices`: grid
    units, without the closing vertex), counter-clockwise."""
    xy, starts = grid_vertices(shapely.get_exterior_ring(np.asarray(pieces, dtype=object)))
    return [
        np.ascontiguousarray(ring[::-1] if _twice_area(ring) < 0 else ring)
        for ring in np.split(xy, starts)
    ]


def _twice_area(ring: np.ndarray) -> int:
    """Twice the signed area of a ring (grid units², exact), counter-clockwise positive."""
    x, y = ring[:, 0], ring[:, 1]
    return int((x[:-1] * y[1:] - x[1:] * y[:-1]).sum() + x[-1] * y[0] - x[0] * y[-1])


def connect(
    a_ring: np.ndarray,
    b_ring: np.ndarray,
    a_outer: np.ndarray,
    b_outer: np.ndarray,
    cos_lat: float,
    clear: Callable[[np.ndarray, np.ndarray], Sequence[bool]],
    link_m: float = MAX_LINK_M,
    within: Callable[[np.ndarray], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """One ring made of ``a_ring`` and ``b_ring`` joined by a connector, or None if no valid
    one is found.

    Returns
    -------
    ring, index
        The ring (grid units, counter-clockwise, not closed), and where each of its
        vertices comes from: ``k < len(a_ring)`` is ``a_ring[k]``, the next ``len(b_ring)``
        are ``b_ring``'s, the last two ``b'`` and ``a'``.

    Parameters
    ----------
    a_ring, b_ring
        The two pieces' rings, as :func:`grid_rings` gives them.
    a_outer, b_outer
        For each vertex ``k`` of the ring, whether the edge ``k → k+1`` lies on the area's
        own boundary (only such edges may be left for a connector).
    cos_lat
        cos(latitude) near the pieces, to measure a link on the ground.
    clear
        Whether each link (its ends: two ``(n, 2)`` arrays, grid units) may be taken: it
        meets no piece of the area but at its ends, nor an earlier connector of either piece
        (asked about the closest link alone, then about all the others at once).
    link_m
        Longest link taken, in metres (:data:`MAX_LINK_M` by default).
    within
        If given, whether what a link adds may be taken: called with the link ``a → b``
        and the two edges it leaves (``a → a+1``, ``b-1 → b``) as ``(3, 2, 2)`` grid units
        (:class:`parcelsearch.planning.tiling.match_rule.SliverReach`); a link it refuses is passed
        over for the next.
    """
    a_from = np.flatnonzero(a_outer)  # a: the edge a → a+1 is left
    b_to = (np.flatnonzero(b_outer) + 1) % len(b_ring)  # b: the edge b-1 → b is left
    if not len(a_from) or not len(b_to):
        return None
    pairs = [
        (i, j)
        for i, j, metres in _closest_pairs(a_ring[a_from], b_ring[b_to], cos_lat)
        if metres <= link_m
    ]  # closest first: a prefix
    if not pairs:
        return None
    starts = a_from[[i for i, _ in pairs]].tolist()
    ends = b_to[[j for _, j in pairs]].tolist()
    # The cheaper test first: the closest link alone (on island groups it is taken two
    # times in three), then every other link at once.
    for batch in (slice(0, 1), slice(1, None)):
        open_ = clear(a_ring[starts[batch]], b_ring[ends[batch]])
        for i, j, ok in zip(starts[batch], ends[batch], open_, strict=True):
            if not ok or (
                within is not None
                and not within(
                    np.array(
                        [
                            [a_ring[i], b_ring[j]],
                            [a_ring[i], a_ring[(i + 1) % len(a_ring)]],
                            [b_ring[j - 1], b_ring[j]],
                        ]
                    )
                )
            ):
                continue
            found = _connected(a_ring, b_ring, i, j)
            if found is not None and shapely.is_valid(shapely.polygons(found[0] / SCALE)):
                return found
    return None


def crossing(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Whether each link from ``starts[k]`` to ``ends[k]`` (grid units, closed segments)
    meets one of ``edges`` (``(n, 2, 2)``, grid units) that shares no end with it: exact
    integer orientation tests (an edge collinear with a link is not counted).

    A joined ring holds every edge of both pieces' earlier connectors, so a link meeting
    one of them (but at a shared end) makes a ring that crosses itself: it need not be
    built to be refused."""
    if not len(edges) or not len(starts):
        return np.zeros(len(starts), dtype=bool)
    corners = edges.reshape(-1, 2)
    if (corners.min(axis=0) > np.maximum(starts, ends).max(axis=0)).any() or (
        corners.max(axis=0) < np.minimum(starts, ends).min(axis=0)
    ).any():
        return np.zeros(len(starts), dtype=bool)  # their boxes do not meet
    p, q = starts[:, None, :], ends[:, None, :]
    u, v = edges[None, :, 0, :], edges[None, :, 1, :]

    def side(o: np.ndarray, d: np.ndarray, x: np.ndarray) -> np.ndarray:
        # sign of the cross product (d - o) × (x - o): |coordinates| < 2**28, exact in int64
        return np.asarray(
            np.sign(
                (d[..., 0] - o[..., 0]) * (x[..., 1] - o[..., 1])
                - (d[..., 1] - o[..., 1]) * (x[..., 0] - o[..., 0])
            )
        )

    o1, o2 = side(p, q, u), side(p, q, v)
    o3, o4 = side(u, v, p), side(u, v, q)
    meets = (o1 * o2 <= 0) & (o3 * o4 <= 0) & ~((o1 == 0) & (o2 == 0))
    shared = (
        (u == p).all(axis=-1)
        | (u == q).all(axis=-1)
        | (v == p).all(axis=-1)
        | (v == q).all(axis=-1)
    )
    return np.asarray((meets & ~shared).any(axis=1))


def _closest_pairs(
    pa: np.ndarray, pb: np.ndarray, cos_lat: float, measure_all: int = _MEASURE_ALL
) -> list[tuple[int, int, float]]:
    """The :data:`_PAIRS` closest pairs of a vertex of ``pa`` and one of ``pb`` (grid units),
    as ``(index in pa, index in pb, metres)``, closest first (ties by index).

    Only the vertices that can be in one of them are measured against each other: a vertex
    farther from the other side's bounding box than the closest pairs of the few vertices
    nearest it cannot be (a box is never farther than any of its points). Up to
    ``measure_all`` pairs, every pair is measured: that is quicker than pruning.
    """
    count = min(_PAIRS, len(pa) * len(pb))
    if len(pa) * len(pb) <= measure_all:
        every = _metres(pa, pb, cos_lat).ravel()
        if len(every) > 4 * count:  # sort only those no farther than the count-th closest
            kept = np.flatnonzero(every <= np.partition(every, count - 1)[count - 1])
            first = kept[np.argsort(every[kept], kind="stable")[:count]]
        else:
            first = np.argsort(every, kind="stable")[:count]  # ties by index: row-major
        return [(k // len(pb), k % len(pb), float(every[k])) for k in first.tolist()]
    near_a = _box_metres(pa, pb, cos_lat)
    seeds = np.argsort(near_a, kind="stable")[:count]
    bound = np.sort(_metres(pa[seeds], pb, cos_lat), axis=None)[count - 1]
    keep_a = np.flatnonzero(near_a <= bound)
    keep_b = np.flatnonzero(_box_metres(pb, pa[keep_a], cos_lat) <= bound)
    metres = _metres(pa[keep_a], pb[keep_b], cos_lat)
    rows, cols = np.nonzero(metres <= np.sort(metres, axis=None)[count - 1])
    order = np.lexsort((keep_b[cols], keep_a[rows], metres[rows, cols]))[:count]
    return [
        (int(keep_a[rows[k]]), int(keep_b[cols[k]]), float(metres[rows[k], cols[k]]))
        for k in order.tolist()
    ]


def _metres(pa: np.ndarray, pb: np.ndarray, cos_lat: float) -> np.ndarray:
    """Metres (at least) from each vertex of ``pa`` to each of ``pb`` (grid units), ``(len(pa),
    len(pb))``."""
    return _ground_metres(pb[None, :, :] - pa[:, None, :], cos_lat)


def _box_metres(points: np.ndarray, other: np.ndarray, cos_lat: float) -> np.ndarray:
    """Metres, measured as :func:`_metres` does, from each of ``points`` to the bounding box
    of ``other`` (grid units): never more than to any vertex of ``other``."""
    off = np.maximum(0, np.maximum(other.min(axis=0) - points, points - other.max(axis=0)))
    return _ground_metres(off, cos_lat)


def _ground_metres(offset: np.ndarray, cos_lat: float) -> np.ndarray:
    """Metres (at least) of offsets in grid units (last axis: longitude, latitude)."""
    delta = offset.astype(float)
    return np.asarray(np.hypot(delta[..., 0] * cos_lat, delta[..., 1]) * _M_PER_STEP)


def _on_earth_xy(x: int, y: int) -> bool:
    """Whether a point (grid units) is a longitude in [-180, 180] and a latitude in
    [-90, 90]: a connector's end stepped to a grid neighbour must not leave them."""
    return abs(x) <= 180 * SCALE and abs(y) <= 90 * SCALE


def _connected(
    a_ring: np.ndarray, b_ring: np.ndarray, i: int, j: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The joined ring through a_ring[i] and b_ring[j] with the thinnest ends that keep both
    pieces whole (and its :func:`connect` index), or None. (Eight steps a side: plain
    integers, exact in grid units, are quicker than arrays here.)"""
    (ax, ay), (nx, ny) = a_ring[i].tolist(), a_ring[(i + 1) % len(a_ring)].tolist()
    (bx, by), (px, py) = b_ring[j].tolist(), b_ring[j - 1].tolist()
    dx, dy = bx - ax, by - ay  # the link
    ex, ey = nx - ax, ny - ay  # the edge a → a+1
    fx, fy = bx - px, by - py  # the edge b-1 → b
    # a' = a + s, b' = b + t: outside A past the edge a → a+1, outside B past b-1 → b,
    # and the strip a, b, b', a' turning left (counter-clockwise) and not flat.
    s_steps = [
        (sx, sy) for sx, sy in _STEPS if ex * sy - ey * sx < 0 and _on_earth_xy(ax + sx, ay + sy)
    ]
    t_steps = [
        (tx, ty)
        for tx, ty in _STEPS
        if fx * (by + ty - py) - fy * (bx + tx - px) < 0 and _on_earth_xy(bx + tx, by + ty)
    ]
    # Twice the strip's signed area: a, b, b+t, a+s (shoelace, exact in grid units); the
    # thinnest first (ties: s, then t, in step order).
    strips = []
    for si, (sx, sy) in enumerate(s_steps):
        cs = dx * sy - dy * sx  # a+s relative to a, across the link
        for ti, (tx, ty) in enumerate(t_steps):
            ct = dx * ty - dy * tx
            twice = cs + ct + tx * sy - ty * sx
            if cs > 0 and ct > 0 and twice > 0:
                strips.append((twice, si * len(t_steps) + ti))
    for twice, flat in sorted(strips)[:4]:
        (sx, sy), (tx, ty) = s_steps[flat // len(t_steps)], t_steps[flat % len(t_steps)]
        a2x, a2y, b2x, b2y = ax + sx, ay + sy, bx + tx, by + ty
        added = twice + abs(ex * sy - ey * sx) + abs(fx * (b2y - py) - fy * (b2x - px))
        # Twice the joined ring's area: A's and B's, less the two edges left, plus the four
        # new ones (a → b, b-1 → b', b' → a', a' → a+1), all exact in grid units.
        change = sum(
            p0 * q1 - p1 * q0
            for (p0, p1), (q0, q1) in (
                ((ax, ay), (bx, by)),
                ((px, py), (b2x, b2y)),
                ((b2x, b2y), (a2x, a2y)),
                ((a2x, a2y), (nx, ny)),
                ((nx, ny), (ax, ay)),
                ((bx, by), (px, py)),
            )
        )
        if change != added:
            continue
        na, nb = len(a_ring), len(b_ring)
        index = np.concatenate(
            [
                np.arange(i + 1),
                na + np.arange(j, nb),
                na + np.arange(j),
                [na + nb, na + nb + 1],
                np.arange(i + 1, na),
            ]
        )
        ends = np.array([(b2x, b2y), (a2x, a2y)], dtype=np.int64)
        return np.vstack([a_ring, b_ring, ends])[index], index
    return None
