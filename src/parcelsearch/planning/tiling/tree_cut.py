"""The triangle-tree cut: one part of an area on the grid → the fewest pieces that fit a
request line, each a union of whole triangles.

The part is triangulated (constrained Delaunay: no new vertex), the triangles' dual graph
gives a spanning tree, and the tree is cut into the fewest connected components whose rings
fit (a piece's bytes add up over its triangles; Kundu & Misra's bottom-up rule is optimal
for a tree). A component that is not one valid ring (it wraps round a hole, or pinches) is
split again along the tree. Pieces are unions of whole triangles, so their union is exactly
the part and no cut adds a vertex.
"""

from __future__ import annotations

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import _wire
from parcelsearch.planning.tiling.grid import SCALE, vertex_codes
from parcelsearch.planning.tiling.request_budget import MAX_VERTEX_BYTES, Budget

__all__ = ["tree_pieces"]


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
    # One int64 per vertex (vertex_codes): a 1-d unique is far cheaper.
    grid = np.rint(shapely.get_coordinates(triangles) * SCALE).astype(np.int64)
    _, vertex = np.unique(vertex_codes(grid), return_inverse=True)
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
    return (triangles, corners, np.array(parent), np.array(edge, dtype=np.int64), order, children)


def tree_pieces(polygon: Polygon, budget: Budget) -> list[Polygon] | None:
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
