"""The admission transaction: order of checks, sliding spike window, quotas, exact counts."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.gateway import admit, admit_all
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.limits import Call, Outcome, Refusal, spike_window


@pytest.fixture
def store(keys_location: str) -> Iterator[KeyStore]:
    """A fresh key store, on SQLite and on PostgreSQL."""
    keys = KeyStore(keys_location)
    yield keys
    keys.close()


class Clock:
    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def _ok() -> Outcome[str]:
    return Outcome(200, "ok", "sha", 1)


def _status(result: Refusal | Outcome[str]) -> int:
    return result.status


@pytest.mark.parametrize(
    ("rate", "window"),
    [
        pytest.param(10.0, (10, 1.0), id="ten"),
        pytest.param(2.5, (2, 1.0), id="fraction"),
        pytest.param(0.5, (1, 2.0), id="slow"),
    ],
)
def test_spike_window(rate: float, window: tuple[int, float]) -> None:
    assert spike_window(rate) == window


def test_order_of_checks(store: KeyStore) -> None:
    key = store.create("m", services=("markets",), quota=0)
    assert admit(store, "nope", "search", "/v1/search", _ok) == Refusal(401, "Invalid ApiKey")
    assert admit(store, key, "search", "/v1/search", _ok) == Refusal(
        401, "Invalid ApiKey for given resource"
    )
    assert admit(store, key, "markets", "/v1/markets", _ok) == Refusal(
        429, "Rate limit quota violation. Quota limit exceeded. Identifier : m"
    )


def test_sliding_window_admits_n_in_any_second(store: KeyStore) -> None:
    key = store.create("s", per_second=5, quota=1000)
    clock = Clock()
    t0 = clock.now
    statuses = []
    for offset in (0.0, 0.1, 0.2, 0.3, 0.9, 0.95, 1.05, 1.15, 1.25, 1.35, 1.36):
        clock.now = t0 + offset
        statuses.append(_status(admit(store, key, "search", "/v1/search", _ok, now=clock)))
    # 0.95: five already in (t-1, t] -> refused (and not logged); 1.05: 0.0 has left the
    # window; each later one finds four in its window until 1.36, whose window
    # (0.36, 1.36] holds 0.9, 1.05, 1.15, 1.25 and 1.35.
    assert statuses == [200] * 5 + [429] + [200] * 4 + [429]


def test_spike_refusal_is_not_counted_and_says_when_to_retry(store: KeyStore) -> None:
    key = store.create("r", per_second=1)
    clock = Clock()
    admit(store, key, "search", "/v1/search", _ok, now=clock)
    clock.now += 0.2
    refusal = admit(store, key, "search", "/v1/search", _ok, now=clock)
    assert refusal == Refusal(429, "Spike arrest violation. Allowed rate : 1ps", retry_after=1)
    assert store.get("r")["used_lifetime"] == 1
    assert len(store.requests("r")) == 1


def test_monthly_quota_resets_on_the_first_of_the_month_utc(store: KeyStore) -> None:
    key = store.create("p", "production", quota=2)
    clock = Clock(datetime(2024, 1, 31, 23, 59, tzinfo=UTC).timestamp())
    results = []
    for _ in range(3):
        clock.now += 2
        results.append(_status(admit(store, key, "search", "/v1/search", _ok, now=clock)))
    clock.now = datetime(2024, 2, 1, 0, 0, 30, tzinfo=UTC).timestamp()
    results.append(_status(admit(store, key, "search", "/v1/search", _ok, now=clock)))
    assert results == [200, 200, 429, 200]
    row = store.execute(
        store.connection(), "SELECT used_lifetime, used_month, month FROM keys"
    ).fetchone()
    assert (row["used_lifetime"], row["used_month"], row["month"]) == (3, 1, "2024-02")


def test_lifetime_quota_never_resets(store: KeyStore) -> None:
    key = store.create("d", "demo", quota=1)
    clock = Clock(datetime(2024, 1, 31, tzinfo=UTC).timestamp())
    assert _status(admit(store, key, "search", "/v1/search", _ok, now=clock)) == 200
    clock.now = datetime(2024, 3, 1, tzinfo=UTC).timestamp()
    assert _status(admit(store, key, "search", "/v1/search", _ok, now=clock)) == 429


def test_a_failing_handler_still_counts(store: KeyStore) -> None:
    key = store.create("f")

    def boom() -> Outcome[str]:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError, match="bug"):
        admit(store, key, "search", "/v1/search", boom)
    assert store.get("f")["used_lifetime"] == 1
    assert store.requests("f").status.tolist() == [500]


def test_exact_counts_across_threads_and_connections(store: KeyStore, keys_location: str) -> None:
    key = store.create("c", "production", per_second=10_000, quota=37)
    second = KeyStore(keys_location)  # another "process" (or host) on the same store
    results: list[int] = []
    lock = threading.Lock()

    def worker(keys: KeyStore) -> None:
        for _ in range(20):
            status = _status(admit(keys, key, "search", "/v1/search", _ok))
            with lock:
                results.append(status)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (store, second) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    second.close()
    assert results.count(200) == 37 and results.count(429) == 120 - 37
    assert store.get("c")["used_lifetime"] == 37
    log = store.requests("c")
    assert (log.counted.sum(), (~log.counted).sum()) == (37, 83)


def test_spike_window_holds_across_connections(store: KeyStore, keys_location: str) -> None:
    """Six threads on two stores (as two hosts would be) hammer one key limited to 10/s:
    the request log never holds more than 10 admissions in any one-second window."""
    key = store.create("w", "production", per_second=10, quota=10_000)
    second = KeyStore(keys_location)
    statuses: list[int] = []
    lock = threading.Lock()

    def worker(keys: KeyStore) -> None:
        for _ in range(40):
            status = _status(admit(keys, key, "search", "/v1/search", _ok))
            with lock:
                statuses.append(status)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (store, second) * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    second.close()
    times = store.requests("w").time.astype("int64").to_numpy() / 1e9
    assert len(times) == statuses.count(200) > 0
    assert max(((times[i:] - t) < 1.0).sum() for i, t in enumerate(times)) <= 10


def _hold_write_lock(keys_location: str, key_name: str) -> Any:
    """A second connection holding the lock an admission needs; returns it (open)."""
    if keys_location.startswith("postgresql://"):
        conn = psycopg.connect(keys_location, autocommit=True)
        conn.execute("BEGIN")
        conn.execute("SELECT * FROM parcelsearch.keys WHERE name = %s FOR UPDATE", (key_name,))
        return conn
    sqlite = sqlite3.connect(keys_location, isolation_level=None)
    sqlite.execute("BEGIN IMMEDIATE")
    return sqlite


def test_a_held_lock_waits_then_raises_store_busy(keys_location: str) -> None:
    store = KeyStore(keys_location, busy_timeout=0.3)
    key = store.create("locked", per_second=1000)
    holder = _hold_write_lock(keys_location, "locked")
    try:
        with pytest.raises(StoreBusyError, match="stayed busy for 0.3s"):
            admit(store, key, "markets", "/v1/markets", _ok)
        holder.execute("ROLLBACK")
        assert store.get("locked")["used_lifetime"] == 0  # nothing counted
        assert _status(admit(store, key, "markets", "/v1/markets", _ok)) == 200  # lock gone
    finally:
        holder.close()
        store.close()


def _calls(keys: list[str]) -> list[Call[str]]:
    return [Call(key, "search", "/v1/search", _ok, _ok()) for key in keys]


def test_a_batch_counts_exactly_as_one_at_a_time(store: KeyStore) -> None:
    """One batch of 14 calls on three keys (rate 5, quota 3, revoked) at one instant: the
    same answers, counters and log as admitting them one by one."""

    def run(suffix: str, batched: bool) -> tuple[list[Any], list[int]]:
        fast = store.create("fast" + suffix, per_second=5, quota=100)
        few = store.create("few" + suffix, per_second=50, quota=3)
        gone = store.create("gone" + suffix)
        store.revoke("gone" + suffix)
        keys = [fast, few, gone] * 3 + [fast, fast, few, fast, "unknown"]
        clock = Clock()
        if batched:
            results: list[Any] = admit_all(store, _calls(keys), now=clock)
        else:
            results = [
                admit(store, k, "search", "/v1/search", _ok, now=clock, presumed=_ok())
                for k in keys
            ]
        used = [store.get(n + suffix)["used_lifetime"] for n in ("fast", "few", "gone")]
        return [(type(r).__name__, r.status) for r in results], used

    assert run("-batch", True) == run("-alone", False)
    answers, used = run("-again", True)
    assert used == [5, 3, 0]
    assert [status for _, status in answers].count(200) == 8
    assert len(store.requests("few-batch")) == 4  # 3 counted, 1 quota refusal logged


def test_a_failing_handler_in_a_batch_fails_only_its_call(store: KeyStore) -> None:
    key = store.create("b")

    def boom() -> Outcome[str]:
        raise RuntimeError("bug")

    calls = _calls([key, key, key])
    calls[1] = Call(key, "search", "/v1/search", boom, _ok())
    results = admit_all(store, calls)
    assert isinstance(results[1], RuntimeError)
    assert [r.status for r in (results[0], results[2])] == [200, 200]
    assert store.get("b")["used_lifetime"] == 3
    assert store.requests("b").status.tolist() == [200, 500, 200]


def test_a_known_key_is_admitted_in_one_statement(tmp_path: Any) -> None:
    """Witness: SQLite's own trace of the statements an admission runs."""
    store = KeyStore(tmp_path / "keys.sqlite")
    key = store.create("one", per_second=100)
    admit(store, key, "search", "/v1/search", _ok, presumed=_ok())  # learns the key's rate
    statements: list[str] = []
    store.connection().set_trace_callback(statements.append)
    admit(store, key, "search", "/v1/search", _ok, presumed=_ok())
    store.connection().set_trace_callback(None)
    # (SQLite reports the INSERT … RETURNING once per step of it: the set is what counts.)
    assert {s.split()[0] for s in statements} == {"BEGIN", "INSERT", "COMMIT"}
    assert store.get("one")["used_lifetime"] == len(store.requests("one")) == 2
    store.close()


def test_a_changed_rate_is_read_again(store: KeyStore) -> None:
    key = store.create("changed", per_second=100)
    clock = Clock()
    assert _status(admit(store, key, "search", "/v1/search", _ok, now=clock)) == 200
    with store.transaction() as conn:
        store.execute(conn, "UPDATE keys SET per_second = 1 WHERE name = ?", ("changed",))
    clock.now += 0.5
    assert admit(store, key, "search", "/v1/search", _ok, now=clock) == Refusal(
        429, "Spike arrest violation. Allowed rate : 1ps", retry_after=1
    )
