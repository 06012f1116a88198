"""The client against the real reference service, over HTTPS on 127.0.0.1.

Paging on real data, every error status the service can be made to give, pacing under the
spike arrest, the request-line bytes the 414 guard measures, and the key kept out of every text.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _spend_hooks import Reserving
from _spikes import early_admissions, spike_refusals

from parcelsearch import _wire
from parcelsearch._fetch.pacing import DEFAULT_MARGIN, FIRST_CALL_ALLOWANCE
from parcelsearch.client import Client, RetryPolicy
from parcelsearch.errors import (
    AuthenticationError,
    BadPolygonError,
    PageGoneError,
    ParcelSearchError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTooLargeError,
    ServiceError,
)
from parcelsearch.market_list import markets
from parcelsearch.settings import MAX_REQUEST_LINE_BYTES
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch_service import synth
from parcelsearch_service.server import RunningService

#: A square with no parcels in it (near Marfa, outside every demo market).
EMPTY_RING = _wire.ring_json(
    [(-104.02, 30.30), (-104.01, 30.30), (-104.01, 30.31), (-104.02, 30.31), (-104.02, 30.30)]
)


def counter() -> tuple[list[int], Callable[[], None]]:
    calls: list[int] = []
    return calls, lambda: calls.append(1)


def assert_key_absent(key: str, *texts: object) -> None:
    for text in texts:
        assert key not in str(text) and key not in repr(text)


def _line(ring: str) -> int:
    return _wire.request_line_bytes(_wire.search_target("/v1/search", ring, 1))


def ring_of_request_line(length: int) -> str:
    """A valid, empty ring whose search request line (page 1) is exactly ``length`` bytes.

    The largest circle that fits with room to spare, then one latitude padded with
    trailing zeros (the same number, one byte each).
    """

    def circle(n: int) -> str:
        points = [
            (
                -104.015 + 0.004 * math.cos(2 * math.pi * k / n),
                30.305 + 0.004 * math.sin(2 * math.pi * k / n),
            )
            for k in range(n)
        ]
        return _wire.ring_json([*points, points[0]])

    n = 4
    while _line(circle(n + 1)) <= length - 2:
        n += 1
    first, _, rest = circle(n).partition("],[")
    vertex, _, tail = rest.partition("]")
    lon, lat = vertex.split(",")
    lat = lat if "." in lat else lat + ".0"
    base = f"{first}],[{lon},{lat}]{tail}"
    return f"{first}],[{lon},{lat}{'0' * (length - _line(base))}]{tail}"


# -- paging on real data ------------------------------------------------------------------


def test_paging_the_276_example(
    service_276: RunningService,
    example_276: synth.Example,
    ca_bundle: str,
    request: pytest.FixtureRequest,
) -> None:
    name = f"client-276-{request.node.name}"
    key = service_276.keys.create(name, "production", quota=1000)
    ring = _wire.ring_json(example_276.ring)
    with Client(key, service_276.base_url, ca_bundle) as client:
        pages = [client.search_page(ring, k) for k in (1, 2, 3)]
    assert [(p.rows, p.pages, p.page, p.data_rows) for p in pages] == [
        (276, 3, 1, 100),
        (276, 3, 2, 100),
        (276, 3, 3, 76),
    ]
    assert [gid for p in pages for gid in p.data] == example_276.expected
    log = service_276.keys.requests(name)
    assert log["page"].tolist() == [1, 2, 3] and set(log["status"]) == {200}


def test_every_page_of_a_demo_market(service: RunningService, api_key: str, ca_bundle: str) -> None:
    spec = synth.MARKETS_DEMO[0]
    x, y = spec.lon, spec.lat
    ring = _wire.ring_json(
        [
            (x - 0.01, y - 0.01),
            (x + 0.01, y - 0.01),
            (x + 0.01, y + 0.01),
            (x - 0.01, y + 0.01),
            (x - 0.01, y - 0.01),
        ]
    )
    with Client(api_key, service.base_url, ca_bundle) as client:
        first = client.search_page(ring, 1)
        rest = [client.search_page(ring, k) for k in range(2, first.pages + 1)]
    assert first.pages == math.ceil(first.rows / 100) >= 2
    assert sum(p.data_rows for p in [first, *rest]) == first.rows


def test_empty_result_and_stage_prefix(
    service: RunningService, api_key: str, ca_bundle: str
) -> None:
    with Client(api_key, service.base_url, ca_bundle) as client:
        page = client.search_page(EMPTY_RING, 1, path="/prod/v1/search")
    assert (page.rows, page.pages, page.page, page.data) == (0, 0, 1, ())
    assert page.request_key == _wire.request_key(service.base_url, "/prod/v1/search", EMPTY_RING, 1)


# -- the wire: what the 414 guard measures ------------------------------------------------


@pytest.mark.parametrize(
    ("length", "error"),
    [
        pytest.param(MAX_REQUEST_LINE_BYTES, None, id="at-the-limit"),
        pytest.param(MAX_REQUEST_LINE_BYTES + 1, RequestTooLargeError, id="one-byte-over"),
    ],
)
def test_request_line_bytes_are_what_the_guard_measures(
    service: RunningService,
    make_key: Callable[..., str],
    ca_bundle: str,
    length: int,
    error: type[ServiceError] | None,
) -> None:
    ring = ring_of_request_line(length)
    assert _line(ring) == length
    key = make_key("demo")
    with Client(key, service.base_url, ca_bundle, retries=0) as client:
        if error is None:
            assert client.search_page(ring, 1).rows == 0
        else:
            with pytest.raises(error, match="request line size exceeding 7,168") as caught:
                client.search_page(ring, 1)
            assert caught.value.messages == ["request line size exceeding 7,168"]
            assert_key_absent(key, caught.value)


# -- errors -------------------------------------------------------------------------------


def test_unknown_key(service: RunningService, ca_bundle: str) -> None:
    key = "not-a-real-key-3f9a7c"
    with Client(key, service.base_url, ca_bundle) as client:
        with pytest.raises(AuthenticationError, match="Invalid ApiKey") as caught:
            client.search_page(EMPTY_RING, 1)
    assert (caught.value.status, caught.value.messages) == (401, ["Invalid ApiKey"])
    assert_key_absent(key, caught.value, client)


def test_key_not_enabled_for_search(
    service: RunningService, make_key: Callable[..., str], ca_bundle: str
) -> None:
    key = make_key("production", services=("markets",))
    with Client(key, service.base_url, ca_bundle) as client:
        assert client.markets()
        with pytest.raises(AuthenticationError) as caught:
            client.search_page(EMPTY_RING, 1)
    assert caught.value.messages == ["Invalid ApiKey for given resource"]
    assert_key_absent(key, caught.value)


@pytest.mark.parametrize(
    ("ring", "message"),
    [
        pytest.param("[[0,0],[1,1],[1,0],[0,1],[0,0]]", "self-intersecting", id="bow-tie"),
        pytest.param("[[0,0],[1,0],[1,1],[0,1]]", "ring is not closed", id="unclosed"),
    ],
)
def test_bad_polygon(
    service: RunningService, api_key: str, ca_bundle: str, ring: str, message: str
) -> None:
    with Client(api_key, service.base_url, ca_bundle) as client:
        with pytest.raises(BadPolygonError, match=message) as caught:
            client.search_page(ring, 1)
    assert caught.value.status == 400 and caught.value.messages[0].startswith("searchPolygon")
    assert_key_absent(api_key, caught.value)


def test_page_beyond_the_last(service: RunningService, api_key: str, ca_bundle: str) -> None:
    with Client(api_key, service.base_url, ca_bundle) as client:
        with pytest.raises(PageGoneError, match="has no results"):  # page 1 said so
            client.search_page(EMPTY_RING, 2)


def test_unknown_path_is_404(service: RunningService, api_key: str, ca_bundle: str) -> None:
    with Client(api_key, service.base_url, ca_bundle) as client:
        with pytest.raises(ServiceError) as caught:
            client.search_page(EMPTY_RING, 1, path="/v2/search")
    assert caught.value.status == 404


def test_quota_violation_is_not_retried(
    service: RunningService, make_key: Callable[..., str], ca_bundle: str
) -> None:
    key = make_key("demo", quota=2)
    calls, hook = counter()
    with Client(key, service.base_url, ca_bundle) as client:
        for _ in range(2):
            client.search_page(EMPTY_RING, 1, spend=Reserving(hook))
        with pytest.raises(QuotaExhaustedError) as caught:
            client.search_page(EMPTY_RING, 1, spend=Reserving(hook))
    name = key.name  # type: ignore[attr-defined]
    assert caught.value.messages == [
        f"Rate limit quota violation. Quota limit exceeded. Identifier : {name}"
    ]
    assert len(calls) == 3 == len(service.keys.requests(name))
    assert_key_absent(key, caught.value)


def test_spike_arrest_that_outlasts_no_retries(
    service: RunningService, make_key: Callable[..., str], ca_bundle: str
) -> None:
    key = make_key("production", per_second=2)
    with Client(key, service.base_url, ca_bundle, rate=1000, retries=0) as client:
        with pytest.raises(RateLimitError) as caught:
            for _ in range(3):
                client.search_page(EMPTY_RING, 1)
    assert caught.value.messages == ["Spike arrest violation. Allowed rate : 2ps"]
    assert caught.value.retry_after is not None and caught.value.retry_after >= 1
    assert_key_absent(key, caught.value)


def test_spike_arrest_is_retried_after_retry_after(
    service: RunningService, make_key: Callable[..., str], ca_bundle: str
) -> None:
    key = make_key("production", per_second=2)
    calls, hook = counter()
    with Client(
        key,
        service.base_url,
        ca_bundle,
        rate=1000,
        retries=RetryPolicy(total=4, backoff_factor=0.1),
    ) as client:
        pages = [client.search_page(EMPTY_RING, 1, spend=Reserving(hook)) for _ in range(4)]
    assert len(pages) == 4
    admitted = service.keys.requests(key.name)  # type: ignore[attr-defined]
    assert len(admitted) == 4
    assert len(calls) > 4  # the 429s were retried, and every retry passed the hook


# -- pacing -------------------------------------------------------------------------------


@pytest.mark.slow
def test_eight_threads_see_zero_429s(
    service: RunningService, make_key: Callable[..., str], ca_bundle: str
) -> None:
    """Eight threads on one client, one pacer: no call leaves sooner than its slot, and no
    refusal reaches a thread.

    The promise (:class:`~parcelsearch._fetch.pacing.RateLimiter`): slots at least
    ``1 / (rate × (1 - DEFAULT_MARGIN))`` apart, ``FIRST_CALL_ALLOWANCE`` more after the
    first, on the client's clock — so the k-th call the service admits, on its own clock,
    came no sooner than that after the start (``_spikes.early_admissions``), whatever the
    scheduler does. The allowance: the margin (31 ms over ten slots at 10/s) absorbs calls
    that leave late by less; one that leaves later still may reach the service within a
    second of ten others and be refused there (a spike arrest: not counted, answered with
    ``Retry-After``). The promise for it is that every thread waits it out and the call is
    retried, spending nothing: every call answered, 40 counted, and each refusal the
    service tallied is one the client retried. Measured on this shared 2-core machine with
    2–3 busy loops beside: 6 runs of this test passed with 0–2 refusals, 8 runs of the same
    load script 2–9; a pacer 4 % too fast (10.4/s) admitted calls 6–32 ms sooner than their
    slots (red), one at 1000/s 670 ms sooner.
    """
    key = make_key("production", quota=1000)
    calls, hook = counter()
    failures: list[BaseException] = []
    todo = list(range(40))
    lock = threading.Lock()

    with Client(key, service.base_url, ca_bundle) as client:

        def work() -> None:
            while True:
                with lock:
                    if not todo:
                        return
                    todo.pop()
                try:
                    client.search_page(EMPTY_RING, 1, spend=Reserving(hook))
                except ParcelSearchError as exc:
                    failures.append(exc)

        start, began = time.time(), time.perf_counter()
        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        elapsed = time.perf_counter() - began
        retried = client.stats.get("retried 429", 0)
    name = key.name  # type: ignore[attr-defined]
    refused = spike_refusals(service.keys, name)
    print(f"40 calls from 8 threads: {40 / elapsed:.2f} calls/s, {refused} spike refusals")
    assert failures == []  # every refusal was waited out and retried
    log = service.keys.requests(name)
    assert len(log) == 40 and set(log["status"]) == {200} and log["counted"].all()
    assert refused == retried and len(calls) == 40 + refused  # each attempt passed the hook
    interval = 1 / (10 * (1 - DEFAULT_MARGIN))  # a production key: 10 calls a second
    assert early_admissions(log, start, interval, first=FIRST_CALL_ALLOWANCE) == {}


# -- markets ------------------------------------------------------------------------------


def test_markets_are_fetched_once_a_day(
    service: RunningService, make_key: Callable[..., str], ca_bundle: str, tmp_path: Path
) -> None:
    key = make_key("production")
    cache = ResponseCache(tmp_path)
    with Client(key, service.base_url, ca_bundle) as client:
        first = markets(client, cache=cache)
        again = markets(client, cache=cache)
        fresh = markets(client, cache=cache, max_age=0)
    assert first == again == fresh == list(synth.MARKET_NAMES)
    assert "Abilene, TX" in first
    assert len(service.keys.requests(key.name)) == 2  # type: ignore[attr-defined]
    for path in tmp_path.iterdir():
        assert key.encode() not in path.read_bytes()
