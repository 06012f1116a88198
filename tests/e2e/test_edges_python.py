"""Issue 22 through the public Python API: ids kept, refusals written, notices given.

Each test drives the real reference service over HTTPS; calls are counted on its side.
"""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import pytest

import parcelsearch
from parcelsearch.errors import InputError
from parcelsearch.notices import NothingMatchedWarning, RowNumberIdsWarning


@pytest.fixture
def areas_gpkg(tmp_path: Path) -> Path:
    path = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(path)
    return path


def test_a_file_read_as_is_keeps_its_area_ids(make_client, areas_gpkg) -> None:
    """``gpd.read_file(...).parcels.search(...)`` labels areas by their ``area_id`` column."""
    result = gpd.read_file(areas_gpkg).parcels.search(client=make_client(), progress=False)
    names = set(parcelsearch.demo_areas()["area_id"])
    assert set(result.ids["area_id"]) == names - {"marfa-ranch"}  # no parcels out there
    assert set(result.summary().index) == names
    assert result.metadata["areas"] == list(parcelsearch.demo_areas()["area_id"])


def test_an_index_and_a_different_area_id_column_are_refused_as_ambiguous(areas_gpkg) -> None:
    areas = gpd.read_file(areas_gpkg).set_index("name")
    with pytest.raises(InputError, match="not clear which identifies them") as caught:
        areas.parcels.plan()
    assert "pass id_column='area_id'" in str(caught.value)
    assert caught.value.render("cli").count("--id-column area_id") == 1
    # the same values in both are not ambiguous
    same = gpd.read_file(areas_gpkg).set_index("area_id", drop=False)
    assert list(same.parcels.plan().areas.index) == list(same["area_id"])


def test_row_numbers_as_ids_warn_at_the_callers_line(areas_gpkg) -> None:
    areas = gpd.read_file(areas_gpkg).rename(columns={"area_id": "code"})
    with pytest.warns(RowNumberIdsWarning, match=r"row numbers \(0 to 4\).*id_column=") as got:
        plan = parcelsearch.plan(areas)
    assert got[0].filename == __file__  # the user's line, not one inside parcelsearch
    assert list(plan.areas.index) == [0, 1, 2, 3, 4]
    assert list(parcelsearch.plan(areas, id_column="code").areas.index) == list(areas["code"])


def test_a_refusal_before_spending_carries_an_empty_incomplete_result(make_client, service) -> None:
    client = make_client()
    areas = parcelsearch.demo_areas()
    with pytest.raises(parcelsearch.QuotaWouldExceedError) as caught:
        parcelsearch.search(areas, client=client, budget=2, progress=False)
    result = caught.value.result
    assert isinstance(result, parcelsearch.SearchResult)
    assert result.calls == 0 and not result.complete and result.ids.empty
    assert result.metadata["areas_complete"] == []
    assert len(service.keys.requests(client.key_name)) == 0


def test_a_search_that_matched_nothing_warns_and_says_so(make_client) -> None:
    from shapely import box

    far = gpd.GeoDataFrame(
        {"area_id": ["montana"]}, geometry=[box(-110, 47, -109.99, 47.01)], crs="EPSG:4326"
    )  # on land (at sea is refused), far from parcels
    with pytest.warns(NothingMatchedWarning, match=r"no parcel matched any of the 1 area") as got:
        result = parcelsearch.search(far, client=make_client(), progress=False)
    assert got[0].filename == __file__
    assert "areas.set_crs(<EPSG code>, allow_override=True)" in str(got[0].message)
    assert result.nothing_matched and result.calls == 1
    assert not parcelsearch.search(
        parcelsearch.demo_areas().iloc[:1], client=make_client(), progress=False
    ).nothing_matched


def test_a_refused_connection_is_not_counted_as_a_call(tmp_path, ca_bundle) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = parcelsearch.Client(
        api_key="k" * 20,
        base_url=f"https://127.0.0.1:{port}",
        ca_bundle=ca_bundle,
        cache_dir=tmp_path / "cache",
    )
    with pytest.raises(parcelsearch.TransportError, match="nothing is listening"):
        parcelsearch.search(parcelsearch.demo_areas().iloc[:1], client=client, progress=False)
    from parcelsearch.stores.local.ledger import Ledger

    used = Ledger.in_folder(tmp_path / "cache").usage_by_key()
    assert all(u.lifetime == 0 for u in used.values()), used
