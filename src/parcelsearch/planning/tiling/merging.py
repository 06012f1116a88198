"""The merging of pieces: the pieces of one area joined, the pair with the fewest bytes
first, while the joined ring still fits the request line and stays one valid ring —
neighbours by their union, pieces of different parts within a link's reach by a connector
(:mod:`parcelsearch.planning.tiling.connectors`).
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import _wire
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


def merged(
    pieces: list[Polygon],
    parts: list[int],
    area: BaseGeometry,
    budget: Budget,
    connectors: bool = True,
    link_m: float = MAX_LINK_M,
    within: Within | None = None,
) -> list[Polygon]:
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

#: A piece's ring in grid units (not closed), its vertices' bytes and, for each vertex
#: ``k``, whether the edge ``k → k+1`` is one of the area's outer edges (:meth:`_Merger._grid`).
_Grid = tuple[np.ndarray, np.ndarray, np.ndarray]


class _Piece(NamedTuple):
    """One live piece: all merging knows of it, made whole and replaced whole (never
    changed), so its facts cannot go out of step."""

    #: Its polygon.
    polygon: Polygon
    #: Its request bytes as sent.
    size: int
    #: The parts of the area it holds.
    parts: frozenset[int]
    #: The live pieces it shares an edge with.
    touching: frozenset[int]
    #: The live pieces of other parts within a link's reach it tries (by a connector).
    near: frozenset[int]
    #: Its connector edges ``(n, 2, 2)``, grid units: a new connector is made to cross none
    #: of them (its ring would cross itself).
    bridges: np.ndarray = _NO_EDGES
    #: Its :data:`_Grid`, once known (a connector's ring is known when it is made).
    grid: _Grid | None = None


class _Joined(NamedTuple):
    """What joining two pieces made: the joined polygon, its bytes, its connector edges and,
    when a connector made it, its :data:`_Grid`."""

    polygon: Polygon
    size: int
    bridges: np.ndarray
    grid: _Grid | None = None


class _FirstPieces:
    """An area's first pieces, which merging never changes: what a connector's link is
    tested against (it may meet none of them but at its ends) and where their rings and the
    area's outer edges are measured; each answer made once and kept."""

    def __init__(self, area: BaseGeometry, pieces: list[Polygon]) -> None:
        self.area, self.pieces = area, pieces
        self.links: dict[tuple[int, ...], bool] = {}  # a link's ends → whether it is clear

    def clear(self, a: np.ndarray, b: np.ndarray) -> list[bool]:
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
            first, tree = self.tree
            which, hits = tree.query(links)
            met = which[shapely.intersects(first[hits], links[which])]
            blocked = np.bincount(met, minlength=len(todo)) > 0
            for k, shut in zip(todo, blocked.tolist(), strict=True):
                self.links[keys[k]] = not shut
        return [self.links[key] for key in keys]

    @functools.cached_property
    def tree(self) -> tuple[np.ndarray, shapely.STRtree]:
        """The first pieces, prepared, and their tree: what links are tested against, made
        when the first connector is tried (often none is)."""
        first = np.asarray(self.pieces, dtype=object)
        shapely.prepare(first)  # O(log n) a link
        return first, shapely.STRtree(first)

    @functools.cached_property
    def outer(self) -> tuple[np.ndarray, np.ndarray]:
        """The area's outer edges (:func:`_outer_edges`), made when a connector first needs
        them."""
        return _outer_edges(self.area)

    @functools.cached_property
    def grids(self) -> list[_Grid]:
        """:meth:`grids_of` every first piece, made together when a connector is first
        tried (array work on all of them at once, not on each in turn)."""
        return self.grids_of(self.pieces)

    def grids_of(self, pieces: list[Polygon]) -> list[_Grid]:
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
        return list(
            zip(
                rings,
                np.split(_wire.vertex_bytes_array(xy / SCALE), starts),
                np.split(outer, starts),
                strict=True,
            )
        )


class _Merger:
    """Pieces of one area merged, the pair with the fewest bytes first, while the merged ring
    fits: pieces sharing an edge by their union, pieces of different parts within a link's
    reach by a connector (:func:`parcelsearch.planning.tiling.connectors.connect`); a piece never
    gets a connector to another piece of a part it already holds. Without ``connectors``,
    only pieces sharing an edge are merged.

    A piece first tries only its :data:`_NEAREST` nearest pieces within reach (and those
    that try it); the farther pairs, whose links other islands mostly block, are tried
    once no nearer pair fits, between the pieces they have become part of (fewer tries and
    fewer pieces than trying every pair at once: ``docs/guide/planning.md``, "Figures
    behind these choices").

    The live pieces are :attr:`live`, one :class:`_Piece` record each by id: a merge puts
    the joined piece's record and its neighbours' new ones in whole (:meth:`_put_joined`),
    and a record is never changed in place."""

    def __init__(
        self,
        pieces: list[Polygon],
        parts: list[int],
        area: BaseGeometry,
        budget: Budget,
        connectors: bool = True,
        link_m: float = MAX_LINK_M,
        within: Within | None = None,
    ) -> None:
        self.budget = budget
        self.link_m, self.within = link_m, within
        self.cos_lat = link_cos_lat(area)
        several = connectors and len(set(parts)) > 1  # else no connector is ever tried
        near = _near(pieces, parts, self.cos_lat, link_m) if several else [set() for _ in pieces]
        first, self.later = _nearest_first(pieces, near, self.cos_lat, _NEAREST)
        self.live: dict[int, _Piece] = {
            i: _Piece(piece, size, frozenset((part,)), frozenset(touching), frozenset(close))
            for i, (piece, size, part, touching, close) in enumerate(
                zip(
                    pieces,
                    budget.sent_bytes(pieces).tolist(),
                    parts,
                    _neighbours(pieces),
                    first,
                    strict=True,
                )
            )
        }
        self.next_id = len(pieces)  # ids are given in turn: a joined piece takes the next
        self.merged_into: dict[int, int] = {}  # a merged piece → the one it became part of
        self.tried: set[tuple[int, int]] = set()  # pairs tried (a pair fails twice alike)
        self.first = _FirstPieces(area, pieces)
        self.heap: list[tuple[int, int, int]] = []
        self._fill_heap()

    def _pairs(self, i: int) -> list[tuple[int, int, int]]:
        """The pairs of piece ``i`` worth trying, as ``(bytes of both, lower id, higher id)``:
        every neighbour, and every piece within reach whose bytes leave room for a
        connector."""
        room = self.budget.max_request_bytes + self.budget.base - 1
        live, piece = self.live, self.live[i]
        totals = ((piece.size + live[j].size, j) for j in piece.touching | piece.near)
        return [
            (total, min(i, j), max(i, j))
            for total, j in totals
            if total <= room or j in piece.touching
        ]  # a connector only adds bytes

    def run(self) -> list[Polygon]:
        """Merge until no pair fits, the nearest pairs first, then the farther ones; the
        pieces left."""
        self._merge()
        self._bring_back_later()
        self._merge()
        return [self.live[i].polygon for i in sorted(self.live)]

    def _merge(self) -> None:
        """Merge the pairs on the heap, fewest bytes first, until none is left."""
        while self.heap:
            _, i, j = heapq.heappop(self.heap)
            if i not in self.live or j not in self.live:
                continue
            self.tried.add((i, j))
            joined = self._union(i, j) if j in self.live[i].touching else self._connect(i, j)
            if joined is not None:
                self._put_joined(i, j, joined)

    def _union(self, i: int, j: int) -> _Joined | None:
        """Neighbours ``i`` and ``j`` joined by their union (:func:`_join`), if that fits."""
        a, b = self.live[i], self.live[j]
        found = _join(a.polygon, b.polygon, self.budget)
        if found is None:
            return None
        return _Joined(*found, np.concatenate([a.bridges, b.bridges]))

    def _bring_back_later(self) -> None:
        """The pairs left for later, as the pieces they are now part of, within reach of
        each other and on the heap (those not tried already, of no common part)."""
        live = self.live
        for p, q in self.later:
            i, j = sorted((self._now(p), self._now(q)))
            if i != j and (i, j) not in self.tried and not live[i].parts & live[j].parts:
                live[i] = live[i]._replace(near=live[i].near | {j})
                live[j] = live[j]._replace(near=live[j].near | {i})
        self.later = []
        self._fill_heap()

    def _fill_heap(self) -> None:
        """Every pair of live pieces worth trying (:meth:`_pairs`) and not tried yet on the
        heap, each once (from its lower id): a pair tried twice would fail twice alike."""
        self.heap = [
            pair
            for i in self.live
            for pair in self._pairs(i)
            if pair[1] == i and (i, pair[2]) not in self.tried
        ]
        heapq.heapify(self.heap)

    def _now(self, k: int) -> int:
        """The piece that piece ``k`` is part of now."""
        while k in self.merged_into:
            k = self.merged_into[k]
        return k

    def _grid(self, k: int) -> _Grid:
        """A piece's :data:`_Grid`, made once (the first pieces' all at once,
        :meth:`_FirstPieces.grids`) and kept in its record."""
        piece = self.live[k]
        if piece.grid is not None:
            return piece.grid
        grid = (
            self.first.grids[k]
            if k < len(self.first.pieces)
            else self.first.grids_of([piece.polygon])[0]
        )
        self.live[k] = piece._replace(grid=grid)
        return grid

    def _connect(self, i: int, j: int) -> _Joined | None:
        """Pieces ``i`` and ``j`` joined by a connector, if that fits."""
        own, other = self.live[i].bridges, self.live[j].bridges
        if len(own) and len(other) and crossing(own[:, 0], own[:, 1], other).any():
            return None  # their connectors cross: any ring holding both crosses itself
        (ra, va, oa), (rb, vb, ob) = self._grid(i), self._grid(j)
        earlier = np.concatenate([own, other])

        def takeable(starts: np.ndarray, ends: np.ndarray) -> list[bool]:
            """Clear links (:meth:`_FirstPieces.clear`) that cross no earlier connector of
            either."""
            open_ = self.first.clear(starts, ends)
            if len(earlier) and any(open_):
                crossed = crossing(starts, ends, earlier).tolist()
                open_ = [ok and not cut for ok, cut in zip(open_, crossed, strict=True)]
            return open_

        found = connect(ra, rb, oa, ob, self.cos_lat, takeable, self.link_m, self.within)
        if found is None:
            return None
        ring, index = found
        at_b = int(np.flatnonzero(index >= len(ra))[0])  # ring[at_b] is b, ring[at_b - 1] a
        ends = ring[at_b + len(rb) : at_b + len(rb) + 2]  # b', a'
        added = [_wire.vertex_bytes(x / SCALE, y / SCALE) for x, y in ends.tolist()]
        vbytes = np.concatenate([va, vb, added])[index]
        size = _canonical_bytes(ring, vbytes, self.budget)
        if size > self.budget.max_request_bytes:
            return None
        outer = np.concatenate([oa, ob, [False, False]])[index]
        outer[[at_b - 1, at_b + len(rb) - 1]] = False  # a → b and b-1 → b' are new edges
        # a → b, b-1 → b', b' → a', a' → a+1
        ends_at = [
            at_b - 1,
            at_b,
            at_b + len(rb) - 1,
            at_b + len(rb),
            at_b + len(rb) + 1,
            (at_b + len(rb) + 2) % len(ring),
        ]
        a, b, b_1, b2, a2, a_1 = ring[ends_at]
        new = np.array([[a, b], [b_1, b2], [b2, a2], [a2, a_1]])
        return _Joined(
            Polygon(ring / SCALE), size, np.concatenate([earlier, new]), (ring, vbytes, outer)
        )

    def _put_joined(self, i: int, j: int, joined: _Joined) -> None:
        """Pieces ``i`` and ``j`` replaced by what joining them made, under the next id: its
        record, and new records for the pieces that touched or were near either (no piece
        is near one that holds a part it holds); its pairs on the heap."""
        live, gone = self.live, {i, j}
        a, b = live.pop(i), live.pop(j)
        k, self.next_id = self.next_id, self.next_id + 1
        self.merged_into[i] = self.merged_into[j] = k
        parts = a.parts | b.parts
        touching = (a.touching | b.touching) - gone
        was_near = (a.near | b.near) - gone
        near = frozenset(m for m in was_near if not live[m].parts & parts)
        live[k] = _Piece(
            joined.polygon, joined.size, parts, touching, near, joined.bridges, joined.grid
        )
        for m in touching | was_near:
            other = live[m]
            live[m] = other._replace(
                touching=other.touching - gone | {k} if m in touching else other.touching,
                near=other.near - gone | {k} if m in near else other.near - gone,
            )
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


def _near(
    pieces: list[Polygon], parts: list[int], cos_lat: float, link_m: float = MAX_LINK_M
) -> list[set[int]]:
    """For each piece, the pieces of other parts within a link's reach (``link_m``) of it
    (measured with longitude scaled by ``cos_lat``)."""
    graph: list[set[int]] = [set() for _ in pieces]
    left, right = pairs_within_reach(pieces, cos_lat, labels=parts, link_m=link_m)
    for i, j in zip(left.tolist(), right.tolist(), strict=True):
        graph[i].add(j)
        graph[j].add(i)
    return graph


def _nearest_first(
    pieces: list[Polygon], near: list[set[int]], cos_lat: float, count: int
) -> tuple[list[set[int]], list[tuple[int, int]]]:
    """``near`` split in two: each piece's ``count`` nearest pieces within reach (by the
    gap between their bounding boxes, longitude scaled by ``cos_lat``; ties by index), and
    the pieces that count it among theirs; and the other pairs ``(i, j)``, ``i < j``."""
    boxes = shapely.bounds(np.asarray(pieces, dtype=object))
    first: list[set[int]] = [set() for _ in pieces]
    for i, others in enumerate(near):
        chosen = sorted(others)
        if len(chosen) > count:
            ids = np.array(chosen)
            gap = np.maximum(
                0.0, np.maximum(boxes[ids, :2] - boxes[i, 2:], boxes[i, :2] - boxes[ids, 2:])
            )
            order = np.argsort(np.hypot(gap[:, 0] * cos_lat, gap[:, 1]), kind="stable")
            chosen = ids[order[:count]].tolist()
        for j in chosen:
            first[i].add(j)
            first[j].add(i)
    later = [
        (i, j)
        for i, others in enumerate(near)
        for j in sorted(others)
        if i < j and j not in first[i]
    ]
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


def _edge_keys(
    vertices: np.ndarray, xy: np.ndarray, after: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each edge ``k → after[k]`` of rings (grid units; :func:`_next_in_ring`) as
    ``low * len(vertices) + high`` of its ends' places among ``vertices`` (sorted
    :func:`~parcelsearch.planning.tiling.grid.vertex_codes`), and whether each vertex is one
    of them (the key of an edge from one that is not means nothing)."""
    codes = vertex_codes(xy)
    at = np.minimum(np.searchsorted(vertices, codes), len(vertices) - 1)
    ahead = at[after]
    return np.minimum(at, ahead) * len(vertices) + np.maximum(at, ahead), vertices[at] == codes
