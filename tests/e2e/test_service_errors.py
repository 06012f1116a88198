"""Every error status and message over real HTTPS, hostile inputs, and HTTPS only."""

from __future__ import annotations

import json
import re
import socket
import ssl
from collections.abc import Callable

import _conformance
import pytest
import requests

from parcelsearch._wire import request_line_bytes, ring_json, search_target
from parcelsearch_service.server import RunningService

# Run against `parcelsearch serve --workers 2` on each backend (tests/_conformance.py).
service, service_276 = _conformance.service, _conformance.service_276


OK_RING = ring_json([(-99.74, 32.44), (-99.73, 32.44), (-99.73, 32.45), (-99.74, 32.44)])


def _envelope(response: requests.Response) -> list[str]:
    assert response.headers["content-type"] == "application/json", response.text[:200]
    body = response.json()
    assert list(body) == ["status", "messages"] and body["status"] == "ERROR", body
    return list(body["messages"])


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        pytest.param(
            {}, "Failed to resolve API Key variable request.header.x-api-key", id="missing"
        ),
        pytest.param(
            {"x-api-key": ""},
            "Failed to resolve API Key variable request.header.x-api-key",
            id="empty",
        ),
        pytest.param({"x-api-key": "not-a-key"}, "Invalid ApiKey", id="unknown"),
    ],
)
def test_401_key(
    https: requests.Session, service: RunningService, headers: dict[str, str], message: str
) -> None:
    response = https.get(service.base_url + "/v1/markets", headers=headers)
    assert (response.status_code, _envelope(response)) == (401, [message])


def test_401_key_not_enabled_for_resource(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    key = make_key("production", services=("markets",))
    search = https.get(
        service.base_url + "/v1/search",
        params={"searchPolygon": OK_RING},
        headers={"x-api-key": key},
    )
    assert (search.status_code, _envelope(search)) == (401, ["Invalid ApiKey for given resource"])
    markets = https.get(service.base_url + "/v1/markets", headers={"x-api-key": key})
    assert markets.status_code == 200


def test_401_revoked_key(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    key = make_key("demo")
    assert https.get(service.base_url + "/v1/markets", headers={"x-api-key": key}).ok
    service.keys.revoke(key.name)  # type: ignore[attr-defined]
    response = https.get(service.base_url + "/v1/markets", headers={"x-api-key": key})
    assert (response.status_code, _envelope(response)) == (401, ["Invalid ApiKey"])


@pytest.mark.parametrize("path", ["/", "/v2/search", "/v1/search/", "/prod/v1", "/v1/Markets"])
def test_404_unknown_path(
    https: requests.Session, service: RunningService, api_key: str, path: str
) -> None:
    response = https.get(service.base_url + path, headers={"x-api-key": api_key})
    assert response.status_code == 404
    assert "no such resource" in _envelope(response)[0]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_405_other_methods(
    https: requests.Session, service: RunningService, api_key: str, method: str
) -> None:
    response = https.request(
        method, service.base_url + "/v1/search", headers={"x-api-key": api_key}
    )
    assert response.status_code == 405
    assert "GET" in {m.strip() for m in response.headers["allow"].split(",")}
    assert _envelope(response) == [f"method {method} is not allowed on /v1/search; use GET"]


def _padded_target(total: int) -> str:
    """A markets target whose request line is exactly ``total`` bytes."""
    base = "/v1/markets?pad="
    return base + "x" * (total - request_line_bytes(base))


@pytest.mark.parametrize(("length", "status"), [(7168, 200), (7169, 414)])
def test_414_boundary(
    https: requests.Session, service: RunningService, api_key: str, length: int, status: int
) -> None:
    target = _padded_target(length)
    assert request_line_bytes(target) == length
    response = https.get(service.base_url + target, headers={"x-api-key": api_key})
    assert response.status_code == status


def test_414_is_checked_before_the_key(https: requests.Session, service: RunningService) -> None:
    response = https.get(service.base_url + _padded_target(7169))
    assert (response.status_code, _envelope(response)) == (
        414,
        ["request line size exceeding 7,168"],
    )


def test_414_for_a_100000_point_polygon(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    key = make_key("demo")
    points = [(-99.74 + i * 1e-7, 32.44 + (i % 2) * 1e-4) for i in range(100_000)]
    target = search_target("/v1/search", ring_json([*points, points[0]]), 1)
    assert len(target) > 2_000_000
    response = https.get(service.base_url + target, headers={"x-api-key": key}, timeout=60)
    assert (response.status_code, _envelope(response)) == (
        414,
        ["request line size exceeding 7,168"],
    )
    assert service.keys.get(key.name)["used_lifetime"] == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("polygon", "match"),
    [
        pytest.param(None, "searchPolygon is missing", id="missing"),
        pytest.param("", "searchPolygon is missing", id="empty"),
        pytest.param("[[1,2],", "not valid JSON", id="not-json"),
        pytest.param('{"type":"Polygon"}', "must be a JSON array", id="object"),
        pytest.param("[1,2,3,4]", "wrong nesting", id="flat-numbers"),
        pytest.param("[[[[0,0],[1,0],[1,1],[0,0]]]]", "too many levels", id="multipolygon"),
        pytest.param('[[0,0],[1,"a"],[1,1],[0,0]]', "latitude that is a string", id="string"),
        pytest.param("[[0,0],[1,true],[1,1],[0,0]]", "a boolean", id="boolean"),
        pytest.param("[[0,0],[1,NaN],[1,1],[0,0]]", "not a finite number", id="nan"),
        pytest.param("[[0,0],[1,Infinity],[1,1],[0,0]]", "not a finite number", id="infinity"),
        pytest.param("[[0,0],[1,1e999],[1,1],[0,0]]", "not a finite number", id="overflow"),
        pytest.param(
            "[[0,0],[200,0],[1,1],[0,0]]",
            r"longitude 200 outside \[-180, 180\]",
            id="longitude-range",
        ),
        pytest.param(
            "[[0,0],[1,95],[1,1],[0,0]]", r"latitude 95 outside \[-90, 90\]", id="latitude-range"
        ),
        pytest.param("[[0,0],[1,0,5],[1,1],[0,0]]", "must be a pair", id="three-values"),
        pytest.param(
            "[[0,0],[1,0],[1,1],[0,1]]",
            r"ring is not closed: first point \[0,0\] differs from last point \[0,1\]; "
            "repeat the first point at the end",
            id="unclosed",
        ),
        pytest.param(
            "[[0,0],[1,0],[0,0]]", "has 3 points; a ring needs at least 4", id="three-points"
        ),
        pytest.param("[[0,0],[1,1],[1,0],[0,1],[0,0]]", "self-intersecting", id="bow-tie"),
        pytest.param("[[0,0],[1,1],[2,2],[0,0]]", "encloses no area", id="collinear"),
        pytest.param(
            "[[[0,0],[4,0],[4,4],[0,0]],[[5,5],[6,5],[6,6],[5,5]]]",
            "Hole lies outside shell",
            id="hole-outside",
        ),
        pytest.param("[]", "empty array", id="empty-array"),
    ],
)
def test_400_bad_polygon(
    https: requests.Session,
    service: RunningService,
    make_key: Callable[..., str],
    polygon: str | None,
    match: str,
) -> None:
    key = make_key("demo")
    params = {} if polygon is None else {"searchPolygon": polygon}
    response = https.get(service.base_url + "/v1/search", params=params, headers={"x-api-key": key})
    assert response.status_code == 400
    (message,) = _envelope(response)
    assert message.startswith("searchPolygon")
    assert re.search(match, message), message
    # 400s count toward the quota, as at the vendor's gateway.
    assert service.keys.get(key.name)["used_lifetime"] == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("page", "match"),
    [
        pytest.param("0", "page must be a positive whole number", id="zero"),
        pytest.param("-1", "page must be a positive whole number", id="negative"),
        pytest.param("1.5", "page must be a positive whole number", id="fraction"),
        pytest.param("two", "page must be a positive whole number", id="word"),
        pytest.param("", "page must be a positive whole number", id="empty"),
        pytest.param("9" * 40, "beyond the last page", id="huge"),
    ],
)
def test_400_bad_page(
    https: requests.Session, service: RunningService, api_key: str, page: str, match: str
) -> None:
    response = https.get(
        service.base_url + "/v1/search",
        params={"searchPolygon": OK_RING, "page": page},
        headers={"x-api-key": api_key},
    )
    assert response.status_code == 400
    assert match in _envelope(response)[0]


def test_400_page_beyond_the_last_says_how_many(
    https: requests.Session, service_276: RunningService, example_276: object
) -> None:
    key = service_276.keys.create("beyond-last", "production", quota=10)
    response = https.get(
        service_276.base_url + "/v1/search",
        params={
            "searchPolygon": json.dumps(example_276.ring),  # type: ignore[attr-defined]
            "page": 4,
        },
        headers={"x-api-key": key},
    )
    assert (response.status_code, _envelope(response)) == (
        400,
        [
            "page 4 is beyond the last page: this search has 3 pages (276 rows); ask for a page "
            "from 1 to 3"
        ],
    )


def test_400_page_2_of_an_empty_result(
    https: requests.Session, service: RunningService, api_key: str
) -> None:
    ring = ring_json([(-104.02, 30.30), (-104.01, 30.30), (-104.01, 30.31), (-104.02, 30.30)])
    response = https.get(
        service.base_url + "/v1/search",
        params={"searchPolygon": ring, "page": 2},
        headers={"x-api-key": api_key},
    )
    assert response.status_code == 400
    assert "has no results" in _envelope(response)[0]


def test_400_repeated_parameter(
    https: requests.Session, service: RunningService, api_key: str
) -> None:
    response = https.get(
        service.base_url + "/v1/search",
        params=[("searchPolygon", OK_RING), ("searchPolygon", OK_RING)],
        headers={"x-api-key": api_key},
    )
    assert (response.status_code, _envelope(response)) == (
        400,
        ["searchPolygon is given 2 times; send it once"],
    )


HOSTILE = [
    "%00",
    "%ff%fe",
    "[" * 5000 + "]" * 5000,
    "[[" + ",".join(["1e308"] * 300) + "]]",
    "[[0,0],[1,0],[1,1],[0,0]]" + "x",
    "null",
    "true",
    '"string"',
    "[[null,null]]",
    "[[-0,-0],[1e-320,0],[0,1e-320],[-0,-0]]",
    "[[0,0],[0,0],[0,0],[0,0]]",
    "[[180,90],[-180,90],[-180,-90],[180,90]]",
    "\u202e[[0,0]]",
    "[[0x10,0]]",
]


@pytest.mark.parametrize("polygon", HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_input_is_never_a_500(
    https: requests.Session, service: RunningService, api_key: str, polygon: str
) -> None:
    url = service.base_url + "/v1/search?searchPolygon=" + polygon
    if len(polygon) > 7000:
        url = service.base_url + "/v1/search?searchPolygon=" + requests.utils.quote(polygon[:7000])
    response = https.get(url, headers={"x-api-key": api_key})
    assert response.status_code in (200, 400, 414), response.text
    body = response.json()
    assert body["status"] in ("OK", "ERROR")


def test_whole_world_polygon_answers(
    https: requests.Session, service: RunningService, api_key: str
) -> None:
    ring = "[[-180,-90],[180,-90],[180,90],[-180,90],[-180,-90]]"
    body = https.get(
        service.base_url + "/v1/search",
        params={"searchPolygon": ring},
        headers={"x-api-key": api_key},
    ).json()
    assert body["rows"] == len(service.store)


def test_plain_http_fails(service: RunningService, api_key: str) -> None:
    with pytest.raises(requests.ConnectionError):
        requests.get(
            service.base_url.replace("https://", "http://") + "/v1/markets",
            headers={"x-api-key": api_key},
            timeout=5,
        )


def test_unverified_certificate_is_refused(service: RunningService) -> None:
    with requests.Session() as session:
        session.trust_env = False
        with pytest.raises(requests.exceptions.SSLError):
            session.get(service.base_url + "/v1/markets", timeout=5)


def test_openapi_document(https: requests.Session, service: RunningService) -> None:
    document = https.get(service.base_url + "/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert {"/v1/search", "/v1/markets", "/prod/v1/search", "/prod/v1/markets"} <= set(
        document["paths"]
    )
    assert document["components"]["securitySchemes"]["ApiKey"]["name"] == "x-api-key"


def test_malformed_http_is_answered_in_the_envelope(
    service: RunningService, ca_bundle: str
) -> None:
    context = ssl.create_default_context(cafile=ca_bundle)
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"GET /v1/markets HTTP/1.1\r\nHost: x\r\nbroken header\r\n\r\n")
            reply = b""
            while chunk := tls.recv(65536):
                reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["messages"][0].startswith("malformed HTTP request")
