"""The Starlette app's handlers, driven in-process (Starlette's TestClient, real stores)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import QueryParams

from parcelsearch_service import sqlite_admission, synth
from parcelsearch_service.app import BUSY, INTERNAL, MISSING_KEY, create_app
from parcelsearch_service.asgi_layers import INTERNAL_UNCOUNTED, REQUEST_LINE_TOO_LONG
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.polygon import ParsedPolygon
from parcelsearch_service.search_query import json_strings, query_params
from parcelsearch_service.sqlite_admission import LOOP_SEARCH_LIMIT
from parcelsearch_service.store import ParcelStore

with warnings.catch_warnings():  # Starlette 1.x asks for `httpx2`, not yet on PyPI here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ERROR = "ERROR"


@pytest.fixture(scope="module")
def example() -> synth.Example:
    return synth.example_fabric()


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[KeyStore]:
    store = KeyStore(tmp_path / "keys.sqlite", busy_timeout=0.2)
    yield store
    store.close()


def _client(store: Any, keys: KeyStore, markets: list[str] | None = None) -> TestClient:
    return TestClient(
        create_app(store, markets or ["Waco, TX", "Abilene, TX"], keys),
        base_url="https://testserver",
        raise_server_exceptions=False,
    )


@pytest.fixture
def client(example: synth.Example, keys: KeyStore) -> Iterator[TestClient]:
    with _client(ParcelStore(example.parcels), keys) as test_client:
        yield test_client


def _messages(response: Any) -> list[str]:
    body = response.json()
    assert body["status"] == ERROR and response.headers["content-type"] == "application/json"
    return list(body["messages"])


def test_markets_answers_the_sorted_list(client: TestClient, keys: KeyStore) -> None:
    key = keys.create("m")
    response = client.get("/v1/markets", headers={"x-api-key": key})
    assert response.status_code == 200
    assert response.json() == {"status": "OK", "dataRows": 2, "data": ["Abilene, TX", "Waco, TX"]}
    assert keys.requests("m").status.tolist() == [200]


def test_search_pages_in_parcel_id_order(
    client: TestClient, keys: KeyStore, example: synth.Example
) -> None:
    key = keys.create("s", per_second=1000)
    ring = json.dumps(example.ring)
    pages = [
        client.get(
            "/v1/search", params={"searchPolygon": ring, "page": str(p)}, headers={"x-api-key": key}
        ).json()
        for p in (1, 2, 3)
    ]
    assert [p["page"] for p in pages] == [1, 2, 3]
    assert all(p["rows"] == 276 and p["pages"] == 3 for p in pages)
    assert [g for p in pages for g in p["data"]] == example.expected
    log = keys.requests("s")
    assert log.page.tolist() == [1, 2, 3] and log.polygon_sha256.nunique() == 1


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        pytest.param({}, MISSING_KEY, id="missing"),
        pytest.param({"x-api-key": "nope"}, "Invalid ApiKey", id="unknown"),
    ],
)
def test_401s(client: TestClient, headers: dict[str, str], message: str) -> None:
    response = client.get("/v1/markets", headers=headers)
    assert (response.status_code, _messages(response)) == (401, [message])


def test_a_key_given_twice_counts_neither(client: TestClient, keys: KeyStore) -> None:
    key = keys.create("twice")
    response = client.get("/v1/markets", headers=[("x-api-key", key), ("x-api-key", key)])
    assert response.status_code == 401 and "given 2 times" in _messages(response)[0]
    assert keys.get("twice")["used_lifetime"] == 0


def test_400s_count_and_are_logged_with_their_status(client: TestClient, keys: KeyStore) -> None:
    key = keys.create("bad", per_second=1000)
    repeated = client.get("/v1/search?searchPolygon=a&searchPolygon=b", headers={"x-api-key": key})
    assert _messages(repeated) == ["searchPolygon is given 2 times; send it once"]
    nonsense = client.get(
        "/v1/search", params={"searchPolygon": "nonsense"}, headers={"x-api-key": key}
    )
    assert nonsense.status_code == 400 and _messages(nonsense)
    assert keys.requests("bad").status.tolist() == [400, 400]
    assert keys.get("bad")["used_lifetime"] == 2


def test_page_beyond_the_last_says_how_many(
    client: TestClient, keys: KeyStore, example: synth.Example
) -> None:
    key = keys.create("beyond")
    response = client.get(
        "/v1/search",
        params={"searchPolygon": json.dumps(example.ring), "page": "4"},
        headers={"x-api-key": key},
    )
    assert response.status_code == 400
    assert "has 3 pages (276 rows); ask for a page from 1 to 3" in _messages(response)[0]


def test_404_405_and_414_in_the_envelope(client: TestClient) -> None:
    assert client.get("/v2/nothing").status_code == 404
    assert "no such resource: /v2/nothing" in _messages(client.get("/v2/nothing"))[0]
    posted = client.post("/v1/search")
    assert (posted.status_code, _messages(posted)) == (
        405,
        ["method POST is not allowed on /v1/search; use GET"],
    )
    long = client.get("/v1/search", params={"searchPolygon": "x" * 8000})
    assert (long.status_code, _messages(long)) == (414, [REQUEST_LINE_TOO_LONG])


def test_openapi_needs_no_key(client: TestClient) -> None:
    response = client.get("/openapi.json")
    assert response.status_code == 200 and "/v1/search" in response.json()["paths"]


class _SpyStore(ParcelStore):
    """The real store, noting whether a search ran on a thread with an event loop."""

    on_loop: list[bool]

    def hits(self, parsed: ParsedPolygon) -> np.ndarray:
        try:
            asyncio.get_running_loop()
            self.on_loop.append(True)
        except RuntimeError:
            self.on_loop.append(False)
        return super().hits(parsed)


@pytest.mark.parametrize("limit, on_loop", [(0, False), (LOOP_SEARCH_LIMIT, True)])
def test_a_search_runs_on_the_event_loop_only_when_brief(
    example: synth.Example,
    keys: KeyStore,
    monkeypatch: pytest.MonkeyPatch,
    limit: int,
    on_loop: bool,
) -> None:
    """With both stores in-process a search that tests at most the limit's parcels runs on
    the loop (admitted there); a larger one on the batcher's thread. Either way it is
    answered, counted and logged once."""
    monkeypatch.setattr(sqlite_admission, "LOOP_SEARCH_LIMIT", limit)
    store = _SpyStore(example.parcels)
    store.on_loop = []
    key = keys.create("threads")
    with _client(store, keys) as test_client:
        response = test_client.get(
            "/v1/search",
            params={"searchPolygon": json.dumps(example.ring)},
            headers={"x-api-key": key},
        )
    assert response.status_code == 200
    assert store.on_loop == [on_loop]
    assert keys.get("threads")["used_lifetime"] == 1
    assert keys.requests("threads").status.tolist() == [200]


class _FailingStore(ParcelStore):
    """A fault we cannot cause with real parts: the search itself raises."""

    def __init__(self, parcels: Any, error: Exception) -> None:
        super().__init__(parcels)
        self.error = error

    def hits(self, parsed: ParsedPolygon) -> np.ndarray:
        raise self.error


def test_an_unexpected_failure_is_a_counted_500_in_the_envelope(
    example: synth.Example, keys: KeyStore
) -> None:
    key = keys.create("boom")
    with _client(_FailingStore(example.parcels, RuntimeError("bug")), keys) as test_client:
        response = test_client.get(
            "/v1/search",
            params={"searchPolygon": json.dumps(example.ring)},
            headers={"x-api-key": key},
        )
    assert (response.status_code, _messages(response)) == (500, [INTERNAL])
    assert keys.requests("boom").status.tolist() == [500]


def test_a_failed_admission_is_a_500_that_says_nothing_was_counted(
    client: TestClient, keys: KeyStore
) -> None:
    """A real fault inside the admission (its log table is gone): the 500 says the call was
    not counted, and the key's counter agrees."""
    key = keys.create("unadmitted")
    keys.execute(keys.connection(), "ALTER TABLE requests RENAME TO requests_gone")
    response = client.get("/v1/markets", headers={"x-api-key": key})
    keys.execute(keys.connection(), "ALTER TABLE requests_gone RENAME TO requests")
    assert (response.status_code, _messages(response)) == (500, [INTERNAL_UNCOUNTED])
    assert "not counted" in INTERNAL_UNCOUNTED
    assert keys.get("unadmitted")["used_lifetime"] == 0


def test_an_unreachable_parcels_database_is_a_503(example: synth.Example, keys: KeyStore) -> None:
    key = keys.create("gone")
    failing = _FailingStore(example.parcels, StoreBusyError("the parcels database is unavailable"))
    with _client(failing, keys) as test_client:
        response = test_client.get(
            "/v1/search",
            params={"searchPolygon": json.dumps(example.ring)},
            headers={"x-api-key": key},
        )
    assert (response.status_code, _messages(response)) == (503, [BUSY])
    assert response.headers["Retry-After"] == "1"
    assert keys.get("gone")["used_lifetime"] == 0  # given back
    log = keys.requests("gone")
    assert (log.status.tolist(), log.counted.tolist()) == ([503], [False])


def test_a_locked_key_store_is_a_503_not_a_500(client: TestClient, keys: KeyStore) -> None:
    key = keys.create("locked")
    holder = sqlite3.connect(keys.location, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        response = client.get("/v1/markets", headers={"x-api-key": key})
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (response.status_code, _messages(response)) == (503, [BUSY])
    assert response.headers["Retry-After"] == "1"
    assert keys.get("locked")["used_lifetime"] == 0
    assert client.get("/v1/markets", headers={"x-api-key": key}).status_code == 200


@pytest.mark.parametrize(
    "values",
    [
        ["0a1b2c3d4e5f60718", "ffffffffffffffff0"],
        [],
        ['a"b', "ü", "x\\y"],
        ["", "ab"],
        ["tab\there", "del\x7f", "~ !#$%&'()*+,-./:;<=>?@[]^_`{|}"],
    ],
)
def test_a_page_of_ids_is_the_json_the_encoder_writes(values: list[str]) -> None:
    assert json_strings(values) == json.dumps(values, separators=(",", ":"))


def test_a_search_body_is_the_json_the_encoder_writes(
    client: TestClient, keys: KeyStore, example: synth.Example
) -> None:
    key = keys.create("body")
    response = client.get(
        "/v1/search",
        params={"searchPolygon": json.dumps(example.ring), "page": "2"},
        headers={"x-api-key": key},
    )
    body = response.json()
    assert body["data"] == example.expected[100:200]
    assert response.content == json.dumps(body, separators=(",", ":")).encode()


_query_text = st.lists(
    st.sampled_from([*"%&=+ab5BbDdCc2[],;é\x00", "%5B", "%2c", "%5d", "%E2%82", "%%", "%C3%A9"])
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_query_text)
def test_query_params_read_a_query_as_starlette_does(text: str) -> None:
    raw = text.encode("utf-8")
    expected: dict[str, list[str]] = {}
    for name, value in QueryParams(raw).multi_items():
        expected.setdefault(name, []).append(value)
    assert query_params(raw) == expected
