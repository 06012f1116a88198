"""The bundled population layer (issue 61): GeoNames places as points, summed inside the
survey's pieces (:mod:`parcelsearch.planning.population`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import shapely
from shapely import box

from parcelsearch._shared import data_path
from parcelsearch.planning import population

TRACTS = Path(__file__).resolve().parent / "data" / "sf_tracts_2020.geojson"


def test_the_layer_is_a_compact_sorted_point_table_of_places_with_people() -> None:
    path = data_path("population.parquet")
    assert path.stat().st_size < 3_000_000  # "a few MB at most", shipped in the wheel
    table = pq.read_table(path)
    assert table.column_names == ["lon", "lat", "population"]
    places = population.layer()
    assert 100_000 < len(places.lon) == table.num_rows < 200_000
    assert np.all(np.diff(places.lon) >= 0)  # sorted: a piece's places by two bisections
    assert places.population.min() >= 1 and places.population.sum() > 3e9  # the world's towns
    assert (-180 <= places.lon.min()) and places.lon.max() <= 180
    assert (-90 <= places.lat.min()) and places.lat.max() <= 90


def test_people_are_summed_inside_each_piece() -> None:
    """A piece's people are those of the places inside it, nothing from its neighbours; a
    piece at sea or in an empty place has none; a piece holding two others holds both."""
    places = population.layer()
    city = box(-122.52, 37.70, -122.35, 37.83)  # San Francisco
    west, east = box(-122.52, 37.70, -122.435, 37.83), box(-122.435, 37.70, -122.35, 37.83)
    sea = box(-140.0, 0.0, -139.9, 0.1)
    sums = population.people_in([city, sea, west, east])
    inside = shapely.intersects_xy(city, places.lon, places.lat)
    assert sums[0] == places.population[inside].sum() > 500_000
    assert sums[1] == 0
    assert sums[2] + sums[3] >= sums[0] and min(sums[2], sums[3]) < sums[0]
    assert len(population.people_in([])) == 0


def test_a_multipolygon_and_a_polygon_with_a_hole_count_what_they_cover() -> None:
    places = population.layer()
    first = int(np.argmax(places.population))  # the largest place
    x, y = places.lon[first], places.lat[first]
    around = box(x - 0.01, y - 0.01, x + 0.01, y + 0.01)
    holed = shapely.Polygon(
        box(x - 0.5, y - 0.5, x + 0.5, y + 0.5).exterior.coords, [around.exterior.coords]
    )
    both = shapely.MultiPolygon([around, box(x + 2, y + 2, x + 2.1, y + 2.1)])
    with_hole, multi, plain = population.people_in([holed, both, around])
    assert multi >= plain >= places.population[first]
    assert with_hole < population.people_in([box(x - 0.5, y - 0.5, x + 0.5, y + 0.5)])[0]


def test_the_city_tracts_and_the_pieces_of_a_plan_get_their_people() -> None:
    import geopandas as gpd

    import parcelsearch

    tracts = gpd.read_file(TRACTS)
    pieces = [p.geometry for p in parcelsearch.plan(tracts, id_column="tract").pieces]
    people = population.people_in(pieces)
    assert people.shape == (len(pieces),) and np.all(people >= 0)
