"""Study areas: validation, reprojection, repair and antimeridian splitting."""

from __future__ import annotations

import math

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from shapely import LineString, MultiPolygon, Point, Polygon, box

from parcelsearch.errors import InputError
from parcelsearch.planning.areas import GeometryRepairedWarning, validate_areas

SQUARE = box(-97.5, 32.7, -97.4, 32.8)
BOWTIE = Polygon([(-97.5, 32.7), (-97.4, 32.8), (-97.4, 32.7), (-97.5, 32.8)])


def _nan_polygon() -> Polygon:
    with np.errstate(invalid="ignore"):
        return Polygon([(0, 0), (1, math.nan), (1, 1)])


def frame(*geoms: object, crs: object = "EPSG:4326", **columns: list[object]) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(columns or None, geometry=list(geoms), crs=crs)


@pytest.mark.parametrize(
    ("areas", "kwargs", "match", "row", "field"),
    [
        pytest.param(
            frame(SQUARE, crs=None), {}, r"no CRS.*set_crs", None, "geometry", id="no-crs"
        ),
        pytest.param(
            gpd.GeoSeries([SQUARE]),
            {},
            r"GeoSeries has no CRS.*set_crs",
            None,
            "geometry",
            id="series-no-crs",
        ),
        pytest.param(frame(crs="EPSG:4326"), {}, r"no study areas", None, None, id="no-rows"),
        pytest.param(
            frame(SQUARE, None), {}, r"area 1: geometry is missing", 1, "geometry", id="missing"
        ),
        pytest.param(frame(Polygon()), {}, r"area 0: geometry is empty", 0, "geometry", id="empty"),
        pytest.param(
            frame(SQUARE, Point(-97.4, 32.7)),
            {},
            r"area 1: geometry is a Point.*buffer",
            1,
            "geometry",
            id="point",
        ),
        pytest.param(
            frame(LineString([(0, 0), (1, 1)])),
            {},
            r"area 0: geometry is a LineString",
            0,
            "geometry",
            id="line",
        ),
        pytest.param(
            frame(shapely.GeometryCollection([SQUARE])),
            {},
            r"GeometryCollection.*polygons",
            0,
            "geometry",
            id="collection",
        ),
        pytest.param(
            frame(_nan_polygon()),
            {},
            r"area 0: .*non-finite",
            0,
            "geometry",
            id="nan",
        ),
        pytest.param(
            frame(box(0, 80, 1, 95)),
            {},
            r"area 0: geometry has latitudes beyond ±90° .*swap them",
            0,
            "geometry",
            id="latitude",
        ),
        pytest.param(
            frame(box(120, 80, 121, 95)),
            {},
            r"area 0: geometry has latitudes beyond ±90° \(x 120\.\.121, y 80\.\.95\); "
            r"latitudes must lie within -90\.\.90; fix or drop the points beyond$",
            0,
            "geometry",
            id="latitude-not-swapped",
        ),
        pytest.param(
            frame(box(-200, 10, 190, 11)),
            {},
            r"area 0: geometry has a part spanning 390° of longitude",
            0,
            "geometry",
            id="wider-than-the-globe",
        ),
        pytest.param(
            frame(box(500_000, 4_000_000, 501_000, 4_001_000)),
            {},
            r"far beyond longitude/latitude.*projected.*"
            r"set_crs\(<EPSG code>, allow_override=True\)",
            0,
            "geometry",
            id="projected-as-lonlat",
        ),
        pytest.param(
            frame(SQUARE, SQUARE, name=["a", "a"]),
            {"id_column": "name"},
            r"unique; duplicated in 'name': 'a'",
            "a",
            "name",
            id="duplicate-ids",
        ),
        pytest.param(
            frame(SQUARE).set_axis(["x"]).pipe(lambda f: pd.concat([f, f])),
            {},
            r"duplicated in 'index': 'x'",
            "x",
            "index",
            id="duplicate-index",
        ),
        pytest.param(
            frame(SQUARE, name=["a"]),
            {"id_column": "nom"},
            r"'nom' is not in the areas.*'name'",
            None,
            "nom",
            id="unknown-id-column",
        ),
        pytest.param(
            frame(SQUARE, SQUARE, name=["a", None]),
            {"id_column": "name"},
            r"have no id.*positions \[1\]",
            1,
            "name",
            id="null-id",
        ),
        pytest.param(
            [SQUARE, "POLYGON"],
            {},
            r"area 1: expected a shapely geometry",
            1,
            "geometry",
            id="not-geometry",
        ),
        pytest.param("areas.gpkg", {}, r"geopandas.read_file", None, None, id="path"),
    ],
)
def test_bad_areas_name_row_and_field(areas, kwargs, match, row, field):
    with pytest.raises(InputError, match=match) as caught:
        validate_areas(areas, **kwargs)
    assert caught.value.row == row
    assert caught.value.field == field


def test_collapsed_ring_is_refused_after_repair_warning():
    with pytest.warns(GeometryRepairedWarning, match="area 'z'"):
        with pytest.raises(InputError, match=r"area 'z': geometry has no area") as caught:
            validate_areas(frame(Polygon([(0, 0), (1, 1), (0, 0)]), name=["z"]), id_column="name")
    assert caught.value.row == "z"


def test_invalid_geometry_is_repaired_with_a_warning_naming_the_row():
    with pytest.warns(
        GeometryRepairedWarning, match=r"area 'b': its geometry was invalid \(Self-intersection"
    ):
        out = validate_areas(frame(SQUARE, BOWTIE, name=["a", "b"]), id_column="name")
    assert out.loc["b", "geometry"].is_valid
    assert out.loc["b", "geometry"].area == pytest.approx(
        BOWTIE.buffer(0).area + BOWTIE.buffer(0).area, rel=0.5
    )
    assert out.geom_type.tolist() == ["Polygon", "MultiPolygon"]


def test_ids_come_from_the_column_else_the_index():
    by_column = validate_areas(frame(SQUARE, name=["a"], kind=["lake"]), id_column="name")
    assert by_column.index.tolist() == ["a"]
    assert by_column.index.name == "name"
    assert by_column["kind"].tolist() == ["lake"]  # other columns are kept
    named_index = frame(SQUARE).rename_axis("tract")
    assert validate_areas(named_index).index.name == "tract"
    assert validate_areas(SQUARE).index.name == "area_id"


def test_reprojects_to_lonlat():
    utm = gpd.GeoSeries([SQUARE], crs="EPSG:4326").to_crs("EPSG:32614")
    out = validate_areas(gpd.GeoDataFrame(geometry=utm))
    assert out.crs.to_epsg() == 4326
    assert shapely.symmetric_difference(out.geometry.iloc[0], SQUARE).area < 1e-6 * SQUARE.area


def test_z_is_dropped():
    out = validate_areas([Polygon([(0, 0, 5), (1, 0, 5), (1, 1, 5)])])
    assert not out.geometry.iloc[0].has_z


@pytest.mark.parametrize(
    "ring",
    [
        pytest.param([(179.5, 10), (-179.5, 10), (-179.5, 11), (179.5, 11)], id="jumping-edges"),
        pytest.param([(179.5, 10), (180.5, 10), (180.5, 11), (179.5, 11)], id="beyond-180"),
        pytest.param(
            [(-180.5, 10), (-179.5, 10), (-179.5, 11), (-180.5, 11)], id="beyond-minus-180"
        ),
    ],
)
def test_antimeridian_crossings_are_split(ring):
    out = validate_areas([Polygon(ring)]).geometry.iloc[0]
    assert isinstance(out, MultiPolygon)
    assert out.bounds == (-180, 10, 180, 11)
    east, west = sorted(out.geoms, key=lambda p: -p.bounds[0])
    assert east.bounds == (179.5, 10, 180, 11)
    assert west.bounds == (-180, 10, -179.5, 11)
    assert out.area == pytest.approx(1.0)


def test_antimeridian_hole_stays_a_hole():
    shell = [(179, 10), (-179, 10), (-179, 12), (179, 12)]
    hole = [(179.8, 10.5), (-179.8, 10.5), (-179.8, 11.5), (179.8, 11.5)]
    out = validate_areas([Polygon(shell, [hole])]).geometry.iloc[0]
    assert out.area == pytest.approx(4 - 0.4)
    assert not out.covers(Point(179.9, 11)) and not out.covers(Point(-179.9, 11))


def test_ring_round_a_pole_is_refused():
    lons = np.linspace(-180, 180, 13)[:-1]
    ring = [(x, 80) for x in lons]
    with pytest.raises(InputError, match=r"area 0: .*encircles a pole"):
        validate_areas([Polygon(ring)])


def test_parts_already_split_at_the_antimeridian_are_kept_as_they_are():
    """Natural Earth's Fiji and Russia: parts on both sides of ±180°, none crossing it."""
    east = Polygon([(178.5, -17), (180, -17), (180, -16), (178.5, -16)])
    west = Polygon([(-180, -17), (-179.5, -17), (-179.5, -16), (-180, -16)])
    fiji = MultiPolygon([east, west])
    out = validate_areas([fiji]).geometry.iloc[0]
    assert out.equals(fiji)
    assert out.bounds == (-180, -17, 180, -16)


# -- which column names the areas ---------------------------------------------------------


def test_the_id_rule_area_id_column_then_own_index_then_row_numbers() -> None:
    """``id_column`` wins; else ``area_id``; else an index of the user's own; else rows."""
    three = frame(SQUARE, SQUARE, SQUARE, area_id=["a", "b", "c"], code=["x", "y", "z"])
    assert list(validate_areas(three).index) == ["a", "b", "c"]
    assert list(validate_areas(three, id_column="code").index) == ["x", "y", "z"]
    # rows left after filtering keep the area_id column as their ids
    assert list(validate_areas(three.iloc[[2, 0]]).index) == ["c", "a"]
    named = three.drop(columns="area_id").set_index("code")
    assert list(validate_areas(named).index) == ["x", "y", "z"]
    assert validate_areas(named).index.name == "code"
    # a bare list or a frame with nothing but geometry has only its rows: no warning
    assert list(validate_areas([SQUARE, SQUARE]).index) == [0, 1]


def test_an_area_id_column_beside_a_different_index_of_ones_own_is_ambiguous() -> None:
    three = frame(SQUARE, SQUARE, SQUARE, area_id=["a", "b", "c"], code=["x", "y", "z"])
    with pytest.raises(InputError, match="not clear which") as caught:
        validate_areas(three.set_index("code"))
    assert caught.value.field == "id_column"
    assert "id_column='area_id'" in str(caught.value)


# -- coordinates implausible for their CRS: refused before anything is planned (issue 49) --


@pytest.mark.parametrize("crs", ["EPSG:3857", "EPSG:2227", "EPSG:32614"])
def test_degrees_declared_in_a_projected_crs_are_refused_naming_the_override(crs) -> None:
    """Longitude/latitude declared as metres (or feet) would be areas a few hundred metres
    wide off Africa: refused, saying so, with --crs EPSG:4326 and the override named."""
    areas = frame(SQUARE, box(-97.3, 32.7, -97.2, 32.8), crs=crs, area_id=["a", "b"])
    with pytest.raises(InputError) as caught:
        validate_areas(areas)
    error = caught.value
    assert (error.row, error.field) == ("a", "crs")
    text = str(error)
    assert "areas 'a', 'b': every coordinate lies within ±180, ±90" in text
    assert "looks like longitude/latitude in degrees" in text and crs in text
    assert "set_crs('EPSG:4326', allow_override=True)" in text
    assert "pass trust_crs=True" in text
    cli = error.render("cli")
    assert "declare --crs EPSG:4326" in cli and "pass --trust-crs" in cli
    if crs == "EPSG:3857":  # the world's: trusted, the areas are taken as they are
        trusted = validate_areas(areas, trust_crs=True)
        assert trusted.total_bounds.max() < 0.01  # metres near 0, 0


def test_projected_coordinates_beyond_degrees_are_taken() -> None:
    """One coordinate beyond ±180/±90 and the degrees check stays quiet (real projected
    data); so near 0, 0 the area is out at sea, which the land check says instead."""
    areas = frame(box(100, 80, 250, 89), crs="EPSG:3857")
    with pytest.raises(InputError, match="from the nearest land") as got:
        validate_areas(areas)
    assert "looks like longitude/latitude" not in str(got.value)
    assert len(validate_areas(areas, trust_crs=True)) == 1
    inland = frame(box(-11_600_000, 4_400_000, -11_599_750, 4_400_009), crs="EPSG:3857")
    assert len(validate_areas(inland)) == 1


def test_areas_outside_their_crs_area_of_use_are_refused_or_warned_when_trusted() -> None:
    """A local grid declared in UTM zone 14 lies west of the zone: refused for free;
    trusted, a warning says the same."""
    from parcelsearch.notices import CoordinatesWarning

    local = frame(box(100, 100, 600, 600), crs="EPSG:32614")
    with pytest.raises(
        InputError,
        match=r"outside the area EPSG:32614 is meant for "
        r"\(longitude -102\.\.-96.*nothing was planned",
    ) as got:
        validate_areas(local)
    assert got.value.field == "crs" and "pass --trust-crs" in got.value.render("cli")
    with pytest.warns(CoordinatesWarning, match="probably in another CRS"):
        validate_areas(local, trust_crs=True)
    inside = frame(box(500_000, 3_600_000, 501_000, 3_601_000), crs="EPSG:32614")
    assert len(validate_areas(inside)) == 1  # in the zone: no word
