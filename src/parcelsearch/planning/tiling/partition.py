"""The exact partition: one area on the grid → the fewest single-ring pieces that fit a
request line, whose union is exactly the area.

Each part that does not fit is triangulated (constrained Delaunay: no new vertex), the
triangles' dual graph gives a spanning tree, and the tree is cut into the fewest connected
components whose rings fit (a piece's bytes add up over its triangles; Kundu & Misra's
bottom-up rule is optimal for a tree). A component that is not one valid ring (it wraps
round a hole, or pinches) is split again along the tree. Neighbouring pieces are then
merged while the merged ring still fits and stays a valid single ring. Pieces are unions of
whole triangles, so their union is exactly the snapped area and no cut adds a vertex: this
is what beats recursive halving, whose straight cuts add vertices and, across a wiggly
coast, fragments.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch._fetch import wire as _wire
from parcelsearch.errors import InputError
from parcelsearch.planning.tiling.connectors import (
    MAX_LINK_M,
    connect,
    crossing,
    grid_rings,
    grid_vertices,
    pairs_within_reach,
    reach_groups,
)
from parcelsearch.planning.tiling.grid import SCALE, canonical_ring, polygons, snap, sorted_pieces
from parcelsearch.planning.tiling.repack import neighbours as _neighbours
from parcelsearch.planning.tiling.repack import refill
from parcelsearch.planning.tiling.request_budget import MAX_VERTEX_BYTES, Budget

__all__ = ["exact_pieces", "exact_least", "link_cos_lat"]


#: Whether what a connector adds may be taken (:class:`~.match_rule.SliverReach`).
Within = Callable[[np.ndarray], bool]


def exact_pieces(area: BaseGeometry, budget: Budget, connectors: bool = True,
                 repack: bool = True, link_m: float = MAX_LINK_M,
                 within: Within | None = None) -> tuple[Polygon, ...]:
    """The pieces of an area already on the grid
    (:func:`parcelsearch.planning.tiling.covers.prepared`):
    canonical rings (:func:`~parcelsearch.planning.tiling.grid.canonical_ring`) that fit ``budget``,
    sorted, whose union is ``area`` and, with ``connectors``, the connectors that join some
    of them (:mod:`parcelsearch.planning.tiling.connectors`); without, exactly ``area``. With
    ``repack``, groups of neighbouring pieces are re-cut into fewer
    (:func:`parcelsearch.planning.tiling.repack.refill`: fewer pieces, more planning time).
    Connectors take links at most ``link_m`` metres long (none if 0), and only those whose
    added sliver ``within`` accepts, when given."""
    pieces: list[Polygon] = []
    parts: list[int] = []
    shapes = polygons(area)
    for number, (part, fits) in enumerate(zip(shapes, budget.fits_each(shapes), strict=True)):
        found = [part] if fits else _tree_pieces(part, budget)
        if found is None:  # pragma: no cover - GEOS triangulates every valid polygon
            raise _unplannable(part)
        pieces.extend(found)
        parts.extend([number] * len(found))
    if len(pieces) > 1:
        pieces = _Merger(pieces, parts, area, budget, connectors and link_m > 0, link_m,
                         within).run()
        if repack:
            pieces = refill(pieces, budget)
    return tuple(_finish(pieces, budget))


def _finish(pieces: list[Polygon], budget: Budget) -> list[Polygon]:
    """Canonical rings, each checked valid and within budget (else partitioned again once,
    snapped), sorted."""
    done: list[Polygon] = []
    rings = [Polygon(canonical_ring(piece)) for piece in pieces]  # measured all at once
    good = shapely.is_valid(rings) & (budget.polygon_bytes_each(rings) <= budget.max_request_bytes)
    todo: list[tuple[Polygon, bool, int]] = [(p, False, k) for k, p in enumerate(pieces)]
    while todo:
        piece, again, k = todo.pop()
        ring = rings[k] if k >= 0 else Polygon(canonical_ring(piece))
        if good[k] if k >= 0 else (ring.is_valid and budget.polygon_bytes(ring)
                                   <= budget.max_request_bytes):
            done.append(ring)
            continue
        for part in polygons(snap(piece)):  # pragma: no cover - defensive: never seen
            found = None if again else _tree_pieces(part, budget)
            if found is None:
                raise _unplannable(part)
            todo.extend((p, True, -1) for p in found)
    return sorted_pieces(done)


def _unplannable(polygon: Polygon) -> InputError:  # pragma: no cover - defensive: never seen
    return InputError(
        f"a part {polygon.wkt[:80]}... could not be cut into rings that fit the request "
        "budget; raise max_request_bytes, or simplify the area",
        field="geometry",
    )


#: No connector edges (a piece without connectors).
_NO_EDGES = np.zeros((0, 2, 2), dtype=np.int64)
#: Added to grid coordinates (|value| ≤ 1.8e8 < 2**30) to make them non-negative 31-bit ints.
_OFFSET = 2**30


def _triangle_tree(
    polygon: Polygon,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[int], list[list[int]]]:
    """Constrained Delaunay triangles of ``polygon`` and a spanning tree of their dual graph.

    Returns
    -------
    triangles, corners, parent, edge, order, children
        The triangles (no new vertices: every corner is a vertex of ``polygon``), their
        corner vertex ids ``(T, 3)``, each triangle's parent in the tree (-1 for the root)
        and the id of the edge it shares with it (``low * vertices + high``), the
        breadth-first order (root first), and each triangle's children in the tree.
    """
    triangles = shapely.get_parts(shapely.constrained_delaunay_triangles(polygon))
    triangles = triangles[shapely.get_num_coordinates(triangles) == 4]
    # One int64 per vertex (_codes): a 1-d unique is far cheaper.
    grid = np.rint(shapely.get_coordinates(triangles) * SCALE).astype(np.int64)
    _, vertex = np.unique(_codes(grid), return_inverse=True)
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
    # Each triangle's neighbours, by the shared edge's id ascending (a CSR adjacency).
    here = np.concatenate([first, second])
    ranked = np.lexsort((np.concatenate([edges, edges]), here))
    there = np.concatenate([second, first])[ranked].tolist()
    by = np.concatenate([edges, edges])[ranked].tolist()
    start = np.searchsorted(here[ranked], np.arange(count + 1)).tolist()
    root = int(np.argmin(shapely.bounds(triangles)[:, 0]))
    parent, edge = [-1] * count, [-1] * count
    children: list[list[int]] = [[] for _ in range(count)]
    seen = [False] * count
    seen[root] = True
    order = [root]
    for t in order:  # breadth first; grows while iterating
        kids = children[t]
        for k in range(start[t], start[t + 1]):
            u = there[k]
            if not seen[u]:
                seen[u] = True
                parent[u], edge[u] = t, by[k]
                kids.append(u)
                order.append(u)
    return (triangles, corners, np.array(parent), np.array(edge, dtype=np.int64), order,
            children)


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
    triangles, corners, parent, edge, order, children = _triangle_tree(polygon)
    if len(order) < len(triangles) or not _covers_exactly(triangles, polygon):
        return None
    nv = int(corners.max()) + 1
    xy = (
        np.rint(shapely.get_coordinates(triangles) * SCALE)
        .astype(np.int64)
        .reshape(-1, 4, 2)[:, :3]
    )
    vertex_xy = np.zeros((nv, 2), dtype=np.int64)
    vertex_xy[corners.ravel()] = xy.reshape(-1, 2)
    vbytes = _wire.vertex_bytes_array(vertex_xy / SCALE)
    own = vbytes[corners].sum(axis=1)
    # bytes a triangle shares with its parent: the shared edge's two vertices
    shared = np.where(parent >= 0, vbytes[edge // nv] + vbytes[edge % nv], 0)
    limit = budget.max_request_bytes - budget.base + 1 - MAX_VERTEX_BYTES
    detached = _kundu_misra(order, children, own - shared, own, limit)
    label = list(range(len(triangles)))
    up = parent.tolist()
    for t in order[1:]:  # top down: a kept child joins its parent's component
        if not detached[t]:
            label[t] = label[up[t]]
    ranked = np.argsort(label, kind="stable")
    cuts = np.flatnonzero(np.diff(np.asarray(label)[ranked])) + 1
    groups = np.split(ranked, cuts)  # each component's triangles ascending, by root ascending
    unions = [shapely.coverage_union_all(triangles[group]) for group in groups]
    good = _single_fitting(unions, budget)  # all measured at once
    pieces: list[Polygon] = []
    todo: list[tuple[np.ndarray, int]] = list(zip(groups, range(len(groups)), strict=True))
    while todo:
        group, k = todo.pop()
        union = unions[k] if k >= 0 else shapely.coverage_union_all(triangles[group])
        if good[k] if k >= 0 else _single_fitting([union], budget)[0]:
            pieces.append(union)
        else:
            todo.extend((half, -1) for half in _halve_group(group, parent, own - shared))
    return pieces


def _single_fitting(unions: list[BaseGeometry], budget: Budget) -> np.ndarray:
    """Which unions are one valid ring that fits the budget."""
    if not unions:
        return np.zeros(0, dtype=bool)
    kinds = shapely.get_type_id(np.asarray(unions, dtype=object))
    good = kinds == 3  # a Polygon
    rings = [u for u, single in zip(unions, good.tolist(), strict=True) if single]
    good[good] = shapely.is_valid(rings) & budget.fits_each(rings)
    return np.asarray(good, dtype=bool)


def _covers_exactly(triangles: np.ndarray, polygon: Polygon) -> bool:
    """The triangles tile ``polygon``: their areas add up to its area (up to rounding).

    (Counting triangles would not do: a hole touching the shell at a vertex, as growing
    creates where it seals a pocket, takes two triangles fewer than a free hole.)
    """
    total = float(shapely.area(triangles).sum())
    return bool(abs(total - polygon.area) <= 1e-9 * polygon.area)


def _kundu_misra(
    order: list[int],
    children: list[list[int]],
    attach: np.ndarray,
    own: np.ndarray,
    limit: int,
) -> list[bool]:
    """Which tree nodes to detach so every component weighs at most ``limit``, fewest parts.

    ``own[t]`` is a node's weight alone, ``attach[t]`` what it adds to its parent's
    component (its weight less what it shares with the parent). Bottom-up, each node keeps
    its lightest children and detaches the heaviest until its component fits. (Plain
    lists: a tree is walked one node at a time.)
    """
    alone, adds = own.tolist(), attach.tolist()
    weight = list(alone)
    detached = [False] * len(alone)
    for t in reversed(order):
        below = children[t]
        if not below:
            continue
        if len(below) == 1:  # most triangles: one child, or none (quicker spelt out)
            child = below[0]
            w = weight[child] - alone[child] + adds[child]
            total = alone[t] + w
            if total > limit:
                detached[child] = True
                total -= w
            weight[t] = total
            continue
        kids = sorted([(weight[c] - alone[c] + adds[c], c) for c in below], reverse=True)
        total = alone[t] + sum(w for w, _ in kids)
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


def link_cos_lat(area: BaseGeometry) -> float:
    """cos(latitude) links are measured with in ``area``: where a degree of longitude is
    shortest (so a link is never measured shorter than it is)."""
    _, miny, _, maxy = area.bounds
    return math.cos(math.radians(min(89.9, max(abs(miny), abs(maxy)))))


def exact_least(area: BaseGeometry, budget: Budget, connectors: bool = True,
                link_m: float = MAX_LINK_M) -> tuple[int, int]:
    """Fewest pieces :func:`exact_pieces` can give ``area``, and fewest request bytes: the
    vertex bound (:meth:`~parcelsearch.planning.tiling.request_budget.Budget.vertex_bound`) of each
    group of parts a chain of links (at most ``link_m`` metres) joins (each part alone
    without ``connectors``), summed: no piece spans two groups."""
    parts = polygons(area)
    groups = (reach_groups(parts, link_cos_lat(area), link_m) if connectors
              else [[k] for k in range(len(parts))])
    rings = size = 0
    for group in groups:
        found = budget.vertex_bound(shapely.multipolygons([parts[k] for k in group]))
        rings, size = rings + found[0], size + found[1]
    return rings, size


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


def _codes(ring: np.ndarray) -> np.ndarray:
    """One int64 per vertex (grid units), ordered as ``(lon, lat)`` are."""
    return np.asarray(((ring[:, 0] + _OFFSET) << 31) | (ring[:, 1] + _OFFSET))


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
    (:func:`_codes`, sorted, unique), and each edge as ``low * len(codes) + high`` of its
    ends' places among them (sorted)."""
    xy, starts = grid_vertices(shapely.get_rings(polygons(area)))
    after = _next_in_ring(len(xy), starts)
    vertices = np.unique(_codes(xy))
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
    :func:`_codes`), and whether each vertex is one of them (the key of an edge from one
    that is not means nothing)."""
    codes = _codes(xy)
    at = np.minimum(np.searchsorted(vertices, codes), len(vertices) - 1)
    ahead = at[after]
    return np.minimum(at, ahead) * len(vertices) + np.maximum(at, ahead), vertices[at] == codes
