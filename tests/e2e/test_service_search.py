"""Search and Markets over real HTTPS: bodies, paging, matching, stage prefix."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import _conformance
import pytest
import requests
import shapely

from parcelsearch._wire import ring_json
from parcelsearch_service import synth
from parcelsearch_service.server import RunningService
from parcelsearch_service.store import ParcelStore

# Run against `parcelsearch serve --workers 2` on each backend (tests/_conformance.py).
service, service_276 = _conformance.service, _conformance.service_276


def _get(
    session: requests.Session, svc: RunningService, key: str, path: str, **params: Any
) -> requests.Response:
    return session.get(svc.base_url + path, params=params, headers={"x-api-key": key}, timeout=30)


@pytest.fixture
def key_276(service_276: RunningService, request: pytest.FixtureRequest) -> str:
    return service_276.keys.create(f"{request.node.name}", "production", quota=1000)


def test_paging_276_example(
    https: requests.Session,
    service_276: RunningService,
    key_276: str,
    example_276: synth.Example,
) -> None:
    ring = json.dumps(example_276.ring)
    bodies = [
        _get(https, service_276, key_276, "/v1/search", searchPolygon=ring, page=p).json()
        for p in (1, 2, 3)
    ]
    assert [(b["rows"], b["pages"], b["page"], b["dataRows"]) for b in bodies] == [
        (276, 3, 1, 100),
        (276, 3, 2, 100),
        (276, 3, 3, 76),
    ]
    assert [d for b in bodies for d in b["data"]] == example_276.expected


def test_body_keys_in_vendor_order(
    https: requests.Session,
    service_276: RunningService,
    key_276: str,
    example_276: synth.Example,
) -> None:
    text = _get(
        https,
        service_276,
        key_276,
        "/v1/search",
        searchPolygon=json.dumps(example_276.ring),
        page=3,
    ).text
    assert text.startswith('{"status":"OK","rows":276,"dataRows":76,"pages":3,"page":3,"data":["')


def test_page_defaults_to_1_and_is_stable(
    https: requests.Session,
    service_276: RunningService,
    key_276: str,
    example_276: synth.Example,
) -> None:
    ring = json.dumps(example_276.ring)
    first = _get(https, service_276, key_276, "/v1/search", searchPolygon=ring).json()
    again = _get(https, service_276, key_276, "/v1/search", searchPolygon=ring, page=1).json()
    assert first == again
    assert first["page"] == 1


def test_condominium_group_id_repeats(
    https: requests.Session,
    service_276: RunningService,
    key_276: str,
    example_276: synth.Example,
) -> None:
    data = _get(
        https, service_276, key_276, "/v1/search", searchPolygon=json.dumps(example_276.ring)
    ).json()["data"]
    assert data[10:16] == [data[10]] * 6
    assert len(set(data)) == 100 - 5


def test_vendor_nested_form_gives_the_same_answer(
    https: requests.Session,
    service_276: RunningService,
    key_276: str,
    example_276: synth.Example,
) -> None:
    flat = _get(
        https, service_276, key_276, "/v1/search", searchPolygon=json.dumps(example_276.ring)
    ).json()
    nested = _get(
        https, service_276, key_276, "/v1/search", searchPolygon=json.dumps([example_276.ring])
    ).json()
    assert flat == nested


def test_stage_prefix_answers_the_same(
    https: requests.Session,
    service_276: RunningService,
    key_276: str,
    example_276: synth.Example,
) -> None:
    ring = json.dumps(example_276.ring)
    plain = _get(https, service_276, key_276, "/v1/search", searchPolygon=ring, page=2).json()
    staged = _get(https, service_276, key_276, "/prod/v1/search", searchPolygon=ring, page=2).json()
    assert plain == staged


def test_empty_result_body_exactly(
    https: requests.Session, service: RunningService, api_key: str
) -> None:
    ring = ring_json([(-104.02, 30.30), (-104.01, 30.30), (-104.01, 30.31), (-104.02, 30.30)])
    response = _get(https, service, api_key, "/v1/search", searchPolygon=ring)
    assert response.status_code == 200
    assert response.text == '{"status":"OK","rows":0,"dataRows":0,"pages":0,"page":1,"data":[]}'


def test_markets_body(https: requests.Session, service: RunningService, api_key: str) -> None:
    response = _get(https, service, api_key, "/prod/v1/markets")
    body = response.json()
    assert response.headers["content-type"] == "application/json"
    assert list(body) == ["status", "dataRows", "data"]
    assert body["data"] == sorted(body["data"]) == list(synth.MARKET_NAMES)
    assert body["dataRows"] == len(body["data"])
    assert "Abilene, TX" in body["data"]
    assert "Tarrant County Unincorporated, TX" in body["data"]


def _rings(geometry: shapely.Polygon) -> list[list[list[float]]]:
    return [[list(p) for p in geometry.exterior.coords]] + [
        [list(p) for p in hole.coords] for hole in geometry.interiors
    ]


def test_hole_subtracts(https: requests.Session, service: RunningService, api_key: str) -> None:
    area = synth.demo_areas().set_index("area_id").geometry["park-ring"]
    assert len(area.interiors) == 1
    with_hole = _get(
        https, service, api_key, "/v1/search", searchPolygon=json.dumps(_rings(area))
    ).json()
    shell = _get(
        https, service, api_key, "/v1/search", searchPolygon=json.dumps(_rings(area)[0])
    ).json()
    hole = _get(
        https, service, api_key, "/v1/search", searchPolygon=json.dumps(_rings(area)[1])
    ).json()
    assert with_hole["rows"] == shell["rows"] - hole["rows"]
    assert hole["rows"] > 0


def test_demo_areas_overlap_the_demo_fabric(
    https: requests.Session, service: RunningService, api_key: str
) -> None:
    areas = synth.demo_areas().set_index("area_id")
    rows = {}
    for area_id, geometry in areas.geometry.items():
        parts = list(getattr(geometry, "geoms", [geometry]))
        rows[area_id] = sum(
            _get(
                https, service, api_key, "/v1/search", searchPolygon=json.dumps(_rings(part))
            ).json()["rows"]
            for part in parts
        )
    assert rows["marfa-ranch"] == 0
    assert all(rows[a] > 40 for a in ("northside", "pine-street", "park-ring", "twin-sites"))


def test_point_on_the_boundary_matches(
    https: requests.Session,
    service_276: RunningService,
    key_276: str,
    example_276: synth.Example,
) -> None:
    store = ParcelStore(example_276.parcels)  # the representative points, as served
    x, y = float(store.x[0]), float(store.y[0])
    # A triangle whose corner is exactly parcel 0's representative point.
    ring = [[x, y], [x + 0.00001, y + 0.02], [x - 0.00001, y + 0.02], [x, y]]
    body = _get(https, service_276, key_276, "/v1/search", searchPolygon=json.dumps(ring)).json()
    assert store.group_ids[0] in body["data"]


@pytest.mark.slow
def test_intersects_mode_matches_footprints(
    https: requests.Session,
    spawn_service: Callable[..., Any],
    service: Any,
    example_276: synth.Example,
) -> None:
    svc = spawn_service(service.backend, example_276.parcels, workers=1, match="intersects")
    key = svc.keys.create("intersects", "production", quota=100)
    footprint = example_276.parcels.sort_values("parcel_id").geometry.iloc[30]
    # A sliver inside one lot, well away from its representative point: touches 1 footprint.
    xmin, ymin, xmax, ymax = footprint.bounds
    dx, dy = (xmax - xmin) / 20, (ymax - ymin) / 20
    ring = [
        [xmin + dx, ymin + dy],
        [xmin + 3 * dx, ymin + dy],
        [xmin + 3 * dx, ymin + 3 * dy],
        [xmin + dx, ymin + dy],
    ]
    body = _get(https, svc, key, "/v1/search", searchPolygon=json.dumps(ring)).json()
    assert (body["rows"], body["data"]) == (1, [example_276.expected[30]])
    # The same ring finds nothing under representative-point matching.
    svc_rp = spawn_service(service.backend, example_276.parcels, workers=1)
    key_rp = svc_rp.keys.create("rp", "production", quota=100)
    assert (
        _get(https, svc_rp, key_rp, "/v1/search", searchPolygon=json.dumps(ring)).json()["rows"]
        == 0
    )
