"""A piece cut in two: for a vendor that serves a search only so many pages deep.

Some vendors cap how deep a result may be paged (a search engine's *result window*): a
piece whose page 1 says it has more pages than that cannot be read whole. :func:`halves`
cuts it across its longer side, on the 6-decimal grid, into pieces that each fit the
request-line budget (:func:`parcelsearch.planning.tiling.tile`, exact mode); every one is a
new request whose page 1 tells its count, and halved again while it has too many pages.
The GroupIDs of the piece are the union of its halves' (a parcel on the cut is found by
both, and kept once).
"""

from __future__ import annotations

import shapely

from parcelsearch import _wire
from parcelsearch.planning.plans import Piece
from parcelsearch.planning.tiling.pieces import tile
from parcelsearch.planning.tiling.request_budget import BUDGET_PAGE

__all__ = ["halves"]

#: A grid step (degrees): a piece narrower than two of them is not cut.
_STEP = 1e-6


def halves(piece: Piece, *, max_request_bytes: int, path: str, first_id: int) -> list[Piece]:
    """``piece`` cut across its longer side into pieces that fit ``max_request_bytes``.

    Parameters
    ----------
    piece
        The piece to cut.
    max_request_bytes, path
        The request-line budget the new pieces are made to (as the plan's).
    first_id
        The ``piece_id`` of the first new piece (the next ones follow): unused in its area.

    Returns
    -------
    list of Piece
        The new pieces of ``piece.area_id`` (two or more), or ``[]`` when the piece is too
        narrow to cut on the grid.
    """
    minx, miny, maxx, maxy = piece.geometry.bounds
    across = maxx - minx >= maxy - miny
    low, high = (minx, maxx) if across else (miny, maxy)
    middle = round((low + high) / 2, 6)
    if not low + _STEP < middle < high - _STEP:
        return []
    boxes = (
        [shapely.box(minx, miny, middle, maxy), shapely.box(middle, miny, maxx, maxy)]
        if across
        else [shapely.box(minx, miny, maxx, middle), shapely.box(minx, middle, maxx, maxy)]
    )
    rings: list[shapely.Polygon] = []
    for side in boxes:
        part = shapely.intersection(piece.geometry, side)
        polygons = [
            p
            for p in shapely.get_parts(part)
            if isinstance(p, shapely.Polygon) and not p.is_empty and p.area > 0
        ]
        if polygons:
            rings.extend(
                tile(
                    shapely.MultiPolygon(polygons),
                    max_request_bytes=max_request_bytes,
                    path=path,
                    connectors=False,
                )
            )
    pieces = []
    for number, ring in enumerate(rings):
        text = _wire.ring_json(ring.exterior.coords)
        pieces.append(
            Piece(
                area_id=piece.area_id,
                piece_id=first_id + number,
                polygon_json=text,
                geometry=ring,
                request_bytes=_wire.search_target_bytes(path, text, BUDGET_PAGE),
            )
        )
    return pieces
