"""The exact partition: one area on the grid → the fewest single-ring pieces that fit a
request line, whose union is exactly the area.

Each part that does not fit is cut along its triangle tree into the fewest pieces that
fit (:mod:`~parcelsearch.planning.tiling.tree_cut`); the area's pieces are then merged,
neighbours by their union and parts by connectors, while the merged ring still fits and
stays a valid single ring (:mod:`~parcelsearch.planning.tiling.merging`), and regrouped into
fewer (:mod:`~parcelsearch.planning.tiling.repack`). Pieces are unions of whole triangles,
so their union is exactly the snapped area and no cut adds a vertex: this is what beats
recursive halving, whose straight cuts add vertices and, across a wiggly coast, fragments.
"""

from __future__ import annotations

import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch.errors import InputError
from parcelsearch.planning.tiling.connectors import MAX_LINK_M
from parcelsearch.planning.tiling.grid import canonical_ring, polygons, snap, sorted_pieces
from parcelsearch.planning.tiling.merging import Within, merged
from parcelsearch.planning.tiling.repack import refill
from parcelsearch.planning.tiling.request_budget import Budget
from parcelsearch.planning.tiling.tree_cut import tree_pieces

__all__ = ["exact_pieces"]


def exact_pieces(
    area: BaseGeometry,
    budget: Budget,
    connectors: bool = True,
    repack: bool = True,
    link_m: float = MAX_LINK_M,
    within: Within | None = None,
) -> tuple[Polygon, ...]:
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
        found = [part] if fits else tree_pieces(part, budget)
        if found is None:  # pragma: no cover - GEOS triangulates every valid polygon
            raise _unplannable(part)
        pieces.extend(found)
        parts.extend([number] * len(found))
    if len(pieces) > 1:
        pieces = merged(pieces, parts, area, budget, connectors and link_m > 0, link_m, within)
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
        if (
            good[k]
            if k >= 0
            else (ring.is_valid and budget.polygon_bytes(ring) <= budget.max_request_bytes)
        ):
            done.append(ring)
            continue
        for part in polygons(snap(piece)):  # pragma: no cover - defensive: never seen
            found = None if again else tree_pieces(part, budget)
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
