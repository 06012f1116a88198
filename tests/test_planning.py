"""plan(): pieces, tiles, summary, reprs and suggest_tolerance — zero calls."""

from __future__ import annotations

import subprocess
import sys

import geopandas as gpd
import numpy as np
import pytest
import shapely
from shapely import MultiPolygon, box

from parcelsearch import _wire
from parcelsearch.errors import InputError
from parcelsearch.planning import tiling
from parcelsearch.planning.plans import Piece, Plan, plan, suggest_tolerance

SQUARE = box(-97.5, 32.7, -97.4, 32.8)
#: The matching rule under which connectors join parts as far apart as a link reaches.
POINT = "representative-point"
LAKE = SQUARE.difference(box(-97.46, 32.74, -97.44, 32.76))


def wiggly(seed: int, n: int = 3000) -> shapely.Polygon:
    """A star-shaped area with ``n`` vertices (needs several pieces)."""
    rng = np.random.default_rng(seed)
    angles = np.linspace(0, 2 * np.pi, n, endpoint=False)
    radii = 0.03 * (1 + 0.3 * rng.random(n))
    return shapely.Polygon(
        np.column_stack([-97.3 + radii * np.cos(angles), 32.75 + radii * np.sin(angles)])
    )


@pytest.fixture(scope="module")
def areas() -> gpd.GeoDataFrame:
    geoms = [
        SQUARE,
        LAKE,
        MultiPolygon([box(-97.2, 32.7, -97.19, 32.71), box(-97.18, 32.7, -97.17, 32.71)]),
        wiggly(1),
    ]
    return gpd.GeoDataFrame({"tract": ["a", "b", "c", "d"]}, geometry=geoms, crs=4326)


@pytest.fixture(scope="module")
def planned(areas: gpd.GeoDataFrame) -> Plan:
    return plan(areas, id_column="tract")


def test_pieces_are_the_requests_that_will_be_sent(planned):
    for piece in planned.pieces:
        assert isinstance(piece, Piece)
        assert piece.polygon_json == _wire.ring_json(piece.geometry.exterior.coords)
        target = _wire.search_target("/v1/search", piece.polygon_json, 99999)
        assert piece.request_bytes == _wire.request_line_bytes(target) <= 7168
        assert piece.geometry.is_valid and not piece.geometry.interiors


def test_pieces_per_area_and_minimum_calls(planned):
    per_area = {}
    for piece in planned.pieces:
        per_area.setdefault(piece.area_id, []).append(piece.piece_id)
    assert {k: len(v) for k, v in per_area.items()} | {"d": 0} == {"a": 1, "b": 2, "c": 2, "d": 0}
    assert all(ids == list(range(len(ids))) for ids in per_area.values())
    assert len(per_area["d"]) > 1
    assert planned.min_calls == len(planned.pieces)


def test_tiles_frame(planned):
    tiles = planned.tiles
    assert list(tiles.columns) == [
        "tract",
        "piece_id",
        "vertices",
        "request_bytes",
        "min_calls",
        "geometry",
    ]
    assert tiles.crs.to_epsg() == 4326
    assert tiles["min_calls"].sum() == planned.min_calls
    assert (tiles["vertices"] == [len(g.exterior.coords) - 1 for g in tiles.geometry]).all()
    assert tiles["request_bytes"].max() <= 7168


def test_summary(planned):
    summary = planned.summary()
    assert summary.index.name == "tract"
    assert summary.loc["b"].tolist() == [1, 1, 8, 2, 2]
    # c's two parts, 900 m apart, keep a piece each: the matching rule is not known
    assert summary.loc["c", ["parts", "holes", "pieces"]].tolist() == [2, 0, 2]
    assert summary["min_calls"].sum() == planned.min_calls


def test_repr_leads_with_the_figures(planned):
    text = repr(planned)
    assert text.startswith(
        f"<Plan: 4 areas → {len(planned.pieces)} pieces, at least {planned.min_calls} calls"
    )
    assert "exact; request lines ≤ 7,168 bytes" in text
    assert "<table" in planned._repr_html_() and "at least" in planned._repr_html_()


def test_repr_says_the_price_known_without_spending(planned):
    # Before parcelsearch.known_price(plan) reads the stores: the minimum and what would
    # price the rest (fewer than 30 pieces: page 1 of each, which prices it exactly).
    n = planned.min_calls
    expected = (
        f"price: at least {n} calls; page 1 of every piece ({n} calls) would price it "
        "exactly (parcelsearch.known_price(plan) reads what the cache and run history know"
    )
    assert expected in planned._repr_html_()
    assert repr(planned).endswith(
        f"; page 1 of every piece ({n} calls) would price it exactly>"
    )  # the headline already says the minimum
    assert planned.price is None
    from parcelsearch.maps.describe import plan_spec

    assert expected in plan_spec(planned).subtitle


def test_a_large_plan_names_the_survey_that_would_price_it() -> None:
    cells = [box(x * 0.01, 0, x * 0.01 + 0.009, 0.009) for x in range(40)]
    many = plan(cells)
    assert "a survey of about 4 calls would price the rest" in repr(many)  # 10 % of 40


@pytest.mark.parametrize("how", [{"connectors": False}, {}, {"match": "intersects"}])
def test_unless_the_vendor_matches_by_a_point_each_part_keeps_its_own_pieces(areas, how):
    """Without connectors, or under a rule that matches footprints (or may: the default),
    every exact piece stays within two grid steps of its area; only under the point rule
    do c's parts share a piece, whose sliver leaves that reach."""
    strict = plan(areas, id_column="tract", **how)
    joined = plan(areas, id_column="tract", match=POINT)
    assert strict.summary().loc["c", "pieces"] == 2
    assert strict.connectors is how.get("connectors", True) and joined.connectors is True
    assert ("exact, no connectors;" in repr(strict)) is (how == {"connectors": False})
    assert strict.without(["a"]).connectors is strict.connectors
    assert strict.without(["a"]).match == strict.match == how.get("match", "unknown")
    for piece in strict.pieces:
        reach = shapely.buffer(strict.areas.geometry[piece.area_id], 2.01e-6, quad_segs=32)
        assert reach.covers(piece.geometry)
    (one,) = [p for p in joined.pieces if p.area_id == "c"]
    assert not shapely.buffer(areas.geometry[2], 2.01e-6).covers(one.geometry)
    assert "matched by a point" in repr(joined)


def test_suggest_tolerance_plans_as_the_plan_was_made(areas):
    strict = plan(areas.iloc[[2]], id_column="tract", connectors=False)
    assert strict.min_calls == 2
    assert suggest_tolerance(strict, 1) is None  # the parts are 900 m apart: no rung joins them
    assert suggest_tolerance(areas.iloc[[2]], 1, id_column="tract", match=POINT) == 0.0
    assert suggest_tolerance(areas.iloc[[2]], 1, id_column="tract", connectors=False) is None
    # the rule not known: at 500 m the two covers share one piece (fewer calls win over
    # the exact pieces' fewer bytes), and that piece stays within 500 m of c
    assert suggest_tolerance(areas.iloc[[2]], 1, id_column="tract") == 500.0
    (one,) = plan(areas.iloc[[2]], 500, id_column="tract").pieces
    piece, area = gpd.GeoSeries([one.geometry, areas.geometry.iloc[2]], crs=4326).to_crs(32614)
    assert piece.covers(area) and area.buffer(500, quad_segs=64).covers(piece)


def test_areas_are_validated_and_indexed(planned):
    assert planned.areas.index.tolist() == ["a", "b", "c", "d"]
    assert planned.id_name == "tract"
    assert planned.areas.crs.to_epsg() == 4326


def test_same_areas_same_plan(areas, planned):
    again = plan(areas, id_column="tract")
    assert [(p.area_id, p.piece_id, p.polygon_json) for p in again.pieces] == [
        (p.area_id, p.piece_id, p.polygon_json) for p in planned.pieces
    ]


def test_budget_reserves_five_digit_pages():
    tight = plan([wiggly(2)], max_request_bytes=2000)
    assert all(p.request_bytes <= 2000 for p in tight.pieces)
    assert len(tight.pieces) > len(plan([wiggly(2)]).pieces)


def test_tolerance_plans_fewer_pieces(areas):
    exact = plan(areas, id_column="tract")
    loose = plan(areas, 50, id_column="tract")
    assert loose.tolerance == 50.0 and "tolerance 50 m" in repr(loose)
    assert loose.min_calls < exact.min_calls
    assert loose.summary().loc["b", "pieces"] == 2  # a 2 km lake is no narrow hole: kept
    for area_id, geometry in loose.areas.geometry.items():
        union = shapely.union_all([p.geometry for p in loose.pieces if p.area_id == area_id])
        assert union.covers(geometry)


@pytest.mark.parametrize(
    ("tolerance", "match"),
    [
        pytest.param(
            0.2,
            r"must be 0 for exact pieces or at least 0.5 metres .*got 0.2. "
            r"Use tolerance=0 for exact pieces",
            id="too-fine",
        ),
        pytest.param(-1, r"must be at least 0, got -1", id="negative"),
        pytest.param("five", r"takes a number of metres, got 'five'", id="not-a-number"),
    ],
)
def test_bad_tolerance(tolerance, match):
    with pytest.raises(InputError, match=match) as caught:
        plan([SQUARE], tolerance)
    assert caught.value.field == "tolerance"


def test_bad_area_names_the_row():
    frame = gpd.GeoDataFrame(
        {"tract": ["ok", "bad"]}, geometry=[SQUARE, shapely.Point(0, 0)], crs=4326
    )
    with pytest.raises(InputError, match=r"area 'bad': geometry is a Point") as caught:
        plan(frame, id_column="tract")
    assert caught.value.row == "bad"


def test_suggest_tolerance(areas):
    exact = plan(areas, id_column="tract").min_calls
    assert suggest_tolerance(areas, exact, id_column="tract") == 0.0
    suggested = suggest_tolerance(areas, exact - 1, id_column="tract")
    assert suggested is not None and suggested > 0
    assert plan(areas, suggested, id_column="tract").min_calls <= exact - 1
    assert suggest_tolerance(areas, 1, id_column="tract", ladder=(1, 2)) is None


@pytest.mark.slow
def test_suggest_tolerance_is_the_smallest_rung_that_fits(areas):
    """Bisection on lower bounds finds what trying every rung in turn finds."""
    ladder = (1, 2, 5, 10, 20, 50, 100, 200, 500)
    counts = {t: plan(areas, t, id_column="tract").min_calls for t in (0, *ladder)}
    for max_calls in sorted(set(counts.values()) | {min(counts.values()) - 1}):
        expected = next((float(t) for t, n in counts.items() if n <= max_calls), None)
        assert suggest_tolerance(areas, max_calls, ladder, id_column="tract") == expected


@pytest.mark.slow
def test_suggest_tolerance_from_the_refused_plan_agrees_and_fits(areas):
    """Given the refused plan, the suggestion is what the areas alone give, and its plan
    fits: a refusal never suggests a tolerance that is refused again."""
    ladder = (1, 2, 5, 10, 20, 50, 100, 200, 500)
    refused = plan(areas, id_column="tract")
    for max_calls in range(1, refused.min_calls + 1):
        suggested = suggest_tolerance(refused, max_calls, ladder)
        assert suggested == suggest_tolerance(areas, max_calls, ladder, id_column="tract")
        if suggested is not None:
            assert plan(areas, suggested, id_column="tract").min_calls <= max_calls


def test_suggest_tolerance_from_a_tolerance_plan_tries_only_larger_rungs(areas):
    at_five = plan(areas, 5, id_column="tract")
    assert suggest_tolerance(at_five, at_five.min_calls) == 5.0
    suggested = suggest_tolerance(at_five, at_five.min_calls - 1)
    assert suggested is not None and suggested > 5
    assert plan(areas, suggested, id_column="tract").min_calls < at_five.min_calls
    assert suggest_tolerance(at_five, 0, ladder=(1, 2, 5)) is None


def test_lower_bound_never_exceeds_the_pieces(areas):
    for geometry in areas.geometry:
        for tolerance in (0.0, 1.0, 20.0):
            assert tiling.lower_bound(geometry, tolerance=tolerance) <= len(
                tiling.tile(geometry, tolerance=tolerance)
            )


def test_without_drops_areas_and_their_pieces_only() -> None:
    import parcelsearch

    full = parcelsearch.plan(parcelsearch.demo_areas(), id_column="area_id")
    less = full.without(["park-ring"])
    assert "park-ring" not in less.areas.index
    assert [p for p in full.pieces if p.area_id != "park-ring"] == less.pieces
    assert (less.tolerance, less.path, less.id_name) == (full.tolerance, full.path, full.id_name)


@pytest.mark.slow
def test_suggest_tolerance_keeps_what_it_makes_in_the_refused_plans_memo(areas):
    """The memo is the plan's: suggest_tolerance fills it, and planning the suggestion
    with it tiles nothing again — per area, the pieces of a plan made from scratch, or the
    exact pieces the memo holds where those are fewer, or as many and shorter."""
    refused = plan(areas, id_column="tract")
    assert refused.memo.tolerances() == {0.0} and refused.memo.tiled(0.0) == len(areas)
    suggested = suggest_tolerance(refused, refused.min_calls - 1)
    assert suggested is not None and suggested in refused.memo.tolerances()
    tiled = refused.memo.tiled(suggested)
    assert tiled == len(areas)  # the rung that fits was tiled whole, once
    again = plan(refused.areas, suggested, memo=refused.memo)
    assert refused.memo.tiled(suggested) == tiled  # nothing tiled again
    fresh = plan(areas, suggested, id_column="tract")
    assert fresh.memo is not refused.memo and suggested in fresh.memo.tolerances()
    assert again.min_calls <= fresh.min_calls <= refused.min_calls - 1
    swapped = []
    for area_id in refused.areas.index:
        texts = {
            name: [p.polygon_json for p in made.pieces if p.area_id == area_id]
            for name, made in (("again", again), ("fresh", fresh), ("exact", refused))
        }
        assert texts["again"] in (texts["fresh"], texts["exact"])
        if texts["again"] != texts["fresh"]:
            swapped.append(area_id)
            assert len(texts["again"]) <= len(texts["fresh"])
    # the lake (b) and the two squares (c): their exact pieces are shorter than the covers'
    assert swapped == ["b", "c"]
    assert refused.without(["a"]).memo is refused.memo


def test_a_refusal_suggests_at_once_only_for_small_areas(areas):
    from parcelsearch.planning.plans import SUGGEST_AT_ONCE_UP_TO, suggests_at_once

    assert suggests_at_once(plan(areas.iloc[:3], id_column="tract"))
    assert not suggests_at_once(plan(areas, id_column="tract"))  # d: 3,000 vertices
    assert SUGGEST_AT_ONCE_UP_TO == 2_000


def test_point_savings_bound_what_connectors_would_save_under_the_point_rule(areas):
    """c's two parts, a piece each under the default rule, share one under the point rule:
    the plan says connectors could save up to one call; nothing to say under the point rule
    or without connectors."""
    default = plan(areas, id_column="tract")
    joined = plan(areas, id_column="tract", match=POINT)
    assert default.point_savings == 1 == len(default.pieces) - len(joined.pieces)
    assert "connectors could save up to 1 call if the vendor matches by a point" in repr(default)
    assert joined.point_savings == 0 and "could save" not in repr(joined)
    assert plan(areas, id_column="tract", connectors=False).point_savings == 0


# -- a tolerance large against the areas: refused before tiling (issue 49) ------------------


def test_a_tolerance_wide_against_the_areas_is_refused_before_tiling(areas) -> None:
    """50 km on areas up to 11 km wide: refused in metres and as a share of the widest
    area's width, naming the largest tolerance taken and the override; trusted, planned."""
    from parcelsearch.planning.tiling.covers import tolerance_limit, widths_m

    widths = widths_m(areas.geometry.to_numpy())
    widest = areas["tract"].iloc[int(np.argmax(widths))]
    with pytest.raises(InputError) as caught:
        plan(areas, 50_000, id_column="tract", memo=(memo := tiling.TilingMemo()))
    error = caught.value
    share = f"{100 * 50_000 / widths.max():,.0f} %"
    assert (error.field, error.row) == ("tolerance", widest)
    assert (
        f"a tolerance of 50,000 m is {share} of the width of the widest area "
        f"({widest!r}, {widths.max() / 1000:,.1f} km wide), more than 5,000 m in any case"
    ) in str(error)
    assert "nothing was planned or spent" in str(error)
    assert "Use at most --tolerance 5000. If you mean it, pass --trust-tolerance." in error.render(
        "cli"
    )
    assert "trust_tolerance=True" in str(error)
    assert not memo.__dict__ or not any(memo.__dict__.values())  # nothing was tiled
    assert tolerance_limit(areas.geometry.to_numpy()) == 5_000
    assert plan(areas.iloc[:1], 5_000, id_column="tract").tolerance == 5_000
    assert plan(areas.iloc[:1], 6_000, id_column="tract", trust_tolerance=True).min_calls == 1
    with pytest.raises(InputError) as caught:  # c: two sites, 2.8 km wide in all
        plan(areas.iloc[2:3], 2_000, id_column="tract")
    assert (
        "a tolerance of 2,000 m is 71 % of the width of the widest area ('c', 2.8 km "
        "wide), more than 50 % of it"
    ) in str(caught.value)
    assert "Use at most --tolerance 1400." in caught.value.render("cli")
    assert plan(areas.iloc[2:3], 1_400, id_column="tract").min_calls == 1


def test_a_tolerance_over_5000_m_is_refused_whatever_the_areas() -> None:
    county = box(-98.5, 32.0, -97.0, 33.5)  # about 150 km wide
    with pytest.raises(
        InputError,
        match=r"a tolerance of 6,000 m is 4 % of the width .*"
        r"more than 5,000 m in any case",
    ):
        plan([county], 6_000)
    assert plan([county], 6_000, trust_tolerance=True).tolerance == 6_000


def test_suggest_tolerance_never_names_what_plan_refuses_or_cannot_fit(areas) -> None:
    """A rung over half the widest area's width fits, but plan would refuse it: it
    is not tried. Fewer calls than areas: None at once (each area needs a call whatever the
    tolerance)."""
    from parcelsearch.planning.tiling.covers import tolerance_limit

    wide = 1.5 * tolerance_limit(areas.geometry.to_numpy())
    assert plan(areas, wide, id_column="tract", trust_tolerance=True).min_calls <= 4
    refused = plan(areas, id_column="tract")
    assert refused.min_calls > 4
    assert suggest_tolerance(refused, 4, (wide,)) is None
    assert suggest_tolerance(areas, 4, (wide,), id_column="tract") is None
    assert suggest_tolerance(areas, 3, id_column="tract") is None  # 4 areas
    assert suggest_tolerance(refused, 3) is None


def test_an_empty_file_is_read_as_empty_not_as_gdal_words(tmp_path) -> None:
    from parcelsearch.planning.vector_files import read_vector

    (tmp_path / "areas.gpkg").touch()
    with pytest.raises(InputError, match=r"study areas file '.*areas\.gpkg' is empty \(0 bytes\)"):
        read_vector(tmp_path / "areas.gpkg", what="study areas file")


def test_a_plan_and_its_reprs_load_no_part_of_the_run() -> None:
    # planning stands below the run: the repr's survey size is planning's own (the survey).
    # (parcelsearch first: geopandas first would register gdf.parcels, which loads the run.)
    code = (
        "import sys\nfrom parcelsearch.planning.plans import plan\n"
        "import geopandas as gpd\nfrom shapely import box\n"
        "planned = plan(gpd.GeoDataFrame(geometry=[box(-97.5, 32.7, -97.4, 32.8)], crs=4326))\n"
        "print(repr(planned)[-30:], len(planned._repr_html_()) > 0)\n"
        "print(sorted(m for m in sys.modules if m.startswith('parcelsearch._run')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    shown, loaded = done.stdout.strip().splitlines()
    assert shown.endswith("would price it exactly> True")
    assert loaded == "[]"
