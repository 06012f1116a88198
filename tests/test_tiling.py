"""Tiling: single rings, exact unions, the byte budget, determinism, covers, the baseline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pyproj
import pytest
import shapely
from hypothesis import example, given, settings
from hypothesis import strategies as st
from shapely import MultiPolygon, Polygon, box

from parcelsearch import _wire
from parcelsearch.errors import InputError
from parcelsearch.planning.tiling import (
    BUDGET_PAGE,
    GRID,
    Budget,
    canonical_ring,
    cover,
    estimate,
    lower_bound,
    parts_bound,
    split_antimeridian,
    tile,
)
from parcelsearch.planning.tiling.covers import prepared

PATH = "/v1/search"


def _load_halving():
    """The benchmark's plain-halving baseline (``bench/_halving.py``; not part of the package)."""
    path = Path(__file__).parents[1] / "bench" / "_halving.py"
    spec = importlib.util.spec_from_file_location("_bench_halving", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.halving_baseline


halving_baseline = _load_halving()
SQUARE = box(-97.5, 32.7, -97.4, 32.8)
#: The matching rule under which connectors join parts as far apart as a link reaches.
POINT = "representative-point"


def fractal(seed: int, levels: int = 9, centre=(-97.35, 32.75), radius=0.05, holes=0) -> Polygon:
    """A deterministic midpoint-displacement island (7·2**levels vertices), with lakes."""
    rng = np.random.default_rng(seed)

    def ring(cx: float, cy: float, r: float, lv: int) -> np.ndarray:
        angles = np.sort(rng.uniform(0, 2 * np.pi, 7))
        pts = np.column_stack([cx + r * np.cos(angles), cy + r * np.sin(angles)])
        for _ in range(lv):
            nxt = np.roll(pts, -1, axis=0)
            edge = nxt - pts
            mid = (pts + nxt) / 2 + 0.12 * np.column_stack(
                [-edge[:, 1], edge[:, 0]]
            ) * rng.standard_normal(len(pts))[:, None]
            out = np.empty((2 * len(pts), 2))
            out[0::2], out[1::2] = pts, mid
            pts = out
        poly = shapely.make_valid(Polygon(pts), method="structure", keep_collapsed=False)
        return max(shapely.get_parts(poly), key=lambda p: p.area)

    area = ring(*centre, radius, levels)
    for k in range(holes):
        angle = 2 * np.pi * k / max(holes, 1)
        lake = ring(
            centre[0] + 0.4 * radius * np.cos(angle),
            centre[1] + 0.4 * radius * np.sin(angle),
            radius / 6,
            levels - 3,
        )
        area = area.difference(lake)
    return area


def line_bytes(piece: Polygon, path: str = PATH) -> int:
    text = _wire.ring_json(piece.exterior.coords)
    return _wire.request_line_bytes(_wire.search_target(path, text, BUDGET_PAGE))


def assert_sendable(pieces: list[Polygon], max_bytes: int = 7168, path: str = PATH) -> None:
    for piece in pieces:
        assert piece.geom_type == "Polygon" and piece.is_valid and not piece.interiors
        coords = piece.exterior.coords
        assert coords[0] == coords[-1] and len(coords) >= 4
        assert line_bytes(piece, path) <= max_bytes
        rounded = Polygon(_parse(_wire.ring_json(coords)))
        assert rounded.equals_exact(piece, 0)  # what is sent is what we checked
        if importlib.util.find_spec("parcelsearch_service") is not None:  # the service extra
            from parcelsearch_service.polygon import parse_polygon

            parse_polygon(_wire.ring_json(coords))  # the service's own check (400 if refused)


def _parse(text: str) -> list[tuple[float, float]]:
    import json

    return [tuple(xy) for xy in json.loads(text)]


def assert_exact(pieces: list[Polygon], area: shapely.Geometry) -> None:
    union = shapely.union_all(pieces)
    slack = area.length * GRID  # rounding moves the boundary ≤ 0.71e-6 degrees
    assert shapely.symmetric_difference(union, area).area <= slack
    assert sum(p.area for p in pieces) == pytest.approx(union.area, rel=1e-9)  # no overlaps


def requests(pieces: list[Polygon]) -> list[str]:
    return [_wire.ring_json(p.exterior.coords) for p in pieces]


# -- shapes ---------------------------------------------------------------------------------


def test_a_small_area_is_one_canonical_ring():
    clockwise_from_top = Polygon([(-97.4, 32.8), (-97.4, 32.7), (-97.5, 32.7), (-97.5, 32.8)])
    [piece] = tile(clockwise_from_top)
    assert requests([piece]) == [
        "[[-97.5,32.7],[-97.4,32.7],[-97.4,32.8],[-97.5,32.8],[-97.5,32.7]]"
    ]


def test_canonical_ring_is_counter_clockwise_from_lowest_left():
    ring = canonical_ring(Polygon([(2, 2), (2, 0), (0, 0), (0, 2)]))
    assert ring[0].tolist() == [0, 0] and ring[-1].tolist() == [0, 0]
    assert shapely.LinearRing(ring).is_ccw


@pytest.mark.parametrize(
    "area",
    [
        pytest.param(SQUARE.difference(box(-97.46, 32.74, -97.44, 32.76)), id="one-hole"),
        pytest.param(
            Polygon(
                SQUARE.exterior,
                [
                    box(-97.49 + 0.02 * k, 32.71, -97.48 + 0.02 * k, 32.79).exterior
                    for k in range(4)
                ],
            ),
            id="four-holes",
        ),
        pytest.param(MultiPolygon([SQUARE, box(-97.3, 32.7, -97.2, 32.8)]), id="two-parts"),
        pytest.param(fractal(1, levels=8, holes=3), id="fractal-with-lakes"),
        pytest.param(box(-97.5, 32.7, -97.4, 32.7000004).union(SQUARE), id="sub-grid-sliver"),
    ],
)
def test_pieces_are_single_rings_whose_union_is_the_area(area):
    pieces = tile(area)
    assert_sendable(pieces)
    assert_exact(pieces, area)


def test_a_hole_needs_two_pieces_no_more():
    assert len(tile(SQUARE.difference(box(-97.46, 32.74, -97.44, 32.76)))) == 2


def test_parts_are_split():
    pieces = tile(MultiPolygon([SQUARE, box(-97.3, 32.7, -97.2, 32.8)]))
    assert len(pieces) == 2


def test_rounding_never_makes_an_invalid_ring():
    # Two vertices 0.3e-6 apart round onto one grid point; a spike thinner than the grid.
    area = Polygon([(0, 0), (1, 0), (1, 1), (0.5, 1.0000003), (0.5000001, 1.0000001), (0, 1)])
    pieces = tile(area)
    assert_sendable(pieces)
    assert_exact(pieces, area)


# -- the budget -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "max_bytes", [pytest.param(7168, id="gateway"), pytest.param(1500, id="tight")]
)
def test_every_request_line_fits_the_budget_at_page_99999(max_bytes):
    area = fractal(2, levels=9, holes=2)
    pieces = tile(area, max_request_bytes=max_bytes)
    assert len(pieces) > 1
    assert_sendable(pieces, max_bytes)
    assert_exact(pieces, area)
    assert max(line_bytes(p) for p in pieces) > 0.8 * max_bytes  # pieces are filled, not tiny


def test_budget_counts_the_whole_request_line():
    budget = Budget(7168, PATH)
    ring = [(-97.5, 32.7), (-97.4, 32.7), (-97.4, 32.8), (-97.5, 32.7)]
    text = _wire.ring_json(ring)
    expected = len(f"GET {_wire.search_target(PATH, text, 99999)} HTTP/1.1".encode())
    assert budget.ring_bytes(ring) == expected


def test_sent_bytes_are_the_canonical_rings_bytes():
    """Budget.sent_bytes measures every piece at once as it is sent: on the grid, closed on
    its lowest-left vertex, whatever its orientation, start or off-grid coordinates."""
    from shapely import Polygon

    from parcelsearch.planning.tiling.grid import canonical_ring

    budget = Budget(7168, PATH)
    pieces = [
        Polygon([(-97.5, 32.7), (-97.4, 32.7), (-97.4, 32.8)]),  # counter-clockwise
        Polygon([(0.1234567, 1.5), (0.0, 1.0), (-0.5, 1.25), (0.2, 0.9)]),  # off the grid
        Polygon([(10.0, 5.0), (10.0, 4.0), (9.0, 4.0), (9.0, 5.0)]),  # clockwise, starts high
        *tile(fractal(4, levels=7), max_request_bytes=1500),
    ]
    expected = [budget.ring_bytes(canonical_ring(p)) for p in pieces]
    assert budget.sent_bytes(pieces).tolist() == expected
    assert len(set(expected)) > 3


def test_fits_each_is_fits_of_every_polygon():
    """Budget.fits_each answers Budget.fits for every polygon at once (a ring with a hole
    never fits, nor one too long), and Budget.polygon_bytes_each Budget.polygon_bytes."""
    from shapely import Polygon, box

    budget = Budget(1500, PATH)
    holed = Polygon(box(0, 0, 1, 1).exterior.coords, [box(0.4, 0.4, 0.6, 0.6).exterior.coords])
    area = fractal(4, levels=7)
    polygons = [holed, box(0, 0, 1, 1), area, *tile(area, max_request_bytes=1500)]
    expected = [budget.fits(p) for p in polygons]
    assert budget.fits_each(polygons).tolist() == expected
    assert budget.polygon_bytes_each(polygons).tolist() == [
        budget.polygon_bytes(p) for p in polygons
    ]
    assert expected[:3] == [False, True, False]


def test_a_longer_path_leaves_less_room():
    area = fractal(3, levels=9)
    short = tile(area, path="/v1/search")
    long = tile(area, path="/prod/v1/search" + "/x" * 500)
    assert len(long) > len(short)
    assert_sendable(long, path="/prod/v1/search" + "/x" * 500)


def test_a_budget_too_small_for_any_ring_is_refused():
    with pytest.raises(
        InputError, match=r"max_request_bytes=200 cannot hold a useful ring.*at least"
    ):
        tile(SQUARE, max_request_bytes=200)


# -- fewest pieces ------------------------------------------------------------------------------


def test_beats_plain_halving_on_a_hard_area():
    area = fractal(4, levels=10, holes=3)
    ours, baseline = tile(area), halving_baseline(area)
    assert_sendable(baseline)
    assert_exact(baseline, area)
    assert len(ours) <= 0.6 * len(baseline), (len(ours), len(baseline))


def test_close_to_the_vertex_bound():
    area = fractal(5, levels=10)
    vertices = len(area.exterior.coords) - 1
    per_request = (7168 - Budget().base) / 27  # ~27 bytes a vertex at these coordinates
    assert len(tile(area)) <= 1.25 * np.ceil(vertices / per_request)


# -- determinism --------------------------------------------------------------------------------


def test_same_area_same_requests_whatever_its_representation():
    area = fractal(6, levels=9, holes=2)
    coords = np.asarray(area.exterior.coords)[:-1]
    rotated = Polygon(np.roll(coords, 100, axis=0)[::-1], [r.coords for r in area.interiors][::-1])
    assert requests(tile(area)) == requests(tile(area)) == requests(tile(rotated))


# -- tolerance mode ----------------------------------------------------------------------------


def metric(geom: shapely.Geometry, centre: shapely.Point) -> shapely.Geometry:
    crs = pyproj.CRS.from_proj4(f"+proj=aeqd +lat_0={centre.y} +lon_0={centre.x} +datum=WGS84")
    move = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)
    return shapely.transform(
        shapely.segmentize(geom, 0.001),
        lambda xy: np.column_stack(move.transform(xy[:, 0], xy[:, 1])),
    )


def assert_covers_within(pieces: list[Polygon], area: shapely.Geometry, tolerance: float) -> None:
    union = shapely.union_all(pieces)
    assert union.covers(area)
    centre = area.centroid
    assert shapely.buffer(metric(area, centre), tolerance).covers(metric(union, centre))


@pytest.mark.parametrize("tolerance", [0.5, 5.0, 50.0])
def test_tolerance_pieces_cover_the_area_and_stay_within_t(tolerance):
    area = fractal(7, levels=9, holes=2)
    pieces = tile(area, tolerance=tolerance)
    assert_sendable(pieces)
    assert_covers_within(pieces, area, tolerance)


def test_tolerance_needs_fewer_pieces():
    area = fractal(8, levels=10, holes=2)
    assert len(tile(area, tolerance=20)) < len(tile(area, tolerance=5)) < len(tile(area))


def _measure(pieces: list[Polygon]) -> tuple[int, int]:
    return len(pieces), sum(line_bytes(p) for p in pieces)


@pytest.mark.parametrize(
    "area",
    [
        pytest.param(SQUARE, id="square"),
        pytest.param(SQUARE.buffer(0.01, quad_segs=2), id="octagon"),
        pytest.param(fractal(9, levels=6), id="small-coast"),
        pytest.param(fractal(10, levels=10, holes=2), id="large-coast"),
        pytest.param(MultiPolygon([SQUARE, box(-97.3, 32.7, -97.2, 32.8)]), id="two-parts"),
    ],
)
@pytest.mark.parametrize("tolerance", [0.5, 5.0])
def test_tolerance_is_never_worse_than_exact_where_the_exact_pieces_are_known(area, tolerance):
    """Where the exact pieces are in the memo (a plan's), tolerance pieces are never more
    than they, nor longer in all for as many: where the cover does not beat the exact
    pieces so, the exact pieces are the answer."""
    from parcelsearch.planning.tiling.pieces import TilingMemo

    memo = TilingMemo()
    exact, loose = tile(area, memo=memo), tile(area, tolerance=tolerance, memo=memo)
    (n_exact, b_exact), (n_loose, b_loose) = _measure(exact), _measure(loose)
    assert n_loose < n_exact or (n_loose == n_exact and b_loose <= b_exact)
    if (n_loose, b_loose) == (n_exact, b_exact):
        assert requests(loose) == requests(exact)  # a tie keeps the exact pieces
    assert_covers_within(loose, area, tolerance)


def test_a_simple_area_keeps_its_exact_ring_in_tolerance_mode():
    """A square's cover has rounded corners (more vertices, longer requests): the exact
    ring is sent instead, with no memo (one ring that fits a request is its exact piece)."""
    from parcelsearch.planning.tiling.pieces import TilingMemo

    memo = TilingMemo()
    assert requests(tile(SQUARE, tolerance=5, memo=memo)) == requests(tile(SQUARE))
    assert memo.tiled(0.0) == 1


def test_parts_closer_than_t_merge_and_narrow_holes_fill():
    metres = 1 / 111_000  # a degree of latitude is ~111 km
    near = MultiPolygon([SQUARE, box(-97.5, 32.8 + 2 * metres, -97.4, 32.9)])
    assert len(tile(near, connectors=False)) == 2
    assert len(tile(near, tolerance=5, connectors=False)) == 1
    canal = SQUARE.difference(box(-97.49, 32.75, -97.41, 32.75 + 6 * metres))  # 6 m wide
    assert len(tile(canal, tolerance=5)) == 1  # every point of the canal is within 3 m


def test_a_wide_hole_is_kept():
    metres = 1 / 111_000
    lake = SQUARE.difference(box(-97.46, 32.74, -97.44, 32.74 + 30 * metres))  # 30 m wide
    pieces = tile(lake, tolerance=10)
    assert len(pieces) >= 2
    assert not shapely.union_all(pieces).covers(shapely.Point(-97.45, 32.74 + 15 * metres))
    assert_covers_within(pieces, lake, 10)


def test_cover_across_the_antimeridian_stays_in_range():
    area = MultiPolygon([box(179.99, 10, 180, 10.01), box(-180, 10, -179.99, 10.01)])
    covered = cover(area, 5.0)
    assert -180 <= covered.bounds[0] and covered.bounds[2] <= 180
    assert covered.covers(area)
    pieces = tile(area, tolerance=5.0)
    assert_sendable(pieces)
    assert shapely.union_all(pieces).covers(area)


@pytest.mark.parametrize("tolerance", [0.1, -5, float("nan"), float("inf")])
def test_bad_tolerances_are_refused(tolerance):
    with pytest.raises(InputError, match=r"must be (0 for exact pieces or )?at least 0") as caught:
        tile(SQUARE, tolerance=tolerance)
    assert caught.value.field == "tolerance" and "Use tolerance=0 for exact" in str(caught.value)


@pytest.mark.parametrize(
    "area",
    [
        pytest.param(
            Polygon(
                [
                    (-97.5000004, 32.7000004),
                    (-97.4000004, 32.7000004),
                    (-97.4000004, 32.8000004),
                    (-97.5000004, 32.8000004),
                ]
            ),
            id="rounds-inward",
        ),
        pytest.param(
            Polygon(
                [(-97.54364699, 32.82126857), (-97.5427581, 32.8188092), (-97.5443207, 32.8231335)]
            ),
            id="seven-decimals",
        ),
    ],
)
def test_exact_pieces_cover_an_off_grid_area(area):
    union = shapely.union_all(tile(area))
    assert union.covers(area)
    assert shapely.symmetric_difference(union, area).area <= 2 * area.length * 1e-6


# -- every coordinate in range --------------------------------------------------------------


@pytest.mark.parametrize(
    "area",
    [
        pytest.param(box(179.5, 10.0000006, 180, 10.5), id="east-edge-at-180"),
        pytest.param(box(-180, 10.0000006, -179.5, 10.5), id="west-edge-at-minus-180"),
        pytest.param(
            MultiPolygon(
                [box(179.5, -17.1234564, 180, -16.5), box(-180, -17.1234564, -179.6, -16.5)]
            ),
            id="fiji-like-across-180",
        ),
        pytest.param(box(10.0000004, 89.5000004, 11.0000004, 90), id="north-pole-edge"),
        pytest.param(box(10.0000004, -90, 11.0000004, -89.5000004), id="south-pole-edge"),
    ],
)
@pytest.mark.parametrize("tolerance", [0.0, 5.0])
def test_growth_never_leaves_longitude_latitude_range(area, tolerance):
    pieces = tile(area, tolerance=tolerance)
    assert_sendable(pieces)
    xy = np.concatenate([shapely.get_coordinates(p) for p in pieces])
    assert (np.abs(xy[:, 0]) <= 180).all() and (np.abs(xy[:, 1]) <= 90).all()
    assert shapely.union_all(pieces).covers(area)


# -- exact is exact up to the grid ------------------------------------------------------------

_M = 1 / 111_320  # one metre of latitude, in degrees (close enough at these latitudes)


def _slit_pocket() -> Polygon:
    """A 100 m block with a 20 m × 20 m pocket reached through a 1 cm slit (not in the area)."""
    x0, y0 = -97.4000003, 32.7000003
    block = box(x0, y0, x0 + 100 * _M, y0 + 100 * _M)
    pocket = box(x0 + 40 * _M, y0 + 40 * _M, x0 + 60 * _M, y0 + 60 * _M)
    slit = box(x0 + 50 * _M, y0 + 50 * _M, x0 + 50.01 * _M, y0 + 100 * _M)
    return block.difference(pocket.union(slit))


def _pinch() -> Polygon:
    """Two 50 m blocks joined by a 1 cm neck."""
    x0, y0 = -97.3000003, 32.7000007
    left = box(x0, y0, x0 + 50 * _M, y0 + 50 * _M)
    neck = box(x0 + 50 * _M, y0 + 25 * _M, x0 + 60 * _M, y0 + 25.01 * _M)
    right = box(x0 + 60 * _M, y0, x0 + 110 * _M, y0 + 50 * _M)
    return shapely.union_all([left, neck, right])


def _spikes() -> Polygon:
    """A block with a 1 cm-wide spike and a needle-sharp triangular spike (1° apex)."""
    x0, y0 = -97.2000004, 32.7000002
    block = box(x0, y0, x0 + 50 * _M, y0 + 50 * _M)
    wide = box(x0 + 10 * _M, y0 + 50 * _M, x0 + 10.01 * _M, y0 + 90 * _M)
    half = 40 * _M * np.tan(np.radians(0.5))
    needle = Polygon(
        [
            (x0 + 30 * _M - half, y0 + 50 * _M),
            (x0 + 30 * _M + half, y0 + 50 * _M),
            (x0 + 30 * _M, y0 + 90 * _M),
        ]
    )
    return shapely.union_all([block, wide, needle])


ADVERSARIAL = [
    pytest.param(_slit_pocket(), id="pocket-behind-a-slit"),
    pytest.param(_pinch(), id="pinch"),
    pytest.param(_spikes(), id="spikes"),
    pytest.param(fractal(7, levels=9, holes=2), id="off-grid-fractal"),
]


@pytest.mark.parametrize("area", ADVERSARIAL)
def test_exact_union_covers_the_area_and_stays_within_two_grid_steps(area):
    pieces = tile(area)
    assert_sendable(pieces)
    union = shapely.union_all(pieces)
    assert union.covers(area)  # recall: every point inside is searched
    beyond = union.difference(shapely.buffer(area, 2 * GRID, quad_segs=32))
    assert beyond.area <= 1e-3 * GRID**2, beyond.area / GRID**2  # Hausdorff ≤ 2 grid steps
    assert sum(p.area for p in pieces) == pytest.approx(union.area, rel=1e-9)  # no overlaps


def test_a_pocket_sealed_off_by_growth_is_not_searched():
    area = _slit_pocket()
    union = shapely.union_all(tile(area))
    x0, y0 = -97.4000003, 32.7000003
    centre = shapely.Point(x0 + 50 * _M, y0 + 50 * _M)
    assert not union.intersects(centre.buffer(9 * _M))  # the pocket (400 m²) stays out
    assert (
        union.intersection(box(x0 + 40 * _M, y0 + 40 * _M, x0 + 60 * _M, y0 + 60 * _M)).area
        <= 20 * _M * 4 * GRID
    )  # only a grid-wide band along the pocket's walls


def test_recall_of_points_just_inside_the_boundary():
    area = _spikes().union(_slit_pocket()).union(_pinch())
    rng = np.random.default_rng(3)
    boundary = shapely.segmentize(area.boundary, 0.1 * _M)
    xy = shapely.get_coordinates(boundary)
    inside = xy + rng.normal(0, 0.3 * GRID, xy.shape)
    inside = inside[shapely.contains_xy(area, inside[:, 0], inside[:, 1])]
    assert len(inside) > 1000
    union = shapely.union_all(tile(area))
    assert shapely.intersects_xy(union, inside[:, 0], inside[:, 1]).all()


def test_a_cover_of_parts_half_the_globe_apart_keeps_every_part_whole():
    """A part straddling 0° and one at -180°: no part may be torn across the globe."""
    area = MultiPolygon(
        [box(-0.0002, -0.0002, 0.0002, 0.0001), box(-180, -0.0006, -179.9999, -0.0005)]
    )
    covered = cover(area, 1.0)
    assert covered.covers(area)
    assert all(p.bounds[2] - p.bounds[0] < 0.001 for p in shapely.get_parts(covered))
    assert_sendable(tile(area, tolerance=1.0))


@pytest.mark.parametrize("tolerance", [1.0, 5.0, 50.0])
def test_parts_bound_never_exceeds_the_covers_parts_or_the_pieces(tolerance):
    """Islands 1 m to 300 m apart (some across ±180°): groups farther apart than 2 t never
    merge in the cover, so the bound is at most the cover's parts and the pieces."""
    metre = 1 / 111_320
    islands = []
    x = 179.99
    for gap in (1, 3, 8, 30, 90, 120, 300, 2, 50):
        islands.append(box(x, -17.0, x + 200 * metre, -17.0 + 150 * metre))
        x += (200 + gap) * metre
        if x > 180:
            x -= 360
    area = shapely.MultiPolygon(islands)
    area = split_antimeridian(area) if area.bounds[2] > 180 else area
    bound = parts_bound(area, tolerance)
    parts = len(shapely.get_parts(prepared(area, tolerance)))
    assert 1 <= bound <= parts
    assert bound <= len(tile(area, tolerance=tolerance))


def _islands(count: int = 24, gap_m: float = 150.0) -> MultiPolygon:
    """A north-south row of small off-grid islands (fractal coasts) about ``gap_m`` apart."""
    metre = 1 / 111_320
    islands = []
    for k in range(count):
        island = fractal(
            20 + k, levels=2, centre=(-97.35, 32.75 + k * (200 + gap_m) * metre), radius=80 * metre
        )
        islands.append(island)
    return MultiPolygon(islands)


@pytest.mark.parametrize("gap_m", [150.0, 1_500.0, 5_000.0])
def test_pairs_within_reach_are_every_pair_a_link_can_join(gap_m):
    """Grown boxes, then a prepared measure, find exactly the pairs the plain distance
    finds (longitude scaled as links are measured), each once, lower index first; with
    labels, only pairs whose labels differ."""
    from parcelsearch.planning.tiling.connectors import link_reach_degrees, pairs_within_reach

    shapes = list(_islands(count=8, gap_m=gap_m).geoms) + [box(-97.34, 32.70, -97.30, 32.74)]
    cos_lat = 0.84
    scaled = [shapely.transform(s, lambda xy: xy * [cos_lat, 1.0]) for s in shapes]
    every = {
        (i, j)
        for i in range(len(shapes))
        for j in range(i + 1, len(shapes))
        if shapely.distance(scaled[i], scaled[j]) <= link_reach_degrees()
    }
    left, right = pairs_within_reach(shapes, cos_lat)
    found = list(zip(left.tolist(), right.tolist(), strict=True))
    assert sorted(found) == sorted(every) and len(found) == len(set(found))
    neighbours = {(k, k + 1) for k in range(7)}
    assert neighbours <= every if gap_m < 3_000 else not neighbours & every  # reach: 3 km
    labels = [k // 2 for k in range(len(shapes))]
    left, right = pairs_within_reach(shapes, cos_lat, labels=labels)
    assert sorted(zip(left.tolist(), right.tolist(), strict=True)) == sorted(
        (i, j) for i, j in every if labels[i] != labels[j]
    )


def test_connectors_let_islands_share_pieces():
    """Islands of one area share rings through connectors: fewer pieces than parts, every
    piece sendable, the area covered, and beyond two grid steps of it only the connectors'
    slivers (each within √2 grid steps of its link, so a sliver's area is at most its
    link's length × 2√2 grid steps; here far less: the thinnest the grid allows)."""
    area = _islands()
    pieces = tile(area, match=POINT)
    assert len(pieces) < len(area.geoms) // 4
    assert_sendable(pieces)
    union = shapely.union_all(pieces)
    assert union.covers(area)
    beyond = union.difference(shapely.buffer(area, 2 * GRID, quad_segs=32))
    links = (len(area.geoms) - len(pieces)) * 250 / 111_320  # ≤ 250 m a link, in degrees
    assert beyond.area <= links * 2 * 2**0.5 * GRID
    assert requests(tile(shapely.MultiPolygon(list(area.geoms)[::-1]), match=POINT)) == requests(
        pieces
    )


def test_without_connectors_islands_keep_their_own_pieces_within_two_grid_steps():
    area = _islands(count=6)
    for tolerance in (0.0, 5.0):
        strict = tile(area, tolerance=tolerance, connectors=False)
        assert len(strict) == 6 and len(tile(area, tolerance=tolerance, match=POINT)) == 1
        assert_sendable(strict)
        assert shapely.union_all(strict).covers(area)
        if tolerance:  # within t metres on the ground (a degree of longitude is shorter)
            assert_covers_within(strict, area, tolerance)
        else:
            assert shapely.buffer(area, 2 * GRID, quad_segs=32).covers(shapely.union_all(strict))


def test_parts_farther_apart_than_a_link_never_share_a_piece():
    from parcelsearch.planning.tiling.connectors import MAX_LINK_M

    far = _islands(count=3, gap_m=MAX_LINK_M * 1.05)
    assert len(tile(far, match=POINT)) == 3
    assert len(tile(_islands(count=3, gap_m=MAX_LINK_M * 0.8), match=POINT)) == 1


def test_parts_bound_counts_parts_far_apart():
    far = MultiPolygon([box(0, 0, 0.01, 0.01), box(1, 0, 1.01, 0.01), box(2, 0, 2.01, 0.01)])
    assert parts_bound(far, 500.0) == 3
    assert parts_bound(box(0, 0, 1, 1), 5.0) == 1


@pytest.mark.parametrize("tolerance", [1.0, 5.0, 20.0, 100.0])
def test_estimate_follows_the_vertex_bound_of_one_detailed_part(tolerance):
    """On one part (nothing for the cover to join) the guess is close to the true bound; on
    parts split at ±180° (which the estimate measures joined, and no piece spans) it is
    short by at most the one piece the split adds."""
    area = fractal(5, levels=10)
    bound = lower_bound(area, tolerance=tolerance)
    assert 0.8 * bound - 1 <= estimate(area, tolerance=tolerance) <= 1.25 * bound + 1
    across = split_antimeridian(fractal(5, levels=10, centre=(179.98, -17.0)))
    assert (
        estimate(across, tolerance=tolerance) >= 0.8 * lower_bound(across, tolerance=tolerance) - 1
    )


def test_estimate_shrinks_as_the_tolerance_grows():
    area = fractal(6, levels=9, holes=2)
    guesses = [estimate(area, tolerance=t) for t in (1.0, 5.0, 20.0, 100.0, 500.0)]
    assert guesses == sorted(guesses, reverse=True) and guesses[0] > guesses[-1]


def test_areas_load_only_the_antimeridian_module():
    """``parcelsearch.planning.areas`` needs split_antimeridian alone: the partition, covers and
    bounds stay unloaded until something tiles."""
    import subprocess
    import sys

    code = (
        "import sys, parcelsearch.planning.areas; "
        "print(sorted(m for m in sys.modules if m.startswith('parcelsearch.planning.tiling')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == (
        "['parcelsearch.planning.tiling', "
        "'parcelsearch.planning.tiling.antimeridian', "
        "'parcelsearch.planning.tiling.grid']"
    )


@pytest.mark.parametrize("connectors", [True, False])
def test_exact_least_bounds_the_exact_pieces(connectors):
    from parcelsearch.planning.tiling.bounds import exact_least
    from parcelsearch.planning.tiling.covers import prepared
    from parcelsearch.planning.tiling.partition import exact_pieces

    budget = Budget()
    far = _islands(count=3, gap_m=4_000)
    for area in (_islands(), far, MultiPolygon([*_islands(count=4).geoms, *far.geoms])):
        grown = prepared(area, 0.0)
        pieces = exact_pieces(grown, budget, connectors)
        least = exact_least(grown, budget, connectors)
        assert least[0] <= len(pieces)
        assert least[1] <= sum(budget.polygon_bytes(p) for p in pieces)
    # parts farther apart than a link never share a piece: the bound counts them apart
    assert exact_least(prepared(far, 0.0), budget, connectors)[0] == 3


def test_a_connector_never_steps_off_the_earth():
    """A connector's end steps to a grid neighbour outside its piece; at a vertex on -180°
    that neighbour must not be west of it (the service refuses longitudes below -180)."""
    from parcelsearch.planning.tiling.connectors import connect

    x0 = -180 * 1_000_000
    # the closest vertices, (x0, 1000) and (x0, 3000), both leave along the edge on -180°
    a = np.array([(x0, 0), (x0 + 1000, 0), (x0 + 1000, 500), (x0, 1000)], dtype=np.int64)
    b = np.array([(x0, 3000), (x0 + 1000, 3000), (x0 + 1000, 4000), (x0, 4000)], dtype=np.int64)
    everywhere = np.ones(4, dtype=bool)  # every edge, the one on -180° too, may be left
    joined = connect(a, b, everywhere, everywhere, 1.0, lambda p, q: [True] * len(p))
    assert joined is not None
    assert joined[0][:, 0].min() >= x0


def test_a_connector_finds_a_clear_link_behind_blocked_closest_ones():
    """An island behind another: the closest vertex pairs' links are blocked, a farther
    pair's is clear, and the connector takes it (it tries the 12 closest pairs, not 3)."""
    from parcelsearch.planning.tiling.connectors import _closest_pairs, connect

    # two squares 1,000 grid units apart, counter-clockwise, a vertex every 100 units on the
    # sides that face each other
    a = np.array([(0, 0), *[(1000, y) for y in range(0, 1001, 100)], (0, 1000)], dtype=np.int64)
    b = np.array(
        [(2000, 0), (3000, 0), (3000, 1000), *[(2000, y) for y in range(1000, 99, -100)]],
        dtype=np.int64,
    )
    every_a, every_b = np.ones(len(a), dtype=bool), np.ones(len(b), dtype=bool)
    asked: list[int] = []

    def clear(p: np.ndarray, q: np.ndarray) -> list[bool]:
        before = sum(asked)  # links asked about already, closest first
        asked.append(len(p))
        return [before + k >= 4 for k in range(len(p))]  # the 4 closest meet another island

    joined = connect(a, b, every_a, every_b, 1.0, clear)
    assert asked == [1, 11] and joined is not None  # the closest alone, then the rest
    ring, index = joined
    assert shapely.Polygon(ring).is_valid
    at_b = int(np.flatnonzero(index >= len(a))[0])
    closest = _closest_pairs(a, np.roll(b, -1, axis=0), 1.0)  # b: the vertex after each edge
    fifth = closest[4]
    assert (index[at_b - 1], (index[at_b] - len(a) - 1) % len(b)) == fifth[:2]


@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=1, max_size=12),
    st.sampled_from([1.0, 0.5, 0.1]),
)
@example([(0, 0), (10, 0)], [(5, 0), (5, 0), (-5, 0)], 1.0)  # ties: the order is by index
def test_a_connector_measures_only_the_vertices_that_can_be_closest(a, b, cos_lat):
    """The closest vertex pairs a connector tries, found by measuring only the vertices
    near the other side's box (or, for few pairs, all of them), are the closest pairs of
    all, in the same order."""
    from parcelsearch.planning.tiling.connectors import _PAIRS, _closest_pairs

    pa, pb = np.array(a, dtype=np.int64) * 997, np.array(b, dtype=np.int64) * 1009
    delta = (pb[None, :, :] - pa[:, None, :]).astype(float)
    metres = np.hypot(delta[..., 0] * cos_lat, delta[..., 1]) * 0.1106
    every = sorted((float(metres[i, j]), i, j) for i in range(len(pa)) for j in range(len(pb)))
    expected = [(i, j, m) for m, i, j in every[:_PAIRS]]
    assert _closest_pairs(pa, pb, cos_lat, measure_all=0) == expected  # pruned
    assert _closest_pairs(pa, pb, cos_lat) == expected  # every pair measured


@pytest.mark.parametrize("kind", ["douglas-peucker", "topology-preserving", "fitted"])
def test_a_simplified_cover_stays_within_its_distance_at_ring_starts(kind):
    """Every ring of a cover is simplified within the distance of its buffer, also where the
    ring starts (GEOS also drops a ring's start vertex and may then pass farther away: 2.7 m
    at 2.3 m for this buffer); fitted with free vertices, it keeps a sixth fewer."""
    from parcelsearch.planning.tiling.covers import M_PER_DEGREE, Frame, _douglas_peucker, _fitted

    metre = 1 / M_PER_DEGREE
    grown = shapely.buffer(
        Frame.of(fractal(10, levels=10, holes=2)).scaled(), 2.5 * metre, quad_segs=4
    )
    distance = 2.3 * metre
    plain = _douglas_peucker(grown, distance, kind == "topology-preserving")
    simple = _fitted(grown, distance, lambda: plain) if kind == "fitted" else plain
    assert shapely.get_num_coordinates(simple) < shapely.get_num_coordinates(grown) / 3
    if kind == "fitted":
        assert shapely.is_valid(simple)
        assert shapely.get_num_coordinates(simple) < shapely.get_num_coordinates(plain) * 5 / 6
    for one, other in ((simple, grown), (grown, simple)):
        points = shapely.points(
            shapely.get_coordinates(shapely.segmentize(one.boundary, distance / 4))
        )
        edges = shapely.STRtree(
            np.concatenate(
                [
                    shapely.linestrings(np.stack([xy[:-1], xy[1:]], axis=1))
                    for xy in map(shapely.get_coordinates, shapely.get_rings(other))
                ]
            )
        )
        near, _ = edges.query(points, predicate="dwithin", distance=distance * (1 + 1e-9))
        assert len(np.unique(near)) == len(points)


def _strips(count: int, vertices: int) -> tuple[Polygon, list[Polygon]]:
    """A disc of ``vertices`` grid vertices cut by parallel chords into ``count`` strips."""
    angle = np.linspace(0.0, 2 * np.pi, vertices, endpoint=False) + 0.1
    ring = np.round(np.c_[174.5 + 0.2 * np.cos(angle), -41.5 + 0.2 * np.sin(angle)], 6)
    disc = Polygon(ring)
    half = vertices // 2  # vertex k above, vertex vertices - k below: chords across
    cuts = np.linspace(0, half, count + 1).astype(int)
    strips = []
    for low, high in zip(cuts[:-1], cuts[1:], strict=True):
        top = ring[low : high + 1]
        bottom = ring[[(vertices - k) % vertices for k in range(high, low - 1, -1)]]
        strips.append(Polygon(np.vstack([top, bottom])))
    return disc, strips


def test_refill_recuts_empty_neighbours_into_fewer_pieces():
    from parcelsearch.planning.tiling.repack import refill

    budget = Budget()
    disc, strips = _strips(8, 600)
    assert all(budget.fits(s) for s in strips)
    assert shapely.coverage_union_all(strips).equals(disc)
    made = refill(strips, budget)
    least = budget.vertex_bound(disc)[0]
    assert least < len(strips) - 2
    assert len(made) <= least + 1  # along new diagonals: no strip's edge needed
    assert all(p.is_valid and budget.fits(p) for p in made)
    assert shapely.coverage_union_all(made).equals(disc)
    corners = {tuple(xy) for xy in shapely.get_coordinates(disc).tolist()}
    assert {tuple(xy) for p in made for xy in shapely.get_coordinates(p).tolist()} <= corners


def test_exact_pieces_repack_saves_pieces_and_keeps_the_union():
    from parcelsearch.planning.tiling.partition import exact_pieces

    area = prepared(fractal(5, levels=10), 0.0)
    plain, packed = exact_pieces(area, Budget(), repack=False), exact_pieces(area, Budget())
    assert len(packed) < len(plain)
    assert shapely.coverage_union_all(packed).equals(shapely.coverage_union_all(plain))


def _within(points_of: np.ndarray, line: np.ndarray, distance: float) -> bool:
    """Whether every vertex of ``points_of`` lies within ``distance`` of the line ``line``."""
    edges = shapely.linestrings(np.stack([line[:-1], line[1:]], axis=1))
    return bool(
        (
            shapely.distance(shapely.points(points_of)[:, None], edges[None, :]).min(axis=1)
            <= distance * (1 + 1e-9)
        ).all()
    )


@given(
    st.lists(st.tuples(st.integers(-100, 100), st.integers(-100, 100)), min_size=2, max_size=40),
    st.sampled_from([0.05, 0.5, 2.0, 10.0]),
)
@example([(0, 0), (100, 0), (-100, 1), (100, 1)], 0.5)  # a line that turns back
@example([(10, -70), (-99, 7), (25, -9), (-72, -83)], 0.5)  # a segment ends at its farthest
def test_a_fitted_line_keeps_its_ends_and_passes_near_every_vertex_both_ways(steps, distance):
    """A fitted line starts and ends where the line does, has no more vertices, passes within
    the distance of every vertex, and every point of it lies within the distance of the
    line."""
    from parcelsearch.planning.tiling.line_fitting import fitted

    xy = np.cumsum(np.array(steps) * 0.03, axis=0)
    line = fitted(xy, distance)
    assert (line[0] == xy[0]).all() and (line[-1] == xy[-1]).all()
    assert len(line) <= len(xy)
    assert _within(xy, line, distance)
    share = np.linspace(0.0, 1.0, 17)[:, None, None]
    dense = (line[:-1] + share * (line[1:] - line[:-1])).reshape(-1, 2)
    assert _within(dense, xy, distance)


def test_a_fitted_ring_that_would_cross_itself_is_the_fallbacks():
    """Where a fitted ring would cross itself, the cover keeps the fallback's ring."""
    from parcelsearch.planning.tiling.covers import _fitted

    star = Polygon(
        [
            (5.38, 5.34),
            (4.09, 4.52),
            (4.52, 8.7),
            (-0.63, 4.73),
            (-7.42, 6.53),
            (-3.74, 2.9),
            (-2.58, 0.58),
            (-7.99, -0.85),
            (-2.57, -2.3),
            (0.47, -6.07),
            (1.7, -6.6),
            (1.71, -2.22),
        ]
    )
    close = _fitted(star, 0.01, lambda: star)  # fitted (its vertices move by up to 0.01)
    assert shapely.is_valid(close) and not close.equals_exact(star, 0)
    assert _fitted(star, 1.0, lambda: star).equals_exact(star, 0)  # fitted, it would cross itself


@given(st.integers(0, 10_000), st.sampled_from([2.0, 5.0, 50.0, 500.0]), st.integers(0, 3))
@example(12, 5.0, 2)
@settings(max_examples=40)
def test_a_simplified_buffer_stays_in_its_band_by_construction(seed, tolerance, holes):
    """The first simplification a cover tries (fitted, free vertices) holds nothing farther
    than its distance from the buffer and keeps everything of the buffer farther than that
    from its edge — no check against the area's reach is made, so this must hold by
    construction (:func:`parcelsearch.planning.tiling.covers.cover`'s notes)."""
    from parcelsearch.planning.tiling.covers import M_PER_DEGREE, Frame, _simpler

    metre = 1 / M_PER_DEGREE
    area = Frame.of(fractal(seed, levels=7, holes=holes)).scaled()
    grown = shapely.buffer(area, tolerance / 2 * metre, quad_segs=4)
    distance = 0.49 * tolerance * metre
    first = next(_simpler(grown, [distance]))
    assert shapely.is_valid(first)
    band = 1.01 * distance  # a polygonal buffer lies inside the true one (16 segments: 0.2 %)
    assert shapely.covers(shapely.buffer(grown, band, quad_segs=16), first)
    assert shapely.covers(first, shapely.buffer(grown, -band, quad_segs=16))


@given(
    st.lists(st.tuples(st.integers(-6, 6), st.integers(-6, 6)), min_size=4, max_size=4),
    st.lists(st.tuples(st.integers(-6, 6), st.integers(-6, 6)), min_size=2, max_size=8),
)
@example([(0, 0), (4, 4), (0, 4), (4, 0)], [(2, 2), (9, 9)])  # an edge through the middle
@example([(0, 0), (4, 0), (0, 0), (0, 4)], [(0, 0), (9, 9)])  # a shared end is no crossing
def test_crossing_is_what_shapely_finds_but_at_shared_ends(link_ends, edge_ends):
    """``crossing`` tells whether a link meets an edge (closed segments) that shares no end
    with it, as shapely finds it, counting no edge collinear with the link."""
    from parcelsearch.planning.tiling.connectors import crossing

    ends = np.array(link_ends, dtype=np.int64).reshape(2, 2, 2)
    edges = np.array(edge_ends[: len(edge_ends) // 2 * 2], dtype=np.int64).reshape(-1, 2, 2)
    found = crossing(ends[:, 0], ends[:, 1], edges)
    for k, (p, q) in enumerate(ends.tolist()):
        link = shapely.LineString([p, q]) if p != q else shapely.Point(p)
        expected = False
        for u, v in edges.tolist():
            edge = shapely.LineString([u, v]) if u != v else shapely.Point(u)
            if {tuple(u), tuple(v)} & {tuple(p), tuple(q)} or not link.intersects(edge):
                continue
            collinear = (q[0] - p[0]) * (v[1] - u[1]) == (q[1] - p[1]) * (v[0] - u[0]) and (
                q[0] - p[0]
            ) * (u[1] - p[1]) == (q[1] - p[1]) * (u[0] - p[0])
            expected |= not collinear
        assert bool(found[k]) == expected


def _island_cluster(count: int = 120, seed: int = 7) -> shapely.Geometry:
    """``count`` small random islands (nonagons) within about 5 km, some overlapping."""
    rng = np.random.default_rng(seed)
    islands = []
    for _ in range(count):
        x, y = rng.random(2) * 0.05
        radius = 0.0004 + rng.random() * 0.0008
        angles = np.sort(rng.random(9)) * 2 * np.pi
        islands.append(
            Polygon(
                np.column_stack([x + radius * np.cos(angles), y + radius * np.sin(angles)])
                + [174.5, -36.5]
            )
        )
    return shapely.union_all(islands)


@pytest.mark.parametrize("max_bytes", [7168, 1500])
def test_connectors_crossing_earlier_ones_are_refused_before_any_ring_is_built(
    monkeypatch, max_bytes
):
    """A link crossing an earlier connector of either piece, or two pieces whose
    connectors cross, would make a ring that crosses itself: they are refused up front
    (here, on an island cluster, at least ten times), and the pieces are exactly those
    made when only the ring's own validity check refuses them."""
    import parcelsearch.planning.tiling.merging as merging

    area = _island_cluster(seed=0)  # a cluster where refusals are common
    refused = []
    check = merging.crossing

    def counted(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
        found = check(starts, ends, edges)
        refused.append(int(found.sum()))
        return found

    monkeypatch.setattr(merging, "crossing", counted)
    early = tile(area, max_request_bytes=max_bytes, match=POINT)
    assert sum(refused) >= 10
    monkeypatch.setattr(
        merging, "crossing", lambda starts, ends, edges: np.zeros(len(starts), dtype=bool)
    )
    late = tile(area, max_request_bytes=max_bytes, match=POINT)
    assert [p.wkb for p in early] == [p.wkb for p in late]
    assert_sendable(early, max_bytes)


def test_an_area_off_the_grid_at_many_vertices_is_grown_unchecked():
    """An area with a handful of vertices off the grid is kept as it is when snapping loses
    none of it; one with more off the grid is grown before it is snapped, checked or not
    (rounding many vertices all but surely loses some of the area)."""
    from parcelsearch.planning.tiling.grid import ROUNDING_MARGIN, grow_for_rounding, off_grid

    few = box(-97.5, 32.7, -97.4, 32.7000004).union(box(-97.5, 32.7, -97.4, 32.8))
    assert 0 < off_grid(few) <= 8 and grow_for_rounding(few) is few
    # a 40-gon whose vertices all round outwards: snapping would lose nothing, yet it is grown
    angles = np.linspace(0, 2 * np.pi, 40, endpoint=False)
    xy = np.column_stack([np.cos(angles), np.sin(angles)]) * 0.01 + [-97.45, 32.75]
    outward = np.where(xy > [-97.45, 32.75], np.ceil(xy * 1e6), np.floor(xy * 1e6)) / 1e6
    many = Polygon(outward - np.sign(outward - [-97.45, 32.75]) * 3e-7)
    assert off_grid(many) > 8
    grown = grow_for_rounding(many)
    assert grown.covers(many) and grown.area > many.area + many.length * ROUNDING_MARGIN * 0.9


def test_nearest_first_splits_the_pairs_within_reach_without_losing_one():
    """Each piece's few nearest pieces within reach (by their boxes) are tried first, both
    ways; every other pair within reach is left for later, and no pair is lost or added."""
    from parcelsearch.planning.tiling.merging import _near, _nearest_first

    area = _island_cluster(60, seed=3)
    pieces = list(shapely.get_parts(area))
    near = _near(pieces, list(range(len(pieces))), 0.8)
    first, later = _nearest_first(pieces, near, 0.8, 3)
    pairs = {(i, j) for i, others in enumerate(near) for j in others if i < j}
    tried_first = {(i, j) for i, others in enumerate(first) for j in others if i < j}
    assert tried_first | set(later) == pairs and not tried_first & set(later)
    assert all(j in first[i] for i, others in enumerate(first) for j in others)  # symmetric
    assert later and tried_first
    boxes = shapely.bounds(np.asarray(pieces, dtype=object))
    for i, others in enumerate(near):
        gap = {
            j: np.hypot(
                *(
                    np.maximum(
                        0, np.maximum(boxes[j, :2] - boxes[i, 2:], boxes[i, :2] - boxes[j, 2:])
                    )
                    * [0.8, 1]
                )
            )
            for j in others
        }
        nearest = sorted(others, key=lambda j: (gap[j], j))[:3]
        assert set(nearest) <= first[i]


@pytest.mark.parametrize("max_bytes", [7168, 2000])
def test_merging_tries_every_pair_within_reach_that_still_fits(monkeypatch, max_bytes):
    """The pairs left for later are tried once no nearer pair fits: when merging stops, no
    two pieces of different parts within a link's reach whose bytes leave room for a
    connector are left untried, and far fewer connectors are tried than there are pairs
    within reach."""
    import parcelsearch.planning.tiling.merging as merging

    mergers = []
    run = merging._Merger.run

    def kept(self: merging._Merger) -> list[Polygon]:
        mergers.append(self)
        return run(self)

    monkeypatch.setattr(merging._Merger, "run", kept)
    area = _island_cluster()
    tile(area, max_request_bytes=max_bytes, match=POINT)
    merger = mergers[-1]
    room = merger.budget.max_request_bytes + merger.budget.base - 1
    first = merger.first.pieces
    near = merging._near(first, list(range(len(first))), merger.cos_lat)  # islands: parts
    within = {(p, q) for p, others in enumerate(near) for q in others if p < q}
    for p, q in within:
        i, j = sorted((merger._now(p), merger._now(q)))
        a, b = merger.live[i], merger.live[j]
        if i == j or a.parts & b.parts or a.size + b.size > room:
            continue
        assert (i, j) in merger.tried
    assert len(merger.tried) < len(within) / 2


def test_outer_edges_are_the_area_boundary_edges_but_the_antimeridian_cut():
    """The area's outer edges (read for all its rings at once) are exactly its rings'
    edges, holes' too, undirected, but those running along ±180° where the area was split;
    and a ring's outer edges found among rings laid end to end are those found for it
    alone."""
    from parcelsearch.planning.tiling.grid import CODE_OFFSET, snap
    from parcelsearch.planning.tiling.merging import _Merger, _outer_edges

    area = snap(
        MultiPolygon(
            [
                Polygon([(179.9, 10.0), (180.0, 10.0), (180.0, 10.1), (179.9, 10.1)]),
                Polygon(
                    [(179.0, 10.0), (179.5, 10.0), (179.5, 10.5), (179.0, 10.5)],
                    [[(179.1, 10.1), (179.2, 10.1), (179.2, 10.2)]],
                ),
            ]
        )
    )
    vertices, keys = _outer_edges(area)
    low, high = np.divmod(keys, len(vertices))
    decode = lambda code: ((int(code) >> 31) - CODE_OFFSET, (int(code) & (2**31 - 1)) - CODE_OFFSET)  # noqa: E731
    found = {
        frozenset((decode(vertices[a]), decode(vertices[b])))
        for a, b in zip(low.tolist(), high.tolist(), strict=True)
    }
    expected = set()
    for ring in shapely.get_rings(np.asarray(list(area.geoms), dtype=object)):
        xy = [tuple(p) for p in np.rint(shapely.get_coordinates(ring) * 1e6).astype(int).tolist()]
        for p, q in zip(xy[:-1], xy[1:], strict=True):
            if not (abs(p[0]) == abs(q[0]) == 180_000_000):
                expected.add(frozenset((p, q)))
    assert found == expected and len(expected) == 3 + 4 + 3

    pieces = list(shapely.get_parts(_island_cluster(30, seed=5)))
    merger = _Merger(pieces, list(range(len(pieces))), shapely.union_all(pieces), Budget())
    alone = [merger.first.grids_of([piece])[0] for piece in pieces]
    for together, single in zip(merger.first.grids, alone, strict=True):
        assert [a.tolist() for a in together] == [a.tolist() for a in single]
    assert all(outer.all() for _, _, outer in alone)  # islands: every edge is the area's


def test_the_closest_link_is_checked_alone_before_the_others():
    """A connector asks whether its closest link may be taken before it asks about any
    other, and asks about the rest only when that one is not taken: the links it asks
    about, in order, are the closest pairs, each once."""
    from parcelsearch.planning.tiling.connectors import _PAIRS, connect

    a = np.array([[0, 0], [10, 0], [10, 10], [0, 10]], dtype=np.int64)
    b = a + [20, 0]
    everywhere = np.ones(4, dtype=bool)
    asked: list[int] = []

    def clear(starts: np.ndarray, ends: np.ndarray) -> list[bool]:
        asked.append(len(starts))
        return [True] * len(starts)

    assert connect(a, b, everywhere, everywhere, 1.0, clear) is not None
    assert asked == [1]
    asked.clear()

    def shut_first(starts: np.ndarray, ends: np.ndarray) -> list[bool]:
        asked.append(len(starts))
        return [len(asked) > 1] * len(starts)

    assert connect(a, b, everywhere, everywhere, 1.0, shut_first) is not None
    assert asked == [1, _PAIRS - 1]  # of the 16 pairs, the closest


# -- the matching rule -----------------------------------------------------------------------


@pytest.mark.parametrize("match", ["unknown", "intersects"])
def test_unless_matched_by_a_point_exact_pieces_use_no_connector(match):
    """Exact mode promises two grid steps; a link between two parts runs outside the
    area, so under a rule that matches footprints (or may) the exact pieces are those
    made without connectors, within two grid steps of the area everywhere."""
    area = _islands(count=6)
    strict = tile(area, match=match)
    assert requests(strict) == requests(tile(area, connectors=False))
    assert len(strict) == 6 and len(tile(area, match=POINT)) == 1
    assert shapely.buffer(area, 2 * GRID, quad_segs=32).covers(shapely.union_all(strict))


def test_tolerance_connectors_under_an_unknown_rule_stay_within_t():
    """Islands 150 m apart at tolerance 100 m: their covers are 50 m apart, and connectors
    across those gaps (slivers at most 75 m from an island) join them, every piece within
    100 m of the area; at 20 m the gaps are too wide for any sliver, so no island shares a
    piece, yet under the point rule they all do."""
    area = _islands(count=6)
    joined = tile(area, tolerance=100.0)
    assert len(joined) < len(tile(area, tolerance=100.0, connectors=False)) == 6
    assert_covers_within(joined, area, 100.0)
    apart = tile(area, tolerance=20.0)
    assert len(apart) == 6 and len(tile(area, tolerance=20.0, match=POINT)) == 1
    assert_covers_within(apart, area, 20.0)


def test_sliver_reach_takes_a_link_only_within_t_of_the_area():
    """A sliver's samples are measured against the area the user gave: a link along an
    island's coast 1 m out is taken at 5 m, one halfway across a 40 m gap is not (20 m
    out), and neither is one leaving an edge that runs far out."""
    from parcelsearch.planning.tiling.grid import SCALE
    from parcelsearch.planning.tiling.match_rule import SliverReach

    metre = 1 / 111_320
    area = MultiPolygon(
        [box(0, 0, 100 * metre, 100 * metre), box(140 * metre, 0, 240 * metre, 100 * metre)]
    )
    reach = SliverReach(area, 5.0)

    def grid(*points: tuple[float, float]) -> np.ndarray:
        return np.rint(np.array(points) * metre * SCALE).astype(np.int64)

    along = grid((40, -1), (50, -1))
    assert reach(np.stack([along, grid((40, -1), (40, -2)), grid((50, -2), (50, -1))]))
    across = grid((101, 50), (139, 50))
    assert not reach(np.stack([across, grid((101, 50), (101, 51)), grid((139, 49), (139, 50))]))
    far_edge = grid((40, -1), (40, -30))
    assert not reach(np.stack([along, far_edge, grid((50, -2), (50, -1))]))
    # a link too long to sample (more than 256 samples at 5/16 m) is not taken either
    assert not reach(
        np.stack([grid((0, -1), (90, -1)), grid((0, -1), (0, -2)), grid((90, -2), (90, -1))])
    )


def test_the_matching_rule_is_checked_by_name():
    from parcelsearch.planning.tiling import MATCH_RULES, check_match

    assert MATCH_RULES == ("representative-point", "intersects", "unknown")
    assert check_match(" intersects ") == "intersects"
    with pytest.raises(
        InputError, match="must be one of representative-point, intersects, unknown, got 'centroid'"
    ) as caught:
        tile(SQUARE, match="centroid")
    assert caught.value.field == "match"


@pytest.mark.parametrize(
    "area",
    [
        pytest.param(fractal(10, levels=10, holes=2), id="large"),
        pytest.param(fractal(9, levels=6), id="small"),
        pytest.param(MultiPolygon([SQUARE, box(-97.3, 32.7, -97.2, 32.8)]), id="two"),
    ],
)
def test_tolerance_pieces_are_checked_only_against_exact_pieces_known(area):
    """Unless the area is one ring short enough for one request, its exact pieces are not
    made to check tolerance pieces against (a coarser tolerance is never the slow path),
    however few its vertices; where a memo holds them already they are, and the better of
    the two is returned."""
    from parcelsearch.planning.tiling.pieces import TilingMemo

    alone = TilingMemo()
    loose = tile(area, tolerance=5.0, memo=alone)
    assert alone.tiled(0.0) == 0 and alone.tiled(5.0) == 1
    known = TilingMemo()
    exact = tile(area, memo=known)
    checked = tile(area, tolerance=5.0, memo=known)
    assert known.tiled(0.0) == 1
    assert requests(checked) == requests(exact if _measure(exact) <= _measure(loose) else loose)
    # what a plan made afresh counts, whatever the memo holds
    assert known.afresh(area, 5.0, Budget()) == alone.afresh(area, 5.0, Budget()) == len(loose)


@pytest.mark.parametrize("tolerance", [0.0, 20.0, 100.0])
def test_lower_bound_counts_the_groups_the_rule_lets_links_join(tolerance):
    """Under a rule that matches footprints (or may), parts no allowed link joins never
    share a piece, so the bound counts them apart: in exact mode every island, at 20 m
    every island still (150 m gaps), at 100 m fewer (links up to 200 m); never more than
    the pieces, and never less than the bound under the point rule; without connectors,
    every island at every tolerance here."""
    area = _islands(count=6)
    strict = lower_bound(area, tolerance, match="unknown")
    assert strict <= len(tile(area, tolerance=tolerance))
    assert strict >= lower_bound(area, tolerance) >= 1
    assert (strict == 6) is (tolerance < 100)
    assert lower_bound(area, tolerance, connectors=False) == 6  # the covers stay 50 m apart


@pytest.mark.parametrize("tolerance", [5.0, 500.0])
def test_a_detailed_area_is_simplified_before_a_wide_buffer_and_its_cover_keeps_the_promise(
    tolerance,
):
    """At 500 m a detailed island (7,168 vertices, edges of some 40 m) is simplified by 2 % of
    the tolerance before it is buffered (GEOS is several times faster on the simpler ring);
    at 5 m it is not. Either way the cover holds the whole area and stays within the
    tolerance of it (against the area's own buffer by ``t``, which lies inside the true one)."""
    from parcelsearch.planning.tiling.covers import M_PER_DEGREE, Frame, _grown, cover

    area = fractal(7, levels=10)
    metre = 1 / M_PER_DEGREE
    scaled = Frame.of(area).scaled()
    _, spent = _grown(scaled, tolerance / 2 * metre, 0.02 * tolerance * metre)
    assert spent == (0.02 * tolerance * metre if tolerance == 500.0 else 0.0)
    made = cover(area, tolerance)
    assert shapely.covers(made, area)
    frame = Frame.of(area)
    made_scaled = shapely.transform(
        made, lambda xy: np.column_stack([(xy[:, 0] - frame.lon0) * frame.c, xy[:, 1]])
    )
    assert shapely.covers(shapely.buffer(scaled, tolerance * metre, quad_segs=16), made_scaled)
    assert not shapely.covers(shapely.buffer(scaled, 0.9 * tolerance * metre), made_scaled)


def _island_in_a_bay(metre: float) -> MultiPolygon:
    """A 5 km square whose north shore is a bay 6 m deep, 400 vertices along it, and a
    3 km island 4 m wide in the bay, 1 m off its shore (scaled degrees, ``metre`` one
    metre): plain Douglas–Peucker by 10 m straightens the shore across the island."""
    side, depth = 5000 * metre, 6 * metre
    shore = np.column_stack([np.linspace(0.9 * side, 0.1 * side, 400), np.full(400, side - depth)])
    mainland = Polygon(
        [(0, 0), (side, 0), (side, side), (0.9 * side, side), *shore, (0.1 * side, side), (0, side)]
    )
    island = box(0.2 * side, side - depth + metre, 0.8 * side, side - metre)
    return MultiPolygon([mainland, island])


def test_parts_a_simplification_makes_overlap_are_still_simplified_before_the_buffer():
    """Issue 59: islands off a bay (New York City's boroughs) made the area's simplification
    invalid as a whole, and the 500 m cover buffered every vertex (2.9 × the exact plan's
    time). Now the parts simplified apart are joined: the buffer is of the simpler area, holds
    the area's own buffer and reaches at most twice the simplification farther."""
    from parcelsearch.planning.tiling.covers import (
        M_PER_DEGREE,
        _douglas_peucker,
        _grown,
        _presimplified,
    )

    metre = 1 / M_PER_DEGREE
    area = _island_in_a_bay(metre)
    assert area.is_valid
    by, distance = 10 * metre, 250 * metre
    assert not _douglas_peucker(area, by, preserve_topology=False).is_valid  # the case
    simpler = _presimplified(area, by)
    assert simpler.is_valid and shapely.get_num_coordinates(simpler) < 20  # of 410
    assert shapely.hausdorff_distance(simpler.boundary, area.boundary) <= by
    assert shapely.covers(shapely.buffer(simpler, by, quad_segs=16), area)
    grown, spent = _grown(area, distance, by)
    assert spent == by
    assert shapely.covers(grown, shapely.buffer(area, 0.99 * distance, quad_segs=16))
    assert shapely.covers(shapely.buffer(area, distance + 2 * by, quad_segs=16), grown)


def test_a_cover_of_islands_in_a_bay_keeps_the_promise():
    """The cover made through the joined parts holds the whole area and stays within the
    tolerance of it."""
    from parcelsearch.planning.tiling.covers import M_PER_DEGREE, Frame, cover

    tolerance = 500.0
    area = shapely.transform(_island_in_a_bay(1 / M_PER_DEGREE), lambda xy: xy + (-73.9, 40.7))
    frame = Frame.of(area)
    made = cover(area, tolerance)
    assert shapely.covers(made, area)
    made_scaled = Frame(made, frame.lon0, frame.c).scaled()  # in the area's frame
    assert shapely.covers(
        shapely.buffer(frame.scaled(), tolerance / M_PER_DEGREE, quad_segs=16), made_scaled
    )
