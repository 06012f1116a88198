"""The merging of pieces: the pieces of one area joined, the pair with the fewest bytes
first, while the joined ring still fits the request line and stays one valid ring —
neighbours by their union, pieces of different parts within a link's reach by a connector
(:mod:`parcelsearch.planning.tiling.connectors`).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch._fetch import wire as _wire
from parcelsearch.planning.tiling.connectors import (
    MAX_LINK_M,
    connect,
    crossing,
    grid_rings,
    grid_vertices,
    link_cos_lat,
    pairs_within_reach,
)
from parcelsearch.planning.tiling.grid import SCALE, canonical_ring, polygons, vertex_codes
from parcelsearch.planning.tiling.repack import neighbours as _neighbours
from parcelsearch.planning.tiling.request_budget import Budget

__all__ = ["Within", "merged"]


#: Whether what a connector adds may be taken (:class:`~.match_rule.SliverReach`).
Within = Callable[[np.ndarray], bool]


def merged(pieces: list[Polygon], parts: list[int], area: BaseGeometry, budget: Budget,
           connectors: bool = True, link_m: float = MAX_LINK_M,
           within: Within | None = None) -> list[Polygon]:
    """The pieces of ``area`` (each of part ``parts[k]``) merged while the merged rings fit
    ``budget`` (:class:`_Merger`): connectors only with ``connectors``, along links at most
    ``link_m`` metres long whose sliver ``within`` accepts, when given; sorted by when they
    were made."""
    return _Merger(pieces, parts, area, budget, connectors, link_m, within).run()


#: No connector edges (a piece without connectors).
_NO_EDGES = np.zeros((0, 2, 2), dtype=np.int64)


def _join(a: Polygon, b: Polygon, budget: Budget) -> tuple[Polygon, int] | None:
    """The union of two pieces if it is one valid ring within the budget, with its bytes.

    Pieces tile their part exactly (shared edges have the same vertices), so a coverage
    union joins them without any rounding.
    """
    try:
        union = shapely.coverage_union(a, b)
    except shapely.errors.GEOSException:  # a connector's sliver overlaps the other piece
        return None
    if union.geom_type != "Polygon" or union.interiors or not union.is_valid:
        return None
    size = _sent_bytes(union, budget)
    return (union, size) if size <= budget.max_request_bytes else None


#: Pieces within a link's reach (the nearest by their boxes) each piece tries first.
_NEAREST = 3


class _Merger:
    """Pieces of one area merged, the pair with the fewest bytes first, while the merged ring
    fits: pieces sharing an edge by their union, pieces of different parts within a link's
    reach by a connector (:func:`parcelsearch.planning.tiling.connectors.connect`); a piece never
    gets a connector to another piece of a part it already holds. Without ``connectors``,
    only pieces sharing an edge are merged.

    A piece first tries only its :data:`_NEAREST` nearest pieces within reach (and those
    that try it); the farther pairs, whose links other islands mostly block, are tried
    once no nearer pair fits, between the pieces they have become part of. On the New
    Zealand island groups of the benchmark this tries 1,023 connectors where trying every
    pair at once tried 2,643, and leaves 302 pieces where it left 308."""

    def __init__(self, pieces: list[Polygon], parts: list[int], area: BaseGeometry,
                 budget: Budget, connectors: bool = True, link_m: float = MAX_LINK_M,
                 within: Within | None = None) -> None:
        self.budget = budget
        self.link_m, self.within = link_m, within
        self.parts = {i: {part} for i, part in enumerate(parts)}
        self.alive: dict[int, Polygon] = dict(enumerate(pieces))
        self.sizes = dict(enumerate(budget.sent_bytes(pieces).tolist()))
        self.touching = {i: set(n) for i, n in enumerate(_neighbours(pieces))}
        self.cos_lat = link_cos_lat(area)
        several = connectors and len(set(parts)) > 1  # else no connector is ever tried
        near = _near(pieces, parts, self.cos_lat, link_m) if several else [set() for _ in pieces]
        first, self.later = _nearest_first(pieces, near, self.cos_lat, _NEAREST)
        self.near = dict(enumerate(first))
        self.merged_into: dict[int, int] = {}  # a merged piece → the one it became part of
        self.tried: set[tuple[int, int]] = set()  # pairs tried (a pair fails twice alike)
        self.area, self.first_pieces = area, pieces  # for outer and first_tree, made when needed
        self.links: dict[tuple[int, ...], bool] = {}
        self.grids: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # what the last connector made: the joined ring's grid (:meth:`_grid`) and its
        # connector edges, for _replace to keep
        self.made: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
        # each piece's connector edges (n, 2, 2), grid units; a new connector is made to
        # cross none of them (its ring would cross itself)
        self.bridges: dict[int, np.ndarray] = {}
        self.heap: list[tuple[int, int, int]] = []
        self._fill_heap()

    def _pairs(self, i: int) -> list[tuple[int, int, int]]:
        """The pairs of piece ``i`` worth trying, as ``(bytes of both, lower id, higher id)``:
        every neighbour, and every piece within reach whose bytes leave room for a
        connector."""
        room = self.budget.max_request_bytes + self.budget.base - 1
        totals = ((self.sizes[i] + self.sizes[j], j) for j in self.touching[i] | self.near[i])
        return [(total, min(i, j), max(i, j)) for total, j in totals
                if total <= room or j in self.touching[i]]  # a connector only adds bytes

    def run(self) -> list[Polygon]:
        """Merge until no pair fits, the nearest pairs first, then the farther ones; the
        pieces left."""
        self._merge()
        self._bring_back_later()
        self._merge()
        return [self.alive[i] for i in sorted(self.alive)]

    def _merge(self) -> None:
        """Merge the pairs on the heap, fewest bytes first, until none is left."""
        while self.heap:
            _, i, j = heapq.heappop(self.heap)
            if i not in self.alive or j not in self.alive:
                continue
            self.made = None
            self.tried.add((i, j))
            if j in self.touching[i]:
                joined = _join(self.alive[i], self.alive[j], self.budget)
            else:
                joined = self._connect(i, j)
            if joined is not None:
                self._replace(i, j, *joined)

    def _bring_back_later(self) -> None:
        """The pairs left for later, as the pieces they are now part of, within reach of
        each other and on the heap (those not tried already, of no common part)."""
        for p, q in self.later:
            i, j = sorted((self._now(p), self._now(q)))
            if i != j and (i, j) not in self.tried and not self.parts[i] & self.parts[j]:
                self.near[i].add(j)
                self.near[j].add(i)
        self.later = []
        self._fill_heap()

    def _fill_heap(self) -> None:
        """Every pair of live pieces worth trying (:meth:`_pairs`) and not tried yet on the
        heap, each once (from its lower id): a pair tried twice would fail twice alike."""
        self.heap = [pair for i in self.alive for pair in self._pairs(i)
                     if pair[1] == i and (i, pair[2]) not in self.tried]
        heapq.heapify(self.heap)

    def _now(self, k: int) -> int:
        """The piece that piece ``k`` is part of now."""
        while k in self.merged_into:
            k = self.merged_into[k]
        return k

    def _clear(self, a: np.ndarray, b: np.ndarray) -> list[bool]:
        """Whether each link from ``a[k]`` to ``b[k]`` (grid units) meets no piece of the area
        but at its two ends: the link less a hundredth of a grid step at each end meets none
        (stricter than entering none, and far cheaper to test than the relation). The
        pieces it is tested against are the first ones, which merging never changes, so each
        answer is kept: a merged piece tries the same links again."""
        keys = [(*p, *q) for p, q in zip(a.tolist(), b.tolist(), strict=True)]
        todo = [k for k, key in enumerate(keys) if key not in self.links]
        if todo:
            start, end = a[todo], b[todo]
            delta = end - start
            step = delta / np.maximum(1.0, np.hypot(delta[:, 0], delta[:, 1]))[:, None] / 100
            links = shapely.linestrings(np.stack([start + step, end - step], axis=1) / SCALE)
            first, tree = self.first_tree
            which, hits = tree.query(links)
            met = which[shapely.intersects(first[hits], links[which])]
            blocked = np.bincount(met, minlength=len(todo)) > 0
            for k, shut in zip(todo, blocked.tolist(), strict=True):
                self.links[keys[k]] = not shut
        return [self.links[key] for key in keys]

    @functools.cached_property
    def first_tree(self) -> tuple[np.ndarray, shapely.STRtree]:
        """The first pieces, prepared, and their tree: what links are tested against, made
        when the first connector is tried (often none is)."""
        first = np.asarray(self.first_pieces, dtype=object)
        shapely.prepare(first)  # O(log n) a link
        return first, shapely.STRtree(first)

    @functools.cached_property
    def outer(self) -> tuple[np.ndarray, np.ndarray]:
        """The area's outer edges (:func:`_outer_edges`), made when a connector first needs
        them."""
        return _outer_edges(self.area)

    def _grid(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A piece's ring in grid units, its vertices' bytes and its outer edges
        (:meth:`_grids_of`), made once (the first pieces' all at once)."""
        if k not in self.grids:
            if k < len(self.first_pieces):
                self.grids[k] = self.first_grids[k]
            else:
                self.grids[k] = self._grids_of([self.alive[k]])[0]
        return self.grids[k]

    @functools.cached_property
    def first_grids(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`_grids_of` every first piece, made together when a connector is first
        tried (array work on all of them at once, not on each in turn)."""
        return self._grids_of(self.first_pieces)

    def _grids_of(self, pieces: list[Polygon]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each piece's ring in grid units
        (:func:`~parcelsearch.planning.tiling.connectors.grid_rings`),
        its vertices' bytes and, for each vertex ``k``, whether the edge ``k → k+1`` is one
        of the area's outer edges; all pieces measured at once."""
        rings = grid_rings(pieces)
        xy = np.concatenate(rings)
        starts = np.cumsum([len(ring) for ring in rings])[:-1]
        vertices, edges = self.outer
        after = _next_in_ring(len(xy), starts)
        keys, known = _edge_keys(vertices, xy, after)  # known: not a connector's end
        found = np.minimum(np.searchsorted(edges, keys), len(edges) - 1)
        outer = known & known[after] & (edges[found] == keys)
        return list(zip(rings, np.split(_wire.vertex_bytes_array(xy / SCALE), starts),
                        np.split(outer, starts), strict=True))

    def _connect(self, i: int, j: int) -> tuple[Polygon, int] | None:
        """Pieces ``i`` and ``j`` joined by a connector, with its bytes, if that fits."""
        own, other = self.bridges.get(i, _NO_EDGES), self.bridges.get(j, _NO_EDGES)
        if len(own) and len(other) and crossing(own[:, 0], own[:, 1], other).any():
            return None  # their connectors cross: any ring holding both crosses itself
        (ra, va, oa), (rb, vb, ob) = self._grid(i), self._grid(j)
        earlier = np.concatenate([own, other])

        def takeable(starts: np.ndarray, ends: np.ndarray) -> list[bool]:
            """Clear links (:meth:`_clear`) that cross no earlier connector of either."""
            open_ = self._clear(starts, ends)
            if len(earlier) and any(open_):
                crossed = crossing(starts, ends, earlier).tolist()
                open_ = [ok and not cut for ok, cut in zip(open_, crossed, strict=True)]
            return open_

        found = connect(ra, rb, oa, ob, self.cos_lat, takeable, self.link_m, self.within)
        if found is None:
            return None
        ring, index = found
        at_b = int(np.flatnonzero(index >= len(ra))[0])  # ring[at_b] is b, ring[at_b - 1] a
        ends = ring[at_b + len(rb): at_b + len(rb) + 2]  # b', a'
        added = [_wire.vertex_bytes(x / SCALE, y / SCALE) for x, y in ends.tolist()]
        vbytes = np.concatenate([va, vb, added])[index]
        size = _canonical_bytes(ring, vbytes, self.budget)
        if size > self.budget.max_request_bytes:
            return None
        outer = np.concatenate([oa, ob, [False, False]])[index]
        outer[[at_b - 1, at_b + len(rb) - 1]] = False  # a → b and b-1 → b' are new edges
        # a → b, b-1 → b', b' → a', a' → a+1
        ends_at = [at_b - 1, at_b, at_b + len(rb) - 1, at_b + len(rb), at_b + len(rb) + 1,
                   (at_b + len(rb) + 2) % len(ring)]
        a, b, b_1, b2, a2, a_1 = ring[ends_at]
        new = np.array([[a, b], [b_1, b2], [b2, a2], [a2, a_1]])
        self.made = ((ring, vbytes, outer), np.concatenate([earlier, new]))
        return Polygon(ring / SCALE), size

    def _replace(self, i: int, j: int, polygon: Polygon, size: int) -> None:
        k = max(self.alive) + 1
        self.merged_into[i] = self.merged_into[j] = k
        del self.alive[i], self.alive[j], self.sizes[i], self.sizes[j]
        self.grids.pop(i, None)
        self.grids.pop(j, None)
        self.alive[k], self.sizes[k] = polygon, size
        both = [self.bridges.pop(i, _NO_EDGES), self.bridges.pop(j, _NO_EDGES)]
        if self.made is not None:  # joined by a connector: its ring and edges are known
            self.grids[k], edges = self.made
        else:
            edges = np.concatenate(both)
        if len(edges):
            self.bridges[k] = edges
        for links in (self.touching, self.near):
            joined = (links.pop(i) | links.pop(j)) - {i, j}
            links[k] = joined
            for m in joined:
                links[m] -= {i, j}
                links[m].add(k)
        self.parts[k] = self.parts.pop(i) | self.parts.pop(j)
        for m in [m for m in self.near[k] if self.parts[m] & self.parts[k]]:
            self.near[k].discard(m)
            self.near[m].discard(k)
        for pair in self._pairs(k):
            heapq.heappush(self.heap, pair)


def _sent_bytes(polygon: Polygon, budget: Budget) -> int:
    """Request-line bytes of a piece as it is sent (its canonical ring)."""
    return budget.ring_bytes(canonical_ring(polygon))


def _canonical_bytes(ring: np.ndarray, vbytes: np.ndarray, budget: Budget) -> int:
    """Request-line bytes of a ring (grid units, not closed; its vertices' bytes given) as it
    is sent: closed on its lowest-left vertex
    (:func:`~parcelsearch.planning.tiling.grid.canonical_ring`)."""
    start = int(np.lexsort((ring[:, 1], ring[:, 0]))[0])
    return budget.base - 1 + int(vbytes.sum()) + int(vbytes[start])


def _near(pieces: list[Polygon], parts: list[int], cos_lat: float,
          link_m: float = MAX_LINK_M) -> list[set[int]]:
    """For each piece, the pieces of other parts within a link's reach (``link_m``) of it
    (measured with longitude scaled by ``cos_lat``)."""
    graph: list[set[int]] = [set() for _ in pieces]
    left, right = pairs_within_reach(pieces, cos_lat, labels=parts, link_m=link_m)
    for i, j in zip(left.tolist(), right.tolist(), strict=True):
        graph[i].add(j)
        graph[j].add(i)
    return graph


def _nearest_first(pieces: list[Polygon], near: list[set[int]], cos_lat: float,
                   count: int) -> tuple[list[set[int]], list[tuple[int, int]]]:
    """``near`` split in two: each piece's ``count`` nearest pieces within reach (by the
    gap between their bounding boxes, longitude scaled by ``cos_lat``; ties by index), and
    the pieces that count it among theirs; and the other pairs ``(i, j)``, ``i < j``."""
    boxes = shapely.bounds(np.asarray(pieces, dtype=object))
    first: list[set[int]] = [set() for _ in pieces]
    for i, others in enumerate(near):
        chosen = sorted(others)
        if len(chosen) > count:
            ids = np.array(chosen)
            gap = np.maximum(0.0, np.maximum(boxes[ids, :2] - boxes[i, 2:],
                                             boxes[i, :2] - boxes[ids, 2:]))
            order = np.argsort(np.hypot(gap[:, 0] * cos_lat, gap[:, 1]), kind="stable")
            chosen = ids[order[:count]].tolist()
        for j in chosen:
            first[i].add(j)
            first[j].add(i)
    later = [(i, j) for i, others in enumerate(near) for j in sorted(others)
             if i < j and j not in first[i]]
    return first, later


def _outer_edges(area: BaseGeometry) -> tuple[np.ndarray, np.ndarray]:
    """The edges of the area's own boundary (undirected): the area's vertex codes
    (:func:`~parcelsearch.planning.tiling.grid.vertex_codes`, sorted, unique), and each edge
    as ``low * len(codes) + high`` of its ends' places among them (sorted)."""
    xy, starts = grid_vertices(shapely.get_rings(polygons(area)))
    after = _next_in_ring(len(xy), starts)
    vertices = np.unique(vertex_codes(xy))
    # an edge on ±180° is where the area was split at the antimeridian, not its boundary
    cut = (np.abs(xy[:, 0]) == 180 * SCALE) & (np.abs(xy[after, 0]) == 180 * SCALE)
    return vertices, np.unique(_edge_keys(vertices, xy, after)[0][~cut])


def _next_in_ring(count: int, starts: np.ndarray) -> np.ndarray:
    """For each of ``count`` vertices of rings laid end to end (``starts``: where each ring
    but the first starts), the index of the next vertex round its ring."""
    after = np.arange(1, count + 1)
    first = np.concatenate([[0], starts]).astype(np.int64)
    after[np.append(first[1:], count) - 1] = first
    return after


def _edge_keys(vertices: np.ndarray, xy: np.ndarray,
               after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each edge ``k → after[k]`` of rings (grid units; :func:`_next_in_ring`) as
    ``low * len(vertices) + high`` of its ends' places among ``vertices`` (sorted
    :func:`~parcelsearch.planning.tiling.grid.vertex_codes`), and whether each vertex is one
    of them (the key of an edge from one that is not means nothing)."""
    codes = vertex_codes(xy)
    at = np.minimum(np.searchsorted(vertices, codes), len(vertices) - 1)
    ahead = at[after]
    return np.minimum(at, ahead) * len(vertices) + np.maximum(at, ahead), vertices[at] == codes
