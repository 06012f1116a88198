"""Never block, never 500: a second connection holds the key store's write lock.

While the lock is held, admissions wait (the busy timeout) off the event loop, and the
loop keeps answering: ``/openapi.json`` returns while gated requests are still waiting. Past
the bound a gated request answers 503 in the envelope with ``Retry-After``, counting nothing;
a lock released in time lets it through. Judged by the order of events, never by a clock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from parcelsearch_service.app import BUSY

WAITING = 3  # gated requests held up at once


@contextmanager
def write_lock(svc: Any, key_name: str) -> Iterator[Callable[[], None]]:
    """Hold the lock an admission needs from a second connection; yields ``release()``."""
    if svc.backend == "postgresql":
        conn: Any = psycopg.connect(svc.keys_location, autocommit=True)
        conn.execute("BEGIN")
        conn.execute("SELECT id FROM parcelsearch.keys WHERE name = %s FOR UPDATE", (key_name,))
    else:
        conn = sqlite3.connect(svc.keys_location, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            conn.execute("ROLLBACK")
            released = True

    try:
        yield release
    finally:
        release()
        conn.close()


def _gated(
    svc: Any, key: str, ca: str, out: list[requests.Response], done: threading.Event
) -> None:
    with requests.Session() as session:
        session.trust_env, session.verify = False, ca
        out.append(
            session.get(svc.base_url + "/v1/markets", headers={"x-api-key": key}, timeout=60)
        )
    done.set()


def _start_waiting(
    svc: Any, key: str, ca: str
) -> tuple[list[requests.Response], list[threading.Event], list[threading.Thread]]:
    answers: list[requests.Response] = []
    events = [threading.Event() for _ in range(WAITING)]
    threads = [threading.Thread(target=_gated, args=(svc, key, ca, answers, e)) for e in events]
    for thread in threads:
        thread.start()
    return answers, events, threads


def _lock_waiters(svc: Any) -> int:
    """Admissions of ``svc`` now waiting for the held lock, as the database or the kernel
    sees them: PostgreSQL backends waiting on a lock; for SQLite, the service's threads
    sleeping in SQLite's busy handler (one a process: its other admissions queue behind it
    on the process's writer lock)."""
    if svc.backend == "postgresql":
        with psycopg.connect(svc.keys_location, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type ="
                " 'Lock' AND datname = current_database()"
            ).fetchone()
        return int(row[0]) if row else 0
    tasks = Path(f"/proc/{svc.proc.pid}/task")
    waiting = 0
    for task in tasks.iterdir():
        try:
            waiting += (task / "wchan").read_text() == "hrtimer_nanosleep"
        except OSError:  # the thread ended meanwhile
            pass
    return waiting


def _until_all_wait(svc: Any) -> None:
    """Poll (bounded) until every gated request is inside its admission, waiting."""
    wanted = WAITING if svc.backend == "postgresql" else 1
    for _ in range(600):
        if _lock_waiters(svc) >= wanted:
            return
        time.sleep(0.01)
    pytest.fail(f"the gated requests never reached the lock ({_lock_waiters(svc)} waiting)")


@pytest.fixture(params=["sqlite", "postgresql"])
def one_worker(request: pytest.FixtureRequest, spawn_service: Callable[..., Any]) -> Any:
    """One worker process (so the event loop that must not block is the one being tested),
    key store busy timeout 5 s."""
    return spawn_service(request.param, workers=1, busy_timeout=5.0)


@pytest.mark.slow
def test_openapi_answers_while_admissions_wait_then_503(
    one_worker: Any, https: requests.Session, ca_bundle: str
) -> None:
    svc = one_worker
    key = svc.keys.create("contended", per_second=1000, quota=100)
    with write_lock(svc, "contended"):
        answers, events, threads = _start_waiting(svc, key, ca_bundle)
        _until_all_wait(svc)
        for _ in range(5):  # the loop answers, again and again, while the gated ones wait
            spec = https.get(svc.base_url + "/openapi.json", timeout=30)
            assert spec.status_code == 200 and spec.json()["openapi"].startswith("3.")
        still_waiting = sum(not e.is_set() for e in events)
        for thread in threads:
            thread.join(60)
    assert still_waiting == WAITING, "a gated request finished while the lock was held"
    assert [a.status_code for a in answers] == [503] * WAITING
    for answer in answers:
        assert answer.json() == {"status": "ERROR", "messages": [BUSY]}
        assert answer.headers["Retry-After"] == "1"
    assert svc.keys.get("contended")["used_lifetime"] == 0  # nothing counted
    ok = https.get(svc.base_url + "/v1/markets", headers={"x-api-key": key}, timeout=30)
    assert ok.status_code == 200
    assert svc.keys.requests("contended").status.tolist() == [200]


def test_a_lock_released_within_the_timeout_lets_requests_through(
    one_worker: Any, https: requests.Session, ca_bundle: str
) -> None:
    svc = one_worker
    key = svc.keys.create("waits", per_second=1000, quota=100)
    with write_lock(svc, "waits") as release:
        answers, events, threads = _start_waiting(svc, key, ca_bundle)
        _until_all_wait(svc)
        assert https.get(svc.base_url + "/openapi.json", timeout=30).status_code == 200
        still_waiting = sum(not e.is_set() for e in events)
        release()
        for thread in threads:
            thread.join(60)
    assert still_waiting == WAITING
    assert [a.status_code for a in answers] == [200] * WAITING
    log = svc.keys.requests("waits")
    assert log.status.tolist() == [200] * WAITING and log.counted.all()
