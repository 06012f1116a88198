"""A piece cut in two for a vendor's result window (parcelsearch.planning.splitting)."""

from __future__ import annotations

import shapely

from parcelsearch.planning.plans import plan
from parcelsearch.planning.splitting import halves


def test_halves_cover_the_piece_across_its_longer_side() -> None:
    planned = plan(shapely.box(-97.5, 32.7, -97.4, 32.75))
    (piece,) = planned.pieces
    cut = halves(piece, max_request_bytes=planned.max_request_bytes, path=planned.path, first_id=1)
    assert [p.piece_id for p in cut] == [1, 2] and {p.area_id for p in cut} == {piece.area_id}
    assert [p.geometry.bounds for p in cut] == [
        (-97.5, 32.7, -97.45, 32.75),
        (-97.45, 32.7, -97.4, 32.75),
    ]
    union = shapely.union_all([p.geometry for p in cut])
    assert union.symmetric_difference(piece.geometry).area == 0
    assert all(p.request_bytes <= planned.max_request_bytes for p in cut)
    tall = plan(shapely.box(0, 0, 0.01, 0.04)).pieces[0]
    assert [
        p.geometry.bounds[1]
        for p in halves(tall, max_request_bytes=7168, path=planned.path, first_id=1)
    ] == [0, 0.02]


def test_a_piece_too_narrow_is_not_cut() -> None:
    (piece,) = plan(shapely.box(10.0, 10.0, 10.000002, 10.000002)).pieces
    assert halves(piece, max_request_bytes=7168, path="/v1/search", first_id=1) == []
