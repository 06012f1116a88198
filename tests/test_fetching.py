"""The run's spending: the budget enforced in one place, reservations settled or refunded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
from _memory_spending import MemorySpending
from _threads import race
from requests.adapters import BaseAdapter

from parcelsearch._run.fetching import Run, Stopped
from parcelsearch._run.options import SearchOptions
from parcelsearch.client import Client
from parcelsearch.errors import BudgetExhaustedError, QuotaWouldExceedError
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.local.spending import LocalSpending
from parcelsearch.stores.quotas import Quota

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
    spending = (
        MemorySpending(FP)
        if store == "memory"
        else LocalSpending(FP, Ledger(tmp_path / "l.sqlite"), None)
    )
    run = _run(spending, budget=37, quota=Quota(1000, "month"))
    granted, refused = race(lambda _: run.reserve(), BudgetExhaustedError)
    assert (granted, refused) == (37, 160 - 37)
    assert run.calls == 37
    spent = (
        spending.spent
        if isinstance(spending, MemorySpending)
        else Ledger(tmp_path / "l.sqlite").usage(FP).lifetime
    )
    assert spent == 37


def test_the_budget_message_says_how_to_resume() -> None:
    run = _run(MemorySpending(FP), budget=2)
    run.reserve()
    run.reserve()
    with pytest.raises(BudgetExhaustedError, match="budget of 2 calls.*search again") as caught:
        run.reserve()
    assert (caught.value.spent, caught.value.budget) == (2, 2)


def test_threads_never_pass_what_was_chosen_at_the_price() -> None:
    """The figure chosen at the decision point caps the run as a budget does: retries,
    pieces read again or split included, no call is reserved past it."""
    spending = MemorySpending(FP)
    run = _run(spending)
    run.chosen = 23
    granted, refused = race(lambda _: run.reserve(), BudgetExhaustedError)
    assert (granted, refused) == (23, 160 - 23)
    assert run.calls == spending.spent == 23
    with pytest.raises(BudgetExhaustedError, match="nothing is spent past what you chose"):
        run.reserve()


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
    spend = run.spend_hook()
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
            response._content = json.dumps(
                {"status": "OK", "page": 1, "rows": 1, "pages": 1, "dataRows": 1, "data": [GID]}
            ).encode()
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
    page = client.search_page("[[0,0],[1,0],[1,1],[0,0]]", 1, spend=run.spend_hook())
    assert page.data == (GID,)
    assert spending.pauses == [1.0]  # every member of the key is told to wait
    assert list(spending.reservations.values()) == [True]  # the 429 refunded, the 200 settled


def test_a_piece_state_changes_only_through_its_own_transitions() -> None:
    """A PieceState guards its own fields (one owner per fact): assigning one from outside,
    or a page into its data, is refused; its transitions change them."""
    import dataclasses

    from shapely.geometry import box

    from parcelsearch import _wire as wire
    from parcelsearch._fetch.page import Page
    from parcelsearch._run.piece_state import PieceState
    from parcelsearch.planning.plans import Piece

    ring = box(0, 0, 1, 1)
    state = PieceState(Piece("a", 0, wire.ring_json(ring.exterior.coords), ring, 100))
    for name, value in [
        ("calls", 3),
        ("pages", 2),
        ("failure", "no"),
        ("split", True),
        ("data", {}),
    ]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(state, name, value)
    with pytest.raises(TypeError):
        state.data[1] = (GID,)  # type: ignore[index]
    assert (state.calls, state.pages, dict(state.data)) == (0, None, {})

    page = Page(
        request_key="k", polygon_json="[]", page=1, rows=150, pages=2, data_rows=1, data=(GID,)
    )
    state.fetched(1)
    state.counted(page)
    assert state.keep(1, page) and not state.keep(1, page)
    assert (state.calls, state.rows, state.pages, dict(state.data)) == (1, 150, 2, {1: (GID,)})
    assert state.missing() == [2]
    state.reset()
    assert (state.pages, dict(state.data), state.refetches) == (None, {}, 1)


# -- the frontier gates: which requests wait, and which goes first ----------------------------


def _gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Run, list[Any]]:
    """A run of a real client (no call made) and three pieces: 5, 3 and 1 pages."""
    from shapely.geometry import box

    from parcelsearch import _wire as wire
    from parcelsearch._run.piece_state import PieceState
    from parcelsearch.planning.plans import Piece

    monkeypatch.delenv("PARCELSEARCH_RESULT_WINDOW", raising=False)
    client = Client(api_key="k", base_url="https://fake.test", cache_dir=tmp_path)
    run = Run(client, MemorySpending(FP), SearchOptions(), path="/v1/search")
    states = []
    for number, (pages, size) in enumerate([(5, 1.0), (3, 0.5), (1, 0.25)]):
        ring = box(number, 0, number + size, size)
        piece = Piece("a", number, wire.ring_json(ring.exterior.coords), ring, 100)
        states.append(PieceState(piece, rows=pages * 100, pages=pages))
    return run, states


def test_pages_deeper_or_lines_longer_than_any_answered_are_beyond(tmp_path, monkeypatch) -> None:
    run, (five, three, one) = _gated(tmp_path, monkeypatch)
    run.answered(one, 1)
    assert not run.beyond(one, 1)
    assert run.beyond(five, 2) and run.beyond(three, 3)  # deeper than page 1
    # the deepest goes first: answered, it opens the gate for every page up to it
    assert run.first_beyond([(three, 2), (five, 5), (three, 3), (five, 2)]) == (five, 5)
    run.answered(five, 5)
    assert not run.beyond(three, 3) and not run.beyond(five, 4)
    assert run.line(five, 10) == run.line(five, 1) + 1  # the page's digits


def test_a_line_longer_than_any_answered_is_beyond(tmp_path, monkeypatch) -> None:
    from shapely.geometry import Point

    from parcelsearch import _wire as wire
    from parcelsearch._run.piece_state import PieceState
    from parcelsearch.planning.plans import Piece

    run, (five, three, one) = _gated(tmp_path, monkeypatch)
    disc = Point(9, 9).buffer(0.5, quad_segs=32)  # 129 vertices: a long line
    long_ = PieceState(Piece("b", 0, wire.ring_json(disc.exterior.coords), disc, 100))
    assert run.line(long_, 1) > run.line(one, 1) + 1000
    run.answered(one, 1)
    assert run.beyond(long_, 1) and not run.beyond(one, 1)
    assert run.first_beyond([(three, 1), (long_, 1)]) == (long_, 1)  # the longest first
    run.answered(long_, 1)
    assert not run.beyond(three, 1) and not run.beyond(five, 1)
    run.client.learn(max_request_bytes=1024)  # learnt: a line over it is not sent, not gated
    run.client.max_request_bytes = 1024
    fresh = PieceState(
        Piece("b", 1, wire.ring_json(disc.exterior.coords)[:-1] + ",[9,9]]", disc, 100)
    )
    assert run.line(fresh, 1) > 1024 and not run.beyond(fresh, 1)


def test_a_window_stated_is_exact_one_not_stated_a_bound(tmp_path, monkeypatch) -> None:
    run, (five, three, one) = _gated(tmp_path, monkeypatch)
    run.answered(one, 1)
    run.client.facts.learn_window(5)  # refused at 5, no window stated: at most 4
    run.window_refused(5)
    assert run.window_bound and run.client.result_window == 4
    assert run.beyond(three, 2)  # up to the bound: still gated …
    assert not run.beyond(five, 2)  # … a piece deeper than it is split, not sent
    # … shallowest first, of the piece with the fewest pages
    assert run.first_beyond([(three, 3), (three, 2)]) == (three, 2)
    run.answered(three, 2)
    run.client.facts.learn_window(3)  # refused at the page after the deepest answered: exact
    run.window_refused(3)
    assert not run.window_bound and run.client.result_window == 2
    assert not run.beyond(three, 2)
    fresh, (five, three, one) = _gated(tmp_path / "fresh", monkeypatch)
    fresh.answered(one, 1)
    fresh.client.facts.learn_window(5, stated=2)  # stated: exact at once
    fresh.window_refused(5)
    assert not fresh.window_bound and not fresh.beyond(three, 2)
