"""Fuller pieces: a group of neighbouring pieces re-cut into one fewer along new diagonals.

The exact partition's pieces are unions of one constrained Delaunay triangulation's
triangles, so every cut between two pieces is an edge of that triangulation, and Kundu &
Misra's cut is optimal only for it. Here a connected group of three to eight pieces that
share edges, whose union is one ring light enough, is cut again into one piece fewer along
ANY diagonals of that ring (two of its own vertices joined by a straight line inside it):
each time the diagonal cutting off the fullest piece that fits the budget and leaves a rest
light enough for the pieces still to cut. No vertex is added and the union is unchanged.
Groups grow from the emptiest pieces first, and the work is bounded (tries per piece,
chords tested per cut, backtracking per group).
"""

from __future__ import annotations

import heapq

import numpy as np
import shapely
from shapely import Polygon

from parcelsearch import _wire
from parcelsearch.planning.tiling.grid import GRID
from parcelsearch.planning.tiling.request_budget import MAX_VERTEX_BYTES, Budget, ring_vertex_bytes

__all__ = ["neighbours", "refill", "shares_edge"]

#: Chords tested at once when looking for a diagonal (the search stops at the first chunk
#: holding one).
_CHUNK = 256
#: Chunks of chords tested per cut at most.
_CHUNKS = 8
#: Diagonals tried per group whose rest could not be cut (a bound on backtracking).
_BACKTRACK = 4
#: Most pieces in one group re-cut into one fewer.
_GROUP = 8
#: Most re-cuts tried per piece of the area (a bound on the work).
_TRIES_PER_PIECE = 3


def neighbours(pieces: list[Polygon]) -> list[set[int]]:
    """For each piece, the pieces sharing a stretch of boundary (not just a point) with it."""
    graph: list[set[int]] = [set() for _ in pieces]
    if len(pieces) < 2:
        return graph
    arr = np.asarray(pieces, dtype=object)
    left, right = shapely.STRtree(arr).query(arr, predicate="intersects")
    keep = left < right
    left, right = left[keep], right[keep]
    shares = shares_edge(arr[left], arr[right])
    for i, j in zip(left[shares].tolist(), right[shares].tolist(), strict=True):
        graph[i].add(j)
        graph[j].add(i)
    return graph


def shares_edge(a: object, b: object) -> np.ndarray:
    """Whether pieces ``a`` and ``b`` (or arrays of them, element-wise) share a stretch of
    boundary, not just a point, and no interior."""
    return np.asarray(shapely.relate_pattern(a, b, "F***1****"))


def refill(pieces: list[Polygon], budget: Budget) -> list[Polygon]:
    """``pieces`` (single rings within ``budget`` that tile an area), with groups of
    neighbouring ones that diagonals of their union can re-cut into one piece fewer
    replaced by those pieces, emptiest first, within a bound on the work; the union of the
    pieces is unchanged and no vertex is added."""
    if len(pieces) < 3:
        return pieces
    return _Refiller(pieces, budget).run()


class _Refiller:
    """The pieces of one area, groups re-cut into one fewer while a bounded number of tries
    lasts."""

    def __init__(self, pieces: list[Polygon], budget: Budget) -> None:
        self.budget = budget
        self.capacity = budget.max_request_bytes - budget.base + 1 - MAX_VERTEX_BYTES
        self.alive: dict[int, Polygon] = dict(enumerate(pieces))
        self.load: dict[int, int] = dict(enumerate(ring_vertex_bytes(pieces)[0].tolist()))
        self.touching = {i: set(n) for i, n in enumerate(neighbours(pieces))}
        self.tries = _TRIES_PER_PIECE * len(pieces)
        self.failed: set[tuple[int, ...]] = set()  # ids are never reused: a failure stays
        self.next_id = len(pieces)
        self.heap = [(load, i) for i, load in self.load.items()]
        heapq.heapify(self.heap)

    def run(self) -> list[Polygon]:
        """Re-cut until no try is left or every piece has been tried; the pieces left."""
        while self.heap and self.tries > 0:
            _, x = heapq.heappop(self.heap)
            if x in self.alive:
                self._try(x)
        return [self.alive[i] for i in sorted(self.alive)]

    def _fits(self, group: tuple[int, ...]) -> bool:
        """Whether ``group`` may weigh little enough for one piece fewer (each shared edge
        has two vertices both its pieces carry)."""
        load = sum(self.load[k] for k in group)
        return load <= (len(group) - 1) * self.capacity + 2 * (len(group) - 1) * MAX_VERTEX_BYTES

    def _groups(self, x: int) -> list[tuple[int, ...]]:
        """Connected groups holding ``x`` that may fit in one piece fewer: every triple,
        lightest first, then ``x`` grown by its lightest neighbour to up to ``_GROUP``."""
        triples: set[tuple[int, ...]] = set()
        for y in self.touching[x]:
            for z in (self.touching[x] | self.touching[y]) - {x, y}:
                triples.add(tuple(sorted((x, y, z))))
        found = sorted(
            (g for g in triples if self._fits(g)), key=lambda g: (sum(self.load[k] for k in g), g)
        )
        group = [x]
        while len(group) < _GROUP:
            around = set().union(*(self.touching[k] for k in group)) - set(group)
            if not around:
                break
            group.append(min(around, key=lambda k: (self.load[k], k)))
            if len(group) > 3 and self._fits(tuple(group)):
                found.append(tuple(sorted(group)))
        return found

    def _try(self, x: int) -> None:
        for group in self._groups(x):
            if self.tries <= 0:
                return
            if group in self.failed:
                continue
            self.tries -= 1
            self.failed.add(group)
            try:
                union = shapely.coverage_union_all([self.alive[k] for k in group])
            except shapely.errors.GEOSException:  # a connector's sliver overlaps
                continue
            if union.geom_type != "Polygon" or union.interiors or not union.is_valid:
                continue
            made = _cut(union, len(group) - 1, self.budget, self.capacity)
            if made is not None:
                self._replace(group, made)
                return

    def _replace(self, old: tuple[int, ...], new: list[Polygon]) -> None:
        around = set().union(*(self.touching[k] for k in old)) - set(old)
        ids = list(range(self.next_id, self.next_id + len(new)))
        self.next_id += len(new)
        for k in old:
            del self.alive[k], self.load[k]
            for m in self.touching.pop(k):
                if m in self.touching:
                    self.touching[m].discard(k)
        for i, piece, load in zip(ids, new, ring_vertex_bytes(new)[0].tolist(), strict=True):
            self.alive[i], self.load[i], self.touching[i] = piece, load, set()
        for i in ids:
            others = sorted(around | (set(ids) - {i}))
            shares = shares_edge(
                self.alive[i], np.asarray([self.alive[m] for m in others], dtype=object)
            )
            self.touching[i] |= {m for m, s in zip(others, shares.tolist(), strict=True) if s}
            for m in self.touching[i]:
                self.touching[m].add(i)
        for i in (*ids, *around):
            heapq.heappush(self.heap, (self.load[i], i))


def _cut(union: Polygon, count: int, budget: Budget, capacity: int) -> list[Polygon] | None:
    """``union`` cut into ``count`` rings of its vertices, each within the budget, one
    diagonal at a time (each time the one cutting off the fullest piece that leaves a rest
    light enough; a rest that cannot be cut makes it try the next, ``_BACKTRACK`` times in
    all), or None."""
    ring = shapely.get_coordinates(union.exterior)[:-1]
    return _cut_ring(
        union, ring, _wire.vertex_bytes_array(ring), count, budget, capacity, [_BACKTRACK]
    )


def _cut_ring(
    union: Polygon,
    ring: np.ndarray,
    vb: np.ndarray,
    count: int,
    budget: Budget,
    capacity: int,
    work: list[int],
) -> list[Polygon] | None:
    """:func:`_cut`, with ``union``'s ring (not closed) and its vertices' bytes given (a rest
    passes on its share of them instead of measuring its ring again), the backtracking
    left counted in ``work``."""
    if count == 1:
        return [union] if budget.fits(union) else None
    n = len(ring)
    # each of the count - 1 diagonals puts both its ends in two pieces
    if int(vb.sum()) + 2 * (count - 1) * int(vb.min()) > count * capacity:
        return None
    found = _candidates(vb, capacity, count)
    if not len(found):
        return None
    shapely.prepare(union)
    boundary = union.exterior
    shapely.prepare(boundary)
    for start in range(0, min(len(found), _CHUNK * _CHUNKS), _CHUNK):
        chunk = found[start : start + _CHUNK]
        inside = _inside(ring[chunk[:, 0]], ring[chunk[:, 1]], union, boundary)
        for a, b in chunk[inside].tolist():
            piece = Polygon(ring[np.arange(a, a + (b - a) % n + 1) % n])
            kept = np.arange(b, b + (a - b) % n + 1) % n
            rest = Polygon(ring[kept])
            if not (piece.is_valid and rest.is_valid and budget.fits(piece)):
                continue
            done = _cut_ring(rest, ring[kept], vb[kept], count - 1, budget, capacity, work)
            if done is not None:
                return [piece, *done]
            work[0] -= 1
            if work[0] <= 0:
                return None
    return None


def _candidates(vb: np.ndarray, capacity: int, count: int) -> np.ndarray:
    """Vertex pairs ``(a, b)``, not neighbours, whose piece ``a..b`` (forward round the
    ring, both ends held) weighs at most ``capacity`` and whose rest ``b..a`` at most
    ``count - 1`` times that; fullest piece first (for each ``a``, only its fullest few)."""
    n = len(vb)
    total = int(vb.sum())
    before = np.concatenate([[0], np.cumsum(np.concatenate([vb, vb]))])
    a = np.arange(n)
    # the last b (as a + k) whose piece a..b fits, for each a
    last = np.searchsorted(before, before[a] + capacity, side="right") - 2
    last = np.minimum(last, a + n - 2)
    # only the fullest few pieces from each a: no more are ever tested
    span = np.clip(last - a - 1, 0, -(-2 * _CHUNK * _CHUNKS // n))
    starts = np.repeat(a, span)
    ends = np.repeat(last + 1, span) - (
        np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span) + 1
    )
    piece = before[ends + 1] - before[starts]
    rest = total - piece + vb[starts] + vb[ends % n]
    keep = rest <= (count - 1) * capacity
    order = np.argsort(-piece[keep], kind="stable")
    return np.stack([starts[keep][order], ends[keep][order] % n], axis=1)


def _inside(a: np.ndarray, b: np.ndarray, union: Polygon, boundary: object) -> np.ndarray:
    """Whether each straight chord ``a[i] → b[i]`` lies inside ``union`` but at its ends:
    the chord less a thousandth of a grid step at each end meets no boundary, and its
    midpoint is inside."""
    d = b - a
    length = np.hypot(d[:, 0], d[:, 1])[:, None]
    step = d / np.maximum(length, 1e-30) * (GRID / 1000)
    lines = shapely.linestrings(np.stack([a + step, b - step], axis=1))
    middle = (a + b) / 2
    clear = ~shapely.intersects(boundary, lines)
    return np.asarray(clear & shapely.contains_xy(union, middle[:, 0], middle[:, 1]))
