"""The service's per-key limits under concurrency, and its counters across restart and crash.

Judged from the service's own request log and key store, and from what the threads saw.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests
from _helpers import max_in_window

from parcelsearch_service.keys import KeyStore

RING = "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]"
THREADS_PER_KEY = 10
SECONDS = 2.5
MAX_PER_THREAD = 400


def _run_all(threads: list[threading.Thread]) -> None:
    """Start the threads together; each must be done within 30 s."""
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)


def _hammer(
    url: str, key: str, ca: str, seen: Counter[int], lock: threading.Lock, stop_at: float
) -> None:
    with requests.Session() as session:
        session.trust_env = False
        session.verify = ca
        for _ in range(MAX_PER_THREAD):
            if time.monotonic() >= stop_at:
                return
            response = session.get(
                url, params={"searchPolygon": RING}, headers={"x-api-key": key}, timeout=10
            )
            with lock:
                seen[response.status_code] += 1


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_limits_hold_exactly_under_20_threads_on_2_keys_and_2_workers(
    backend: str, spawn_service: Any, ca_bundle: str, figures: Any
) -> None:
    """``serve --workers 2``. Key A (5/s, ample quota): never more than 5 admitted in any
    one-second window. Key B (200/s, quota 25): exactly 25 calls counted, not one more."""
    service = spawn_service(backend, workers=2)
    keys = {
        "a": service.keys.create("a", "production", per_second=5, quota=100_000),
        "b": service.keys.create("b", "production", per_second=200, quota=25),
    }
    url = service.base_url + "/v1/search"
    seen: dict[str, Counter[int]] = {"a": Counter(), "b": Counter()}
    lock = threading.Lock()
    stop_at = time.monotonic() + SECONDS
    threads = [
        threading.Thread(target=_hammer, args=(url, key, ca_bundle, seen[name], lock, stop_at))
        for name, key in keys.items()
        for _ in range(THREADS_PER_KEY)
    ]
    _run_all(threads)

    log_a = service.keys.requests("a")
    log_b = service.keys.requests("b")
    assert seen["a"][429] > 0 and seen["b"][429] > 0  # the limits were reached
    assert max_in_window(log_a["time"]) <= 5
    assert max_in_window(log_b["time"]) <= 200
    assert int(log_b["counted"].sum()) == 25
    assert service.keys.get("b")["used_lifetime"] == 25
    for name, log in (("a", log_a), ("b", log_b)):
        # what the threads got agrees with the service's log: every 200 was counted
        assert seen[name][200] == int(((log["status"] == 200) & log["counted"]).sum())
        assert set(seen[name]) <= {200, 429}
    sent = sum(sum(c.values()) for c in seen.values())
    figures.add("calls counted", f"load ({backend}, 2 workers): requests sent by 20 threads", sent)
    figures.add(
        "calls counted",
        f"load ({backend}, 2 workers): admitted and counted",
        int(log_a["counted"].sum() + log_b["counted"].sum()),
    )
    figures.add(
        "calls counted",
        f"load ({backend}, 2 workers): refused 429",
        seen["a"][429] + seen["b"][429],
    )
    figures.note(
        f"load ({backend}, 2 workers): key A (5/s) peak "
        f"{max_in_window(log_a['time'])} admitted in a 1-s window; key B quota 25: "
        f"{int(log_b['counted'].sum())} counted of {sum(seen['b'].values())} "
        "sent"
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_exactly_the_quota_across_2_workers_and_20_threads_on_one_key(
    backend: str, spawn_service: Any, ca_bundle: str, figures: Any
) -> None:
    """20 threads on one key (quota 30) against two worker processes: the service's request
    log counts exactly 30 admissions, and the threads saw exactly 30 answers of 200."""
    service = spawn_service(backend, workers=2)
    key = service.keys.create("one", "production", per_second=10_000, quota=30)
    seen: Counter[int] = Counter()
    lock = threading.Lock()
    stop_at = time.monotonic() + SECONDS
    threads = [
        threading.Thread(
            target=_hammer,
            args=(service.base_url + "/v1/search", key, ca_bundle, seen, lock, stop_at),
        )
        for _ in range(20)
    ]
    _run_all(threads)
    log = service.keys.requests("one")
    assert int(log["counted"].sum()) == 30
    assert int(((log["status"] == 200) & log["counted"]).sum()) == seen[200] == 30
    assert seen[429] > 0 and set(seen) == {200, 429}
    assert service.keys.get("one")["used_lifetime"] == 30
    figures.note(
        f"2 workers ({backend}), 20 threads, one key with quota 30: "
        f"{int(log['counted'].sum())} counted of {sum(seen.values())} sent"
    )


# -- restart and crash ---------------------------------------------------------------------


class Served:
    """A ``parcelsearch serve`` subprocess on a free port."""

    def __init__(self, keys: Path, certs: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "parcelsearch.cli",
                "serve",
                "--keys",
                str(keys),
                "--cert-dir",
                str(certs),
                "--port",
                "0",
                "--host",
                "127.0.0.1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        match = re.match(r"serving (https://\S+) ", line)
        assert match, f"no 'serving' line: {line!r}"
        self.base_url = match[1]

    def get(self, key: str, ca: Path) -> int:
        response = requests.get(
            self.base_url + "/v1/search",
            params={"searchPolygon": RING},
            headers={"x-api-key": key},
            verify=str(ca),
            timeout=10,
        )
        return response.status_code

    def stop(self, sig: int) -> None:
        os.kill(self.proc.pid, sig)
        self.proc.wait(timeout=30)
        if self.proc.stdout:
            self.proc.stdout.close()


def _used(keys_file: Path) -> int:
    store = KeyStore(keys_file)
    try:
        return int(store.get("survivor")["used_lifetime"])
    finally:
        store.close()


@pytest.mark.slow
def test_counters_survive_restart_and_crash(tmp_path: Path, figures: Any) -> None:
    keys_file, certs = tmp_path / "keys.sqlite", tmp_path / "certs"
    store = KeyStore(keys_file)
    key = store.create("survivor", key_type="demo", per_second=50, quota=7)
    store.close()
    ca = certs / "ca.pem"
    statuses: list[int] = []

    first = Served(keys_file, certs)
    try:
        statuses += [first.get(key, ca) for _ in range(3)]
    finally:
        first.stop(signal.SIGKILL)  # crash: no shutdown of any kind
    assert first.proc.returncode == -signal.SIGKILL
    assert _used(keys_file) == 3

    second = Served(keys_file, certs)
    try:
        statuses += [second.get(key, ca) for _ in range(2)]
    finally:
        second.stop(signal.SIGTERM)  # orderly restart
    assert _used(keys_file) == 5

    third = Served(keys_file, certs)
    try:
        statuses += [third.get(key, ca) for _ in range(4)]  # 2 left of 7, then refusals
    finally:
        third.stop(signal.SIGKILL)
    assert statuses == [200] * 7 + [429, 429]
    assert _used(keys_file) == 7
    after = KeyStore(keys_file)
    log = after.requests("survivor")
    after.close()
    assert len(log) == 9 and int(log["counted"].sum()) == 7
    figures.add("faults injected", "SIGKILL of `parcelsearch serve`", 2)
    figures.add("calls counted", "restart/crash: calls counted across 3 server lives", 7)
