"""Areas crossing ±180° from real data plan and search end to end with exact ids.

The areas are Natural Earth's Fiji and Russia (1:110m, public domain), as the
``naturalearth_lowres`` file that geopandas bundled before 1.0 carries them: multipart,
with parts on both sides of the antimeridian, split there by the data itself (one of
Russia's longitudes is 180.00000000000006). Parcels are laid on both sides of ±180°,
and every parcel whose representative point lies inside must be found, none outside.
"""

from __future__ import annotations

import math
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest
import shapely

import parcelsearch
from parcelsearch.planning.tiling import GRID
from parcelsearch_service import synth
from parcelsearch_service.server import RunningService, start_service

DATA = Path(__file__).parents[1] / "data" / "naturalearth_fiji_russia.geojson"
#: Windows round the antimeridian where parcels are laid: (lon0, lon1, lat0, lat1, count).
WINDOWS = [
    (178.3, 180.0, -17.2, -15.9, 1_500),  # Fiji, east of 180
    (-180.0, -179.6, -17.2, -15.9, 600),  # Fiji, west of 180
    (178.5, 180.0, 70.6, 71.7, 900),  # Wrangel Island, east
    (-180.0, -177.3, 70.6, 71.7, 900),  # Wrangel Island, west
    (-180.0, -169.5, 64.0, 69.2, 2_500),  # Chukotka, west of 180
    (176.0, 180.0, 62.0, 69.0, 1_500),  # Chukotka, east of 180
]
_HALF = 2e-6  # half the side of a parcel footprint, in degrees


@pytest.fixture(scope="module")
def areas() -> gpd.GeoDataFrame:
    return gpd.read_file(DATA).set_index("name")[["geometry"]]


def _parcels(areas: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """Tiny square parcels at random points round ±180°, none within 3 grid steps outside
    an area's boundary (where a rounded ring may legitimately reach)."""
    rng = np.random.default_rng(180)
    xy = np.concatenate(
        [
            np.column_stack([rng.uniform(x0 + _HALF, x1 - _HALF, n), rng.uniform(y0, y1, n)])
            for x0, x1, y0, y1, n in WINDOWS
        ]
    )
    union = shapely.union_all(areas.geometry.to_numpy())
    inside = shapely.contains_xy(union, xy[:, 0], xy[:, 1])
    near = shapely.dwithin(union.boundary, shapely.points(xy), 3 * GRID)
    xy = xy[inside | ~near]
    squares = shapely.box(xy[:, 0] - _HALF, xy[:, 1] - _HALF, xy[:, 0] + _HALF, xy[:, 1] + _HALF)
    return gpd.GeoDataFrame(
        {"parcel_id": np.arange(len(xy)), "group_id": synth.group_ids(len(xy), rng)},
        geometry=squares,
        crs="EPSG:4326",
    )


@pytest.fixture(scope="module")
def antimeridian_service(
    areas: gpd.GeoDataFrame, tmp_path_factory: pytest.TempPathFactory, service_cert_dir: Path
):
    root = tmp_path_factory.mktemp("antimeridian")
    with start_service(
        parcels=_parcels(areas), keys=root / "keys.sqlite", cert_dir=service_cert_dir
    ) as svc:
        yield svc


def _inside(service: RunningService, geom: shapely.Geometry) -> set[str]:
    store = service.store
    return set(store.group_ids[shapely.intersects_xy(geom, store.x, store.y)])


def test_natural_earth_areas_across_180_plan_without_complaint(areas):
    planned = parcelsearch.plan(areas)
    assert set(planned.summary()["pieces"].index) == {"Fiji", "Russia"}
    for piece in planned.pieces:
        xy = shapely.get_coordinates(piece.geometry)
        assert (np.abs(xy[:, 0]) <= 180).all() and (np.abs(xy[:, 1]) <= 90).all()
    east_and_west = {
        area: {np.sign(p.geometry.centroid.x) for p in planned.pieces if p.area_id == area}
        for area in ("Fiji", "Russia")
    }
    assert east_and_west == {"Fiji": {-1, 1}, "Russia": {-1, 1}}


@pytest.mark.slow
@pytest.mark.parametrize("tolerance", [0.0, 5.0])
def test_fiji_and_russia_search_end_to_end_with_exact_ids(
    areas, antimeridian_service, ca_bundle, tmp_path, tolerance
):
    key = antimeridian_service.keys.create(
        f"antimeridian-{tolerance:g}", key_type="production", quota=100_000
    )
    client = parcelsearch.Client(
        api_key=key,
        base_url=antimeridian_service.base_url,
        ca_bundle=ca_bundle,
        cache_dir=tmp_path / "cache",
    )
    result = parcelsearch.search(areas, client=client, tolerance=tolerance, progress=False)
    for name, geom in areas.geometry.items():
        got = set(result.ids.loc[result.ids[result.ids.columns[0]] == name, "group_id"])
        inside = _inside(antimeridian_service, geom)
        assert len(inside) > 300, name
        if tolerance == 0:
            assert got == inside, name  # no parcel was laid within 3 grid steps outside
        else:
            assert inside <= got, name
            reach = tolerance / (111_320 * math.cos(math.radians(72)))  # degrees, generous
            assert got <= _inside(antimeridian_service, geom.buffer(reach)), name
    log = antimeridian_service.keys.requests(f"antimeridian-{tolerance:g}")
    assert (log["status"] == 200).all()  # no piece was refused
    assert len(log) == result.calls  # spike-arrest 429s are neither logged nor calls
