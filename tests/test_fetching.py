"""The run's spending: the budget enforced in one place, reservations settled or refunded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from _threads import race
from requests.adapters import BaseAdapter

from parcelsearch._fetch.client import Client
from parcelsearch._run.fetching import PageSpend, Run, Stopped
from parcelsearch._run.options import SearchOptions
from parcelsearch.errors import BudgetExhaustedError, QuotaWouldExceedError
from parcelsearch.stores.local.ledger import Ledger, Quota
from parcelsearch.stores.spending import LocalSpending, MemorySpending

FP = "0123456789abcdef"
GID = "0123456789abcdef0"


class _Client:
    base_url = "https://fake.test"
    fingerprint = FP
    timeout = 1.0
    response_deadline = 1.0


def _run(spending: object, **options: object) -> Run:
    return Run(_Client(), spending, SearchOptions(**options), path="/v1/search")  # type: ignore[arg-type]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_sixteen_threads_never_pass_the_budget(store: str, tmp_path: Path) -> None:
    spending = MemorySpending(FP) if store == "memory" else \
        LocalSpending(FP, Ledger(tmp_path / "l.sqlite"), None)
    run = _run(spending, budget=37, quota=Quota(1000, "month"))
    granted, refused = race(lambda _: run.reserve(), BudgetExhaustedError)
    assert (granted, refused) == (37, 160 - 37)
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


class _SpikeThenOk(BaseAdapter):
    """A 429 spike arrest with Retry-After: 1, then a page."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def send(self, request: Any, **kwargs: Any) -> requests.Response:
        self.sent += 1
        response = requests.Response()
        response.url, response.request = request.url, request
        if self.sent == 1:
            response.status_code = 429
            response.headers["Retry-After"] = "1"
            response._content = b'{"status":"ERROR","messages":["Spike arrest violation."]}'
        else:
            response.status_code = 200
            response._content = json.dumps({"status": "OK", "page": 1, "rows": 1, "pages": 1,
                                            "dataRows": 1, "data": [GID]}).encode()
        response.raw = _Raw(response.status_code, response.headers)
        return response

    def close(self) -> None:
        pass


class _Raw:
    def __init__(self, status: int, headers: Any) -> None:
        self.status, self.headers = status, headers

    def get_redirect_location(self) -> bool:
        return False


class _Pauses(MemorySpending):
    def __init__(self) -> None:
        super().__init__(FP)
        self.pauses: list[float] = []

    def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)


def test_a_spike_arrest_pauses_the_key_and_is_refunded(tmp_path: Path) -> None:
    session = requests.Session()
    session.mount("https://", _SpikeThenOk())
    client = Client("k" * 20, "https://fake.test", session=session, cache_dir=tmp_path)
    spending = _Pauses()
    run = Run(client, spending, SearchOptions(), path="/v1/search")
    page = client.search_page("[[0,0],[1,0],[1,1],[0,0]]", 1, spend=PageSpend(run))
    assert page.data == (GID,)
    assert spending.pauses == [1.0]  # every member of the key is told to wait
    assert list(spending.reservations.values()) == [True]  # the 429 refunded, the 200 settled


def test_a_piece_state_changes_only_through_its_own_transitions() -> None:
    """No code of the run writes a PieceState's fields but PieceState's own methods (one
    owner per fact): no assignment to one of its fields through the names the run gives a
    piece's state (``state``, ``s``) outside the class."""
    import ast
    import dataclasses
    from pathlib import Path

    import parcelsearch
    from parcelsearch._run.fetching import PieceState

    names = {f.name for f in dataclasses.fields(PieceState)}
    written = []
    for path in sorted((Path(parcelsearch.__file__).parent / "_run").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner = {id(node) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
                 and cls.name == "PieceState" for node in ast.walk(cls)}
        for node in ast.walk(tree):
            if id(node) in owner or not isinstance(node, ast.Assign | ast.AugAssign):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Subscript):
                        part = part.value
                    if isinstance(part, ast.Attribute) and part.attr in names and \
                            isinstance(part.value, ast.Name) and part.value.id in ("state", "s"):
                        written.append(f"{path.name}:{node.lineno}")
    assert written == []
