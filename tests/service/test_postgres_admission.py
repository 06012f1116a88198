"""Both stores in PostgreSQL: admission and search from the event loop, on pooled
connections (the app driven in-process by Starlette's TestClient, a real cluster)."""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from parcelsearch_service import limits, synth
from parcelsearch_service.app import BUSY, INTERNAL, create_app
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.polygon import parse_polygon
from parcelsearch_service.postgis import PostgisParcelStore, load_parcels_into
from parcelsearch_service.postgres_admission import (
    APPLICATION_NAME,
    CONNECTIONS,
    postgres_parameters,
    postgres_statement,
)
from parcelsearch_service.store import ParcelStore

with warnings.catch_warnings():  # Starlette 1.x asks for `httpx2`, not yet on PyPI here
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


@pytest.fixture(scope="module")
def example() -> synth.Example:
    return synth.example_fabric()


@pytest.fixture(scope="module")
def together(postgres: Any, example: synth.Example) -> str:
    """One database holding the example's parcels; keys go beside them."""
    url: str = postgres.database("gate")
    load_parcels_into(example.parcels, url)
    return url


@pytest.fixture(scope="module")
def apart(postgres: Any) -> str:
    """A database for keys alone (the parcels stay in ``together``'s)."""
    url: str = postgres.database("keys")
    return url


@pytest.fixture(params=["together", "apart"])
def client(
    request: pytest.FixtureRequest, together: str
) -> Iterator[tuple[TestClient, KeyStore, str]]:
    """The app with keys beside the parcels (one statement admits and searches) or in a
    database of their own (two pools); yields the client, the key store and the URL of the
    database the search runs in."""
    keys = KeyStore(request.getfixturevalue(request.param), busy_timeout=2.0)
    store = PostgisParcelStore(together)
    app = create_app(store, ["Abilene, TX"], keys)
    with TestClient(
        app, base_url="https://testserver", raise_server_exceptions=False
    ) as test_client:
        yield test_client, keys, together
    store.close()
    keys.close()


def _search(client: TestClient, key: str, ring: Any, page: int = 1) -> Any:
    return client.get(
        "/v1/search",
        params={"searchPolygon": json.dumps(ring), "page": page},
        headers={"x-api-key": key},
    )


def _pooled(url: str) -> list[int]:
    """Backend pids of the gate's pooled connections to ``url``'s database."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            " AND datname = current_database()",
            (APPLICATION_NAME,),
        ).fetchall()
    return [int(row[0]) for row in rows]


@pytest.fixture
def keys_together(together: str) -> Iterator[KeyStore]:
    keys = KeyStore(together)
    yield keys
    keys.close()


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def test_answers_as_the_embedded_store_on_pooled_connections_closed_at_shutdown(
    together: str, keys_together: KeyStore, example: synth.Example
) -> None:
    keys = keys_together
    key = keys.create("pooled", per_second=1000, quota=1000)
    store = PostgisParcelStore(together)
    before = _threads()
    try:
        with TestClient(
            create_app(store, ["Abilene, TX"], keys), base_url="https://testserver"
        ) as client:
            first = _search(client, key, example.ring).json()
            last = _search(client, key, example.ring, page=first["pages"]).json()  # cached
            opened = _pooled(together)
            started = [t.name for t in _threads() - before]
    finally:
        store.close()
    embedded = ParcelStore(example.parcels)
    hits = embedded.hits(parse_polygon(json.dumps(example.ring)))
    assert first["pages"] > 1 and first["rows"] == len(hits)
    assert first["data"] == embedded.page(hits, 1)
    assert last["data"] == embedded.page(hits, first["pages"])
    assert len(opened) == CONNECTIONS
    # no request thread: the loop itself (the test client's) waited on the database
    assert not [name for name in started if name.startswith("parcelsearch")], started
    assert _pooled(together) == []  # the lifespan's end closed the pool
    assert keys.get("pooled")["used_lifetime"] == 2
    assert keys.requests("pooled").status.tolist() == [200, 200]


def _parcel_scans(url: str, key: str, ring: Any) -> int:
    """How many times the one-statement admission and search of ``ring`` with ``key`` scans
    the parcels (EXPLAIN ANALYZE: the statement really runs, admission included)."""
    store = PostgisParcelStore(url)
    polygon = parse_polygon(json.dumps(ring))
    query, params = store.search_statement(polygon.polygon)
    store.close()
    call: limits.Call[bytes] = limits.Call(
        key,
        "search",
        "/v1/search",
        lambda: limits.Outcome(200, b""),
        limits.Outcome(200, b"", polygon.sha256, 1),
    )
    params |= postgres_parameters(call, 1.7e9)
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + postgres_statement(query), params
        ).fetchone()
    assert row is not None

    def scans(node: dict[str, Any]) -> int:
        own = node.get("Actual Loops", 0) if node.get("Relation Name") == "parcels" else 0
        return int(own) + sum(scans(child) for child in node.get("Plans", []))

    return scans(row[0][0]["Plan"])


def test_a_refused_request_never_searches(
    together: str, keys_together: KeyStore, example: synth.Example
) -> None:
    key = keys_together.create("explained", per_second=1000, quota=1000)
    assert _parcel_scans(together, "not-a-key", example.ring) == 0
    assert _parcel_scans(together, key, example.ring) >= 1


def test_lost_connections_answer_503_uncounted_then_the_pool_recovers(
    client: tuple[TestClient, KeyStore, str], example: synth.Example
) -> None:
    """The parcels database's connections are cut (with keys apart, after the admission
    counted the call: it is given back)."""
    test_client, keys, parcels = client
    key = keys.create("lost", per_second=1000, quota=1000)
    assert _search(test_client, key, example.ring).status_code == 200
    moved = [[x + 1e-5, y] for x, y in example.ring]  # not cached: it needs a search
    with psycopg.connect(parcels, autocommit=True) as conn:
        for pid in _pooled(parcels):
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    answers = []
    for _ in range(3 * CONNECTIONS):  # bounded: each broken connection fails once
        answer = _search(test_client, key, moved)
        answers.append(answer)
        if answer.status_code == 200:
            break
    *failed, last = answers
    assert last.status_code == 200 and 1 <= len(failed) <= CONNECTIONS
    for answer in failed:
        assert answer.status_code == 503 and answer.json()["messages"] == [BUSY]
        assert answer.headers["Retry-After"] == "1"
    assert keys.get("lost")["used_lifetime"] == 2  # the first search and the last
    counted = keys.requests("lost")
    assert counted[counted.counted].status.tolist() == [200, 200]


def test_refusals_in_the_vendor_envelope_and_spike_refusals_tallied(
    client: tuple[TestClient, KeyStore, str], example: synth.Example
) -> None:
    test_client, keys, _ = client
    key = keys.create("spiky", per_second=1, quota=1000)
    first = _search(test_client, key, example.ring)
    second = _search(test_client, key, example.ring)
    unknown = _search(test_client, "no-such-key", example.ring)
    assert first.status_code == 200
    assert (second.status_code, second.json()["messages"]) == (429, [limits.spike_message(1)])
    assert int(second.headers["Retry-After"]) >= 1
    assert (unknown.status_code, unknown.json()["messages"]) == (401, [limits.INVALID_KEY])
    with keys.transaction() as conn:
        tally = keys.execute(
            conn,
            "SELECT sum(s.count) AS n FROM spike_refusals s JOIN keys k"
            " ON k.id = s.key_id WHERE k.name = ?",
            ("spiky",),
        ).fetchone()
    assert tally["n"] == 1
    assert keys.get("spiky")["used_lifetime"] == 1


def test_a_search_that_fails_after_admission_is_a_counted_500(
    postgres: Any, example: synth.Example
) -> None:
    """A fault we can cause for real: the parcels table loses the column a search reads.
    The one statement that admits and searches fails as a whole; the call is then admitted
    alone and its search fails on its own, as on the thread-pool path."""
    url: str = postgres.database("broken")
    load_parcels_into(example.parcels, url)
    keys, store = KeyStore(url), PostgisParcelStore(url)
    try:
        key = keys.create("broken", per_second=1000, quota=1000)
        with TestClient(
            create_app(store, ["Abilene, TX"], keys),
            base_url="https://testserver",
            raise_server_exceptions=False,
        ) as client:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ALTER TABLE parcelsearch.parcels RENAME COLUMN group_id TO gone")
            answer = _search(client, key, example.ring)
        assert (answer.status_code, answer.json()["messages"]) == (500, [INTERNAL])
        assert keys.get("broken")["used_lifetime"] == 1
        assert keys.requests("broken").status.tolist() == [500]
    finally:
        store.close()
        keys.close()
