"""Claims on pages across processes sharing a cache folder (stores/local/claims.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from parcelsearch._fetch.pacing import Cancelled
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.claims import PageClaims
from parcelsearch.stores.local.spending import LocalSpending

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from parcelsearch.stores.local.claims import PageClaims
    claims = PageClaims(Path(sys.argv[1]))
    print(claims.take(sys.argv[2]), flush=True)
    time.sleep(60)
    """
)


def _holder(folder: Path, key: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder), key], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "True"
    return proc


def test_a_page_claimed_by_another_process_is_not_taken_until_it_dies(tmp_path: Path) -> None:
    claims = PageClaims(tmp_path / "claims")
    proc = _holder(tmp_path / "claims", "page-a")
    try:
        assert claims.take("page-a") is False  # held by the other process
        assert claims.take("page-b") is True  # another page is free
        os.kill(proc.pid, signal.SIGKILL)  # the kernel drops a killed holder's lock
        proc.communicate(timeout=30)
        assert claims.take("page-a") is True  # taken over
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
    claims.release_all()
    assert claims.held() == 0
    assert list((tmp_path / "claims").iterdir()) == []  # released claims leave no file


def test_a_claim_is_exclusive_between_threads_too(tmp_path: Path) -> None:
    claims = PageClaims(tmp_path)
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def grab() -> None:
        barrier.wait()
        results.append(PageClaims(tmp_path).take("same"))

    threads = [threading.Thread(target=grab) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 1
    assert claims.take("same") is False


def test_a_waiting_claim_stops_with_the_run(tmp_path: Path) -> None:
    spending = LocalSpending("0" * 16, None, ResponseCache(tmp_path))
    proc = _holder(tmp_path / "claims", "page-a")
    try:
        stop = threading.Event()
        stop.set()
        with pytest.raises(Cancelled, match="another process"):
            spending.claim("page-a", None, stop)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert spending.claim("page-a", None, threading.Event()) is None  # ours to fetch now
    spending.abandon("page-a")
    assert spending.claims is not None and spending.claims.held() == 0


def test_a_claim_held_too_long_is_fetched_here_after_all(tmp_path: Path) -> None:
    """A holder frozen (alive, never keeping the page) does not stall a run forever."""
    spending = LocalSpending("0" * 16, None, ResponseCache(tmp_path))
    spending.claim_patience = 0.2
    proc = _holder(tmp_path / "claims", "page-a")
    try:
        assert spending.claim("page-a", None, threading.Event()) is None  # fetch it here
    finally:
        proc.kill()
        proc.communicate(timeout=30)


def test_a_price_waits_for_a_page_another_process_is_fetching(tmp_path: Path) -> None:
    """``cached`` (the read that prices a run) does not count a page claimed elsewhere as
    missing until its holder lets go: the price never includes a page someone else pays."""
    spending = LocalSpending("0" * 16, None, ResponseCache(tmp_path))
    assert spending.claims is not None and spending.claims.busy("page-a") is False
    proc = _holder(tmp_path / "claims", "page-a")
    assert spending.claims.busy("page-a") is True
    let_go, killed = threading.Event(), threading.Event()

    def kill_later() -> None:
        if not let_go.wait(0.3):  # still waiting, as it should be
            killed.set()
            proc.kill()

    killer = threading.Thread(target=kill_later)
    killer.start()
    try:
        assert spending.cached("page-a", None) is None
        assert killed.is_set()  # it returned only once the holder was gone
    finally:
        let_go.set()
        killer.join()
        proc.kill()
        proc.communicate(timeout=30)
    assert spending.claims.busy("page-a") is False
