"""Hostile inputs to the service: schemathesis against its own OpenAPI document, plus
hand-written cases. Every answer is 400/401/414 in the JSON envelope — never a 5xx, never a
hang (every request has a timeout; raw-socket cases too).
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections import Counter
from typing import Any
from urllib.parse import quote

import _conformance
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from parcelsearch.settings import MAX_REQUEST_LINE_BYTES
from parcelsearch_service.app import MISSING_KEY

# Run against `parcelsearch serve --workers 2` on each backend (tests/_conformance.py).
service, service_276 = _conformance.service, _conformance.service_276


TIMEOUT = 20  # seconds; a hang fails the test
RING = "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]"


@pytest.fixture
def hostile_key(make_key: Any) -> Any:
    """A key that neither rate nor quota will stop: what is tested is the parsing."""
    return make_key("production", per_second=100_000, quota=1_000_000)


def _assert_envelope(response: Any, allowed: set[int]) -> None:
    assert response.status_code < 500, response.text[:300]
    assert response.status_code in allowed, (response.status_code, response.text[:300])
    if response.status_code != 200:
        body = response.json()
        assert body["status"] == "ERROR" and body["messages"], body


OPERATIONS = ["/v1/search", "/prod/v1/search", "/v1/markets", "/prod/v1/markets"]
EXAMPLES = 40  # per operation and mode


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["positive", "negative"]
)
@pytest.mark.parametrize("path", OPERATIONS)
def test_schemathesis_never_5xx(
    path: str,
    mode: GenerationMode,
    service: Any,
    https: requests.Session,
    hostile_key: Any,
    ca_bundle: str,
    figures: Any,
) -> None:
    """Cases generated from the running service's own /openapi.json (schemathesis 4)."""
    document = https.get(service.base_url + "/openapi.json", timeout=TIMEOUT)
    assert document.status_code == 200
    schema = schemathesis.openapi.from_dict(document.json())
    strategy = schema[path]["GET"].as_strategy(generation_mode=mode)
    statuses: Counter[int] = Counter()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(
            base_url=service.base_url,
            session=https,
            headers={"x-api-key": hostile_key},
            timeout=TIMEOUT,
            verify=ca_bundle,
        )
        _assert_envelope(response, {200, 400, 401, 414})
        if mode is GenerationMode.POSITIVE:
            # Every check but "schema-valid data is accepted": a string is schema-valid, a
            # polygon is a narrower thing no schema can state (the 400 says how to fix it).
            case.validate_response(
                response,
                headers={"x-api-key": hostile_key},
                transport_kwargs={"verify": ca_bundle, "timeout": TIMEOUT},
                excluded_checks=[positive_data_acceptance],
            )
        statuses[response.status_code] += 1

    run()
    assert sum(statuses.values()) >= 5
    figures.add("inputs tried", f"schemathesis {mode.value} GET {path}", sum(statuses.values()))


# -- hand-written cases --------------------------------------------------------------------

DEEP = "[" * 1150 + "]" * 1150  # past json's recursion limit, within 7,168 bytes
HUNDRED_K = "[" + ",".join(f"[{-99.74 + i * 1e-7:.7f},32.44]" for i in range(100_000)) + "]"
BAD_POLYGONS = [
    pytest.param("[[NaN,32.44],[-99.73,32.44],[-99.73,32.45],[NaN,32.44]]", 400, id="nan"),
    pytest.param(
        "[[Infinity,32.44],[-99.73,32.44],[-99.73,32.45],[Infinity,32.44]]", 400, id="infinity"
    ),
    pytest.param("[[-Infinity,1],[2,3],[4,5],[-Infinity,1]]", 400, id="minus-infinity"),
    pytest.param("[[1e308,32.44],[-99.73,32.44],[-99.73,32.45],[1e308,32.44]]", 400, id="1e308"),
    pytest.param("[[1e309,32.44],[-99.73,32.44],[-99.73,32.45],[1e309,32.44]]", 400, id="1e309"),
    pytest.param(
        "[[1e-400,1e-400],[2e-400,1e-400],[2e-400,2e-400],[1e-400,1e-400]]",
        400,
        id="underflow-to-one-point",
    ),
    pytest.param("[[" + "9" * 5000 + ",1],[2,3],[4,5],[1,1]]", 400, id="5000-digit-number"),
    pytest.param(DEEP, 400, id="deep-nesting-1150"),
    pytest.param("[" * 20 + "]" * 20, 400, id="nesting-20"),
    pytest.param(HUNDRED_K, 414, id="100000-points"),
    pytest.param("", 400, id="empty-string"),
    pytest.param("   ", 400, id="blank"),
    pytest.param("[]", 400, id="empty-array"),
    pytest.param("[[]]", 400, id="empty-ring"),
    pytest.param("{}", 400, id="object"),
    pytest.param('"[[1,2]]"', 400, id="json-string"),
    pytest.param("null", 400, id="null"),
    pytest.param("true", 400, id="true"),
    pytest.param("[[-99.74,32.44],[-99.73,32.44]]", 400, id="two-points"),
    pytest.param("[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.7,32.4]]", 400, id="unclosed"),
    pytest.param("[[0,0],[1,1],[1,0],[0,1],[0,0]]", 400, id="bow-tie"),
    pytest.param("[[0,0],[1,1],[2,2],[0,0]]", 400, id="collinear"),
    pytest.param("[[0,0],[0,0],[0,0],[0,0]]", 400, id="one-point-repeated"),
    pytest.param(
        "[[-99.74,32.44,5],[-99.73,32.44,5],[-99.73,32.45,5],[-99.74,32.44,5]]", 400, id="3d-points"
    ),
    pytest.param(
        '[["-99.74","32.44"],["-99.73","32.44"],["-99.73","32.45"],["-99.74","32.44"]]',
        400,
        id="strings-as-numbers",
    ),
    pytest.param("[[true,false],[1,2],[3,4],[true,false]]", 400, id="booleans"),
    pytest.param("[[[[0,0],[1,0],[1,1],[0,0]]]]", 400, id="multipolygon-nesting"),
    pytest.param(
        "[[[0,0],[1,0],[1,1],[0,0]],[[5,5],[6,5],[6,6],[5,5]]]", 400, id="hole-outside-shell"
    ),
    pytest.param("[[٣,1],[2,3],[4,5],[٣,1]]", 400, id="arabic-indic-digits"),
    pytest.param("[[１,1],[2,3],[4,5],[１,1]]", 400, id="fullwidth-digits"),
    pytest.param("[[0,0],[1,0],[1,1],[0,0]]\u202e", 400, id="rtl-override-trailer"),
    pytest.param("\ufeff[[0,0],[1,0],[1,1],[0,0]]", 400, id="bom"),
    pytest.param("[[0,0],[1,0],[1,1],[0,0]]\x00", 400, id="nul-byte"),
    pytest.param("[[0,0],[1,0],[1,1],[0,0]] [1]", 400, id="trailing-json"),
    pytest.param("[[200,0],[201,0],[201,1],[200,0]]", 400, id="longitude-out-of-range"),
    pytest.param("[[0,95],[1,95],[1,96],[0,95]]", 400, id="latitude-out-of-range"),
    pytest.param("😀" * 500, 400, id="emoji"),
]


def _get(https: requests.Session, url: str, key: str, **kwargs: Any) -> requests.Response:
    return https.get(url, headers={"x-api-key": key}, timeout=TIMEOUT, **kwargs)


@pytest.mark.parametrize("polygon, status", BAD_POLYGONS)
def test_hostile_search_polygon(
    polygon: str,
    status: int,
    service: Any,
    https: requests.Session,
    hostile_key: Any,
    figures: Any,
) -> None:
    started = time.monotonic()
    response = _get(
        https, service.base_url + "/v1/search", hostile_key, params={"searchPolygon": polygon}
    )
    assert time.monotonic() - started < TIMEOUT
    _assert_envelope(response, {status})
    figures.add("inputs tried", "hand-written searchPolygon")


BAD_QUERIES = [
    pytest.param(f"searchPolygon={RING}&searchPolygon={RING}", 400, id="repeated-polygon"),
    pytest.param(f"searchPolygon={RING}&page=1&page=2", 400, id="repeated-page"),
    pytest.param(f"searchPolygon={RING}&page=", 400, id="empty-page"),
    pytest.param(f"searchPolygon={RING}&page=0", 400, id="page-0"),
    pytest.param(f"searchPolygon={RING}&page=-1", 400, id="page-negative"),
    pytest.param(f"searchPolygon={RING}&page=1.5", 400, id="page-fraction"),
    pytest.param(f"searchPolygon={RING}&page=1e3", 400, id="page-exponent"),
    pytest.param(f"searchPolygon={RING}&page=NaN", 400, id="page-nan"),
    pytest.param(f"searchPolygon={RING}&page=" + "9" * 400, 400, id="page-huge"),
    pytest.param(f"searchPolygon={RING}&page=%EF%BC%91", 400, id="page-fullwidth-1"),
    pytest.param(f"searchPolygon={RING}&page=%D9%A3", 400, id="page-arabic-3"),
    pytest.param(f"searchPolygon={RING}&page=99", 400, id="page-beyond-last"),
    pytest.param("page=1", 400, id="no-polygon"),
    pytest.param("searchPolygon", 400, id="polygon-without-value"),
    pytest.param("searchPolygon=%ZZ%5B", 400, id="bad-percent-encoding"),
    pytest.param("searchPolygon=%C0%AF%FF%FE", 400, id="invalid-utf8"),
    pytest.param("searchPolygon=" + "%5B" * 2000, 400, id="percent-encoded-nesting"),
    pytest.param("searchPolygon=" + "a" * (MAX_REQUEST_LINE_BYTES + 10), 414, id="over-long"),
]


@pytest.mark.parametrize("query, status", BAD_QUERIES)
def test_hostile_query_string(
    query: str,
    status: int,
    service: Any,
    https: requests.Session,
    hostile_key: Any,
    figures: Any,
) -> None:
    response = _get(https, f"{service.base_url}/v1/search?{query}", hostile_key)
    _assert_envelope(response, {status})
    figures.add("inputs tried", "hand-written query strings")


# -- header tricks, over a raw TLS socket (requests refuses to send most of them) ----------


def _raw(service: Any, ca: str, head: bytes, read_timeout: float = TIMEOUT) -> tuple[int, bytes]:
    """Send ``head`` as is; returns (status, body) of the answer (0 when none)."""
    context = ssl.create_default_context(cafile=ca)
    with (
        socket.create_connection(("127.0.0.1", service.port), timeout=read_timeout) as sock,
        context.wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(head)
        data = b""
        while True:
            try:
                chunk = tls.recv(65536)
            except (ssl.SSLError, ConnectionResetError):
                break
            if not chunk:
                break
            data += chunk
            head_end = data.find(b"\r\n\r\n")
            if head_end >= 0:
                length = [
                    int(line.split(b":")[1])
                    for line in data[:head_end].split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(data) >= head_end + 4 + length[0]:
                    break
    if not data.startswith(b"HTTP/1.1 "):
        return 0, data
    return int(data[9:12]), data.split(b"\r\n\r\n", 1)[1]


def _head(key_lines: list[bytes], target: str = "/v1/markets") -> bytes:
    lines = [
        f"GET {target} HTTP/1.1".encode(),
        b"Host: 127.0.0.1",
        *key_lines,
        b"Connection: close",
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _header_cases(key: str) -> list[tuple[str, list[bytes], set[int]]]:
    k = key.encode()
    return [
        ("no key", [], {401}),
        ("empty key", [b"x-api-key: "], {401}),
        ("duplicate x-api-key (good, bad)", [b"x-api-key: " + k, b"x-api-key: nope"], {400, 401}),
        ("duplicate x-api-key (bad, good)", [b"x-api-key: nope", b"x-api-key: " + k], {400, 401}),
        ("duplicate x-api-key (good, good)", [b"x-api-key: " + k, b"x-api-key: " + k], {400, 401}),
        ("key and a comma-joined second key", [b"x-api-key: " + k + b", " + k], {401}),
        ("whitespace inside the key", [b"x-api-key: " + k[:10] + b" " + k[10:]], {401}),
        ("key with a trailing NUL", [b"x-api-key: " + k + b"\x00"], {400, 401}),
        ("key with a vertical tab", [b"x-api-key: " + k + b"\x0b"], {400, 401}),
        ("key upper-cased", [b"x-api-key: " + k.upper()], {401}),
        ("key prefix", [b"x-api-key: " + k[:-1]], {401}),
        ("key plus a suffix", [b"x-api-key: " + k + b"x"], {401}),
        ("key percent-encoded", [b"x-api-key: " + quote(key, safe="").encode() + b"%20"], {401}),
        ("key in Authorization", [b"Authorization: Bearer " + k], {401}),
        ("key in a cookie", [b"Cookie: x-api-key=" + k], {401}),
        ("non-ASCII key", ["x-api-key: ключ-🔑".encode()], {400, 401}),
        ("latin-1 bytes", [b"x-api-key: \xff\xfe\xfd"], {400, 401}),
        ("space before the colon", [b"x-api-key : " + k], {400}),
        ("obsolete line folding", [b"x-api-key: " + k[:10], b" " + k[10:]], {400, 401}),
        ("bare LF in value", [b"x-api-key: " + k[:10] + b"\n" + k[10:]], {400, 401}),
        ("huge x-api-key (1 MB)", [b"x-api-key: " + b"a" * 1_000_000], {400, 401, 414, 431}),
        ("10,000 headers", [b"x-pad-%d: 1" % i for i in range(10_000)], {400, 401, 431}),
        (
            "Content-Length and Transfer-Encoding",
            [b"x-api-key: " + k, b"Content-Length: 5", b"Transfer-Encoding: chunked"],
            {400},
        ),
    ]


def test_header_tricks(service: Any, ca_bundle: str, hostile_key: Any, figures: Any) -> None:
    failures = []
    for label, lines, allowed in _header_cases(hostile_key):
        status, body = _raw(service, ca_bundle, _head(lines))
        if status not in allowed:
            failures.append(f"{label}: {status} {body[:120]!r}")
        elif status:
            assert json.loads(body)["status"] == "ERROR", label
        figures.add("inputs tried", "header tricks")
    assert not failures, "\n".join(failures)
    assert _raw(service, ca_bundle, _head([b"x-api-key: " + hostile_key.encode()]))[0] == 200


def test_whitespace_around_the_key_is_not_part_of_it(
    service: Any, ca_bundle: str, hostile_key: Any, figures: Any
) -> None:
    """HTTP strips optional whitespace around a field value (RFC 9110 §5.5), so the padded
    key *is* the key: it authenticates as that key and is counted for it — no other key."""
    name = hostile_key.name
    before = service.keys.get(name)["used_lifetime"]
    for pad in (b" ", b"\t", b"  \t "):
        line = b"x-api-key:" + pad + hostile_key.encode() + pad
        status, body = _raw(service, ca_bundle, _head([line]))
        assert status == 200, body[:200]
        figures.add("inputs tried", "header tricks")
    assert service.keys.get(name)["used_lifetime"] == before + 3


def test_missing_key_message(service: Any, https: requests.Session) -> None:
    response = https.get(service.base_url + "/v1/markets", timeout=TIMEOUT)
    assert response.status_code == 401 and response.json()["messages"] == [MISSING_KEY]


def test_slow_client_does_not_hang_the_service(
    service: Any, ca_bundle: str, https: requests.Session, hostile_key: Any, figures: Any
) -> None:
    """A client that opens connections and sends half a request head (slowloris) does not
    stop others from being served."""
    context = ssl.create_default_context(cafile=ca_bundle)
    held = []
    try:
        for _ in range(20):
            sock = socket.create_connection(("127.0.0.1", service.port), timeout=TIMEOUT)
            tls = context.wrap_socket(sock, server_hostname="127.0.0.1")
            tls.sendall(b"GET /v1/markets HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-")
            held.append(tls)
        started = time.monotonic()
        response = _get(https, service.base_url + "/v1/markets", hostile_key)
        assert response.status_code == 200
        assert time.monotonic() - started < 5
    finally:
        for tls in held:
            tls.close()
    figures.add("inputs tried", "half-sent request heads held open", len(held))
