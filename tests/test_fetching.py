"""The run's spending: the budget enforced in one place, reservations settled or refunded."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from parcelsearch.errors import BudgetExhaustedError, QuotaWouldExceedError
from parcelsearch.fetching import PageSpend, Run, Stopped
from parcelsearch.ledger import Ledger, Quota
from parcelsearch.search_options import SearchOptions
from parcelsearch.spending import LocalSpending, MemorySpending

FP = "0123456789abcdef"


class _Client:
    base_url = "https://fake.test"
    fingerprint = FP
    timeout = 1.0


def _run(spending: object, **options: object) -> Run:
    return Run(_Client(), spending, SearchOptions(**options), path="/v1/search")  # type: ignore[arg-type]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_sixteen_threads_never_pass_the_budget(store: str, tmp_path: Path) -> None:
    spending = MemorySpending(FP) if store == "memory" else \
        LocalSpending(FP, Ledger(tmp_path / "l.sqlite"), None)
    run = _run(spending, budget=37, quota=Quota(1000, "month"))
    granted: list[int] = []
    refused: list[int] = []
    lock = threading.Lock()

    def hammer() -> None:
        for _ in range(10):
            try:
                run.reserve()
            except BudgetExhaustedError:
                with lock:
                    refused.append(1)
            else:
                with lock:
                    granted.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(granted), len(refused)) == (37, 160 - 37)
    assert run.calls == 37
    spent = spending.spent if isinstance(spending, MemorySpending) else \
        Ledger(tmp_path / "l.sqlite").usage(FP).lifetime
    assert spent == 37


def test_the_budget_message_says_how_to_resume() -> None:
    run = _run(MemorySpending(FP), budget=2)
    run.reserve()
    run.reserve()
    with pytest.raises(BudgetExhaustedError, match="budget of 2 calls.*search again") as caught:
        run.reserve()
    assert (caught.value.spent, caught.value.budget) == (2, 2)


def test_a_quota_refusal_counts_nothing() -> None:
    spending = MemorySpending(FP)
    run = _run(spending, quota=Quota(1, "lifetime"))
    run.reserve()
    with pytest.raises(QuotaWouldExceedError, match="no calls left"):
        run.reserve()
    assert run.calls == spending.spent == 1
    assert run.allowance() == (0, "quota")


def test_page_spend_settles_what_was_sent_and_refunds_what_was_not() -> None:
    spending = MemorySpending(FP)
    run = _run(spending)
    spend = PageSpend(run)
    spend.reserve()
    spend.settle()
    spend.reserve()
    spend.refund()  # e.g. a spike arrest: not counted
    spend.settle()  # nothing open: nothing happens
    assert spend.calls == 1 and run.calls == 1
    assert list(spending.reservations.values()) == [True]


def test_nothing_is_reserved_once_the_run_stops() -> None:
    spending = MemorySpending(FP)
    run = _run(spending)
    run.stop.set()
    with pytest.raises(Stopped):
        run.reserve()
    assert spending.spent == 0
