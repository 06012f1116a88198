"""The search pipeline driven through an injected client: phases, failures, back-off, stops.

The client here is a stand-in that answers from a small in-memory service whose data can be
changed mid-run and whose answers can fail on cue — faults the real service does not make on
demand. The same paths run against the real service in ``tests/reliability/test_spending.py``.
"""

from __future__ import annotations

import _thread
import hashlib
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import geopandas as gpd
import pytest
import requests
from requests.adapters import BaseAdapter
from shapely.geometry import MultiPolygon, Polygon, box

import parcelsearch
from parcelsearch import _wire
from parcelsearch._fetch.page import Page
from parcelsearch._fetch.vendor_profile import VendorProfile
from parcelsearch._run.search_run import search
from parcelsearch.client import Client
from parcelsearch.errors import (
    QuotaWouldExceedError,
    SearchInterrupted,
    ServiceFailureError,
)
from parcelsearch.notices import PartialResultWarning
from parcelsearch.stores.local.cache import ResponseCache

BASE = "https://fake.test"


def _ids(ring: str, rows: int, page: int, version: int) -> tuple[str, ...]:
    first = 100 * (page - 1)
    return tuple(
        hashlib.sha256(f"{ring}|{version}|{i}".encode()).hexdigest()[:17]
        for i in range(first, min(rows, first + 100))
    )


class FakeClient:
    """Answers ``search_page`` from ``rows`` per ring; ``fail`` and ``change`` act on cue."""

    base_url = BASE
    fingerprint = "0123456789abcdef"
    timeout = 2.0
    response_deadline = 2.0
    max_request_bytes = 7168  # the request-line limit searches plan to
    result_window = None  # no result window: every page a piece has is asked
    max_request_bytes_source = "assumed"  # no line refused: none learnt
    page_base = 1
    page_size = 100  # its pages hold 100 ids (the survey reads rows at that size)
    tell = None  # facts learnt are warned (it learns none)
    heard = None  # a run listens to its answers' headers (it sends none)

    def learn(self, **observed: Any) -> None:
        """What a run learns of the vendor, kept on :attr:`vendor` (no file)."""
        for name, value in observed.items():
            setattr(self.vendor, name, value)

    def line_bytes(self, polygon_json: str, page: int, *, path: str) -> int:
        """The request line the fetch loop's frontier gates measure."""
        return _wire.request_line_bytes(_wire.search_target(path, polygon_json, page))

    def __init__(self, rows: dict[str, int], cache_dir: Path) -> None:
        self.rows = dict(rows)
        self.version = Counter[str]()
        self.cache_dir = cache_dir
        self.log: list[tuple[str, int]] = []
        self.fail: Callable[[str, int], Exception | None] = lambda ring, page: None
        self.lock = threading.Lock()
        self.vendor = VendorProfile(BASE)  # what is known of it: nothing yet

    def search_page(
        self,
        polygon_json: str,
        page: int,
        *,
        path: str,
        spend: Any = None,
        cancel: threading.Event | None = None,
        **_: Any,
    ) -> Page:
        if spend is not None:
            spend.reserve()
        with self.lock:
            self.log.append((polygon_json, page))
            error = self.fail(polygon_json, page)
            rows, version = self.rows[polygon_json], self.version[polygon_json]
        if error is not None:
            raise error
        data = _ids(polygon_json, rows, page, version)
        return Page(
            request_key=_wire.request_key(BASE, path, polygon_json, page),
            polygon_json=polygon_json,
            page=page,
            rows=rows,
            pages=-(-rows // 100),
            data_rows=len(data),
            data=data,
            base_url=BASE,
            path=path,
        )


@pytest.fixture
def areas() -> gpd.GeoDataFrame:
    cells = [box(-97.0 + 0.01 * i, 32.0, -96.995 + 0.01 * i, 32.005) for i in range(3)]
    return gpd.GeoDataFrame({"area_id": ["a", "b", "c"]}, geometry=cells, crs="EPSG:4326")


@pytest.fixture
def fake(areas: gpd.GeoDataFrame, tmp_path: Path) -> FakeClient:
    rings = [p.polygon_json for p in parcelsearch.plan(areas, id_column="area_id").pieces]
    return FakeClient(dict(zip(rings, (250, 30, 120), strict=True)), tmp_path / "cache")


def _run(areas: gpd.GeoDataFrame, client: Any, **kwargs: Any) -> Any:
    return search(areas, client=client, id_column="area_id", progress=False, ledger=False, **kwargs)


def test_page_one_of_every_piece_comes_first(areas: gpd.GeoDataFrame, fake: FakeClient) -> None:
    result = _run(areas, fake, workers=1)
    pages = [page for _, page in fake.log]
    assert pages[:3] == [1, 1, 1] and sorted(pages[3:]) == [2, 2, 3]
    assert result.complete and result.calls == 6 and len(result.ids) == 400


def test_a_budget_that_cannot_finish_stops_before_phase_two(
    areas: gpd.GeoDataFrame, fake: FakeClient
) -> None:
    with pytest.raises(QuotaWouldExceedError, match="needs exactly 3 more calls") as caught:
        _run(areas, fake, budget=4)
    assert [page for _, page in fake.log] == [1, 1, 1]  # nothing of phase 2 was spent
    assert caught.value.result.calls == 3 and not caught.value.result.complete
    assert "budget=6" in str(caught.value)  # the exact budget that finishes


def test_allow_partial_finishes_the_cheapest_whole_areas(
    areas: gpd.GeoDataFrame, fake: FakeClient
) -> None:
    with pytest.warns(PartialResultWarning, match="2 of 3 areas are complete") as told:
        partial = _run(areas, fake, budget=4, allow_partial=True)  # returned, not raised
    assert not partial.complete
    assert "1 area is not complete, at least 2 calls missing" in str(told[0].message)
    assert "budget=2 or more" in str(told[0].message)  # how to resume
    assert partial.areas_complete == ["b", "c"]  # c costs 1 more page, a would cost 2
    assert partial.summary()["complete"].to_dict() == {"a": False, "b": True, "c": True}
    assert len(fake.log) == 4  # three page 1s, then c's page 2: the budget, exactly


def test_a_failure_stops_the_run_and_keeps_what_was_fetched(
    areas: gpd.GeoDataFrame, fake: FakeClient
) -> None:
    fake.fail = lambda ring, page: (
        ServiceFailureError("HTTP 503", status=503) if page == 3 else None
    )
    with pytest.raises(ServiceFailureError) as caught:
        _run(areas, fake, workers=1)
    partial = caught.value.result
    assert partial is not None and "b" in partial.areas_complete
    assert fake.log[-1][1] == 3  # nothing was started after the failure (one worker)
    cache = ResponseCache(fake.cache_dir)
    assert len(cache) == len(fake.log) - 1  # every page delivered is cached, the failed not
    again = _run(areas, fake_fixed(fake))
    # the deepest page crosses the frontier first (alone): a's page 3 failed before a's
    # page 2 and c's page 2 were asked; the rerun asks those three, the rest cached
    assert again.calls == 3 and again.complete


def fake_fixed(fake: FakeClient) -> FakeClient:
    fake.fail = lambda ring, page: None
    return fake


def test_changed_answers_refetch_only_that_piece(areas: gpd.GeoDataFrame, fake: FakeClient) -> None:
    ring_a = next(ring for ring, rows in fake.rows.items() if rows == 250)

    def change_after_page_one(ring: str, page: int) -> None:
        if ring == ring_a and page == 2 and fake.version[ring] == 0:
            fake.rows[ring] = 260  # the data change between page 1 and page 2
            fake.version[ring] += 1
        return None

    fake.fail = change_after_page_one  # type: ignore[assignment]
    result = _run(areas, fake, workers=1)
    assert result.refetched_pieces == 1 and result.complete
    assert sorted(page for ring, page in fake.log if ring == ring_a) == [1, 1, 2, 2, 3, 3]
    assert sorted(page for ring, page in fake.log if ring != ring_a) == [1, 1, 2]  # untouched
    mine = result.ids[result.ids["area_id"] == "a"]["group_id"]
    assert set(mine) == set(
        _ids(ring_a, 260, 1, 1) + _ids(ring_a, 260, 2, 1) + _ids(ring_a, 260, 3, 1)
    )


def test_a_cached_page_one_older_than_the_rest_is_refetched(
    areas: gpd.GeoDataFrame, fake: FakeClient
) -> None:
    ring_a = next(ring for ring, rows in fake.rows.items() if rows == 250)
    with pytest.raises(QuotaWouldExceedError):
        _run(areas, fake, budget=3)  # caches the three page 1s only
    fake.rows[ring_a] = 305
    fake.version[ring_a] += 1
    result = _run(areas, fake)
    assert result.refetched_pieces == 1 and result.complete
    assert len(result.ids[result.ids["area_id"] == "a"]) == 305


class _SlowLimitAdapter(BaseAdapter):
    """Every request answers 429 spike arrest with a long Retry-After (a real back-off)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.lock = threading.Lock()

    def send(self, request: Any, **kwargs: Any) -> requests.Response:
        with self.lock:
            self.sent += 1
        response = requests.Response()
        response.status_code = 429
        response.headers["Retry-After"] = "30"
        response._content = b'{"status":"ERROR","messages":["Spike arrest violation."]}'
        response.url = request.url
        response.request = request
        return response

    def close(self) -> None:
        pass


def test_an_interrupt_wakes_back_off_sleeps_and_starts_nothing(
    areas: gpd.GeoDataFrame, tmp_path: Path
) -> None:
    session = requests.Session()
    adapter = _SlowLimitAdapter()
    session.mount("https://", adapter)
    client = Client("k" * 20, BASE, session=session, retries=3, cache_dir=tmp_path / "cache")

    def interrupt_once_all_sleep() -> None:
        while True:
            with adapter.lock:
                if adapter.sent >= 1:  # the run's first call goes alone, then sleeps 30 s
                    break
            threading.Event().wait(0.01)
        _thread.interrupt_main()

    threading.Thread(target=interrupt_once_all_sleep, daemon=True).start()
    before = {t for t in threading.enumerate() if t.name.startswith("parcelsearch")}
    with pytest.raises(SearchInterrupted) as caught:
        _run(areas, client)
    assert adapter.sent == 1  # the first page 1, alone, then asleep for Retry-After: 30 s
    workers = [
        t for t in threading.enumerate() if t.name.startswith("parcelsearch") and t not in before
    ]
    for worker in workers:
        worker.join(5)
    assert not any(w.is_alive() for w in workers)  # every sleeper woke and left
    assert adapter.sent == 1 and caught.value.result.calls == 0  # refunded: never counted


def test_any_spending_runs_the_same_search(areas: gpd.GeoDataFrame, fake: FakeClient) -> None:
    from _memory_spending import MemorySpending

    from parcelsearch._run.options import SearchOptions
    from parcelsearch._run.search_run import search_with

    spending = MemorySpending(fake.fingerprint)
    made = parcelsearch.plan(areas, id_column="area_id")
    options = SearchOptions(
        id_column="area_id", progress=False, quota=parcelsearch.Quota(10, "lifetime")
    )
    result = search_with(made, fake, spending, options)  # type: ignore[arg-type]
    assert result.complete and result.calls == 6 == spending.spent == len(fake.log)
    # No page store: page 1 of each piece is paid again, then 1 call is left for 3 pages.
    with pytest.raises(QuotaWouldExceedError, match="needs exactly 3 more calls.*has 1 left"):
        search_with(made, fake, spending, options)  # type: ignore[arg-type]
    assert spending.spent == 9


@pytest.mark.parametrize("match", ["representative-point", "unknown"])
def test_search_without_connectors_sends_each_island_its_own_piece(
    tmp_path: Path, match: str
) -> None:
    """Islands share a piece only with connectors under the point rule; the rule searched
    with is the result's metadata."""
    islands = MultiPolygon([box(-97.0, 32.0, -96.995, 32.005), box(-96.99, 32.0, -96.985, 32.005)])
    areas = gpd.GeoDataFrame({"area_id": ["isles"]}, geometry=[islands], crs="EPSG:4326")
    joined = parcelsearch.plan(areas, id_column="area_id", match=match)
    strict = parcelsearch.plan(areas, id_column="area_id", connectors=False)
    assert len(joined.pieces) == (1 if match == "representative-point" else 2)
    assert len(strict.pieces) == 2
    rings = {p.polygon_json: 10 for p in [*joined.pieces, *strict.pieces]}
    for connectors, made in ((True, joined), (False, strict)):
        client = FakeClient(rings, tmp_path / f"cache-{connectors}")
        result = _run(areas, client, connectors=connectors, match=match)
        assert sorted(ring for ring, _ in client.log) == sorted(p.polygon_json for p in made.pieces)
        assert result.plan.connectors is connectors
        assert result.metadata["match"] == match == result.plan.match


def test_a_refusal_of_large_areas_says_how_to_ask_for_a_tolerance(tmp_path: Path) -> None:
    """Refused before spending, a search of areas over SUGGEST_AT_ONCE_UP_TO vertices says
    the calls it needs at once and how to find a tolerance that fits, rather than covering
    and tiling other tolerances (which would cost more than the plan did); small areas are
    named a tolerance at once."""
    import numpy as np

    from parcelsearch.planning.plans import SUGGEST_AT_ONCE_UP_TO

    angles = np.linspace(0, 2 * np.pi, SUGGEST_AT_ONCE_UP_TO + 500, endpoint=False)
    radii = 0.01 * (1 + 0.3 * np.random.default_rng(1).random(len(angles)))
    star = Polygon(
        np.column_stack([-97.3 + radii * np.cos(angles), 32.75 + radii * np.sin(angles)])
    )
    areas = gpd.GeoDataFrame({"area_id": ["star"]}, geometry=[star], crs="EPSG:4326")
    made = parcelsearch.plan(areas, id_column="area_id")
    assert made.min_calls > 1
    client = FakeClient({p.polygon_json: 10 for p in made.pieces}, tmp_path / "cache")
    with pytest.raises(QuotaWouldExceedError) as caught:
        _run(areas, client, budget=made.min_calls - 1)
    text = str(caught.value)
    assert f"needs at least {made.min_calls} calls" in text and "Try tolerance" not in text
    assert (
        "Find the smallest tolerance whose plan fits with "
        f"parcelsearch.suggest_tolerance(plan, {made.min_calls - 1})."
    ) in text
    assert not client.log  # nothing spent
    assert (
        "Find the smallest tolerance whose plan fits with `parcelsearch plan AREAS "
        f"--max-calls {made.min_calls - 1}`."
    ) in caught.value.render("cli")
