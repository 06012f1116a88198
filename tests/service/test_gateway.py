"""The gateway: the admission picked by the key store's dialect, and where a call runs (on the
loop, on the batcher's thread, on the pool's threads), witnessed by the key store's log."""

from __future__ import annotations

import asyncio
import doctest
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from parcelsearch_service import gateway, synth
from parcelsearch_service.gateway import ADMISSIONS, Gateway, admission_for
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.limits import Call, Outcome
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.postgres_admission import PostgresAdmission
from parcelsearch_service.sqlite_admission import SqliteAdmission
from parcelsearch_service.store import ParcelStore


@pytest.fixture
def store(keys_location: str) -> Iterator[KeyStore]:
    """A fresh key store, on SQLite and on PostgreSQL."""
    keys = KeyStore(keys_location)
    yield keys
    keys.close()


@pytest.fixture(scope="module")
def parcels() -> ParcelStore:
    return ParcelStore(synth.example_fabric().parcels)


def test_the_examples_run() -> None:
    failed, tried = doctest.testmod(gateway)
    assert (failed, tried > 0) == (0, True)


def test_every_key_store_dialect_has_its_admission(store: KeyStore) -> None:
    assert set(ADMISSIONS) == set(KeyStore._implementations)
    admission = admission_for(store)
    expected = {"sqlite": SqliteAdmission, "postgresql": PostgresAdmission}[store.dialect]
    assert type(admission) is expected
    assert admission.keys is store


def test_without_parcels_nothing_is_admitted_on_the_loop(store: KeyStore) -> None:
    key = store.create("thread-only")
    call: Call[bytes] = Call(key, "markets", "/v1/markets", lambda: Outcome(200, b"[]"))
    assert asyncio.run(admission_for(store).answer(call)) is None
    assert store.get("thread-only")["used_lifetime"] == 0
    assert store.requests("thread-only").empty


def _where(gate: Gateway, key: str) -> tuple[object, str]:
    """The gateway's answer to one markets call, and the thread that handled it."""
    threads: list[str] = []

    def handle() -> Outcome[bytes]:
        threads.append(threading.current_thread().name)
        return Outcome(200, b"[]")

    async def send() -> object:
        try:
            return await gate.answer(
                Call(key, "markets", "/v1/markets", handle, Outcome(200, b"[]"))
            )
        finally:
            await gate.close()

    return asyncio.run(send()), threads[0]


def test_a_call_runs_where_its_stores_let_it(
    store: KeyStore, parcels: ParcelStore, tmp_path: Path
) -> None:
    """SQLite keys and parcels in memory: on the loop (the main thread here); with the
    portal's tallies on another key store, on the batcher's thread; PostgreSQL keys: on
    the pool's threads. Each is counted and logged once."""
    key = store.create("where", per_second=100)
    expected = {"sqlite": "MainThread", "postgresql": "parcelsearch_0"}[store.dialect]
    outcome, thread = _where(Gateway(store, parcels, PortalStore(store)), key)
    assert (outcome, thread) == (Outcome(200, b"[]"), expected)
    if store.dialect == "sqlite":
        other = KeyStore(tmp_path / "other.sqlite")
        outcome, thread = _where(Gateway(store, parcels, PortalStore(other)), key)
        other.close()
        assert (outcome, thread) == (Outcome(200, b"[]"), "parcelsearch-gate")
    counted = 2 if store.dialect == "sqlite" else 1
    assert store.get("where")["used_lifetime"] == counted
    assert store.requests("where").status.tolist() == [200] * counted
