"""The retry policy as a plain value, the one ``Retry-After`` parser, and the pacer's slots."""

from __future__ import annotations

import email.utils
import threading
import time

import pytest

from parcelsearch._fetch.http import (
    FIRST_CALL_ALLOWANCE,
    Cancelled,
    RateLimiter,
    RetryPolicy,
    retry_after,
)
from parcelsearch.errors import ConfigurationError
from parcelsearch.stores.spending import RESERVE_LEAD


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param("7", 7.0, id="seconds"),
        pytest.param(" 3 ", 3.0, id="padded"),
        pytest.param("0", 0.0, id="zero"),
        pytest.param(email.utils.formatdate(time.time() - 60, usegmt=True), 0.0, id="past-date"),
        pytest.param("soon", None, id="unreadable"),
        pytest.param("1.5", None, id="fraction"),
        pytest.param("-2", None, id="negative"),
        pytest.param("", None, id="empty"),
    ],
)
def test_retry_after_reads_seconds_and_dates(value: str, seconds: float | None) -> None:
    assert retry_after({"Retry-After": value}) == seconds


def test_retry_after_of_a_future_date_counts_down() -> None:
    ahead = retry_after({"Retry-After": email.utils.formatdate(time.time() + 100, usegmt=True)})
    assert ahead is not None and 90 < ahead <= 100


def test_no_header_is_no_advice() -> None:
    assert retry_after({}) is None


@pytest.mark.parametrize(
    ("policy", "last_failure"),
    [
        pytest.param(RetryPolicy(), 6, id="default-6-attempts"),
        pytest.param(RetryPolicy(total=0), 1, id="no-retries"),
        pytest.param(RetryPolicy(total=2), 3, id="two-retries"),
    ],
)
def test_attempts_are_total_plus_one(policy: RetryPolicy, last_failure: int) -> None:
    assert not any(policy.exhausted(n, 0) for n in range(1, last_failure))
    assert policy.exhausted(last_failure, 0)


def test_failures_to_connect_have_their_own_allowance() -> None:
    policy = RetryPolicy(total=5, connect=1)
    assert not policy.exhausted(1, 1)  # one refused connection is retried once
    assert policy.exhausted(2, 2)
    assert not policy.exhausted(5, 1)  # other failures still have their allowance
    assert RetryPolicy(total=0, connect=1).exhausted(1, 1)  # never more than total


def test_backoff_doubles_from_the_second_retry_and_is_capped() -> None:
    policy = RetryPolicy(backoff_factor=0.5, backoff_jitter=0, backoff_max=3)
    assert [policy.delay(n) for n in range(1, 6)] == [0.0, 1.0, 2.0, 3.0, 3.0]


def test_jitter_adds_at_most_its_share() -> None:
    policy = RetryPolicy(backoff_factor=1, backoff_jitter=0.25)
    waits = [policy.delay(3) for _ in range(50)]
    assert all(4 <= w < 4.25 for w in waits) and len(set(waits)) > 1


def test_retry_after_wins_and_is_capped() -> None:
    policy = RetryPolicy(retry_after_max=120)
    assert policy.delay(4, retry_after=1.0) == 1.0
    assert policy.delay(1, retry_after=0.0) == 0.0
    assert policy.delay(1, retry_after=3600.0) == 120


@pytest.mark.parametrize("total", [-1, True, 2.5, "3"])
def test_retries_must_be_a_whole_number(total: object) -> None:
    with pytest.raises(ConfigurationError, match="retries must be an integer >= 0"):
        RetryPolicy(total=total)  # type: ignore[arg-type]


def test_limiter_leaves_room_for_a_first_call_and_its_reservation() -> None:
    """Measured before: a first call 57 ms late at the server and the next on time packed
    11 calls into 1.0 s at 10/s; a call due at once was sent late by its reservation."""
    limiter = RateLimiter(40.0)
    start = time.monotonic()
    first = limiter.wait(lead=RESERVE_LEAD)  # returns the lead before the slot
    second, third = limiter.wait(), limiter.wait()
    assert first >= start + RESERVE_LEAD  # room to reserve before even the first slot
    assert second - first == pytest.approx(limiter.interval + FIRST_CALL_ALLOWANCE)
    assert third - second == pytest.approx(limiter.interval)


def test_a_pause_moves_every_later_slot_past_it() -> None:
    limiter = RateLimiter(1000.0)
    limiter.wait()
    paused_at = time.monotonic()
    limiter.pause(0.2)
    assert limiter.wait() >= paused_at + 0.2  # a slot claimed after the pause


def test_a_call_holding_a_slot_is_held_until_the_pause_ends() -> None:
    limiter = RateLimiter(1000.0)
    limiter.wait()  # this call's slot came before the Retry-After …
    paused_at = time.monotonic()
    limiter.pause(0.2)
    limiter.hold()  # … and it still does not leave before the pause ends
    assert time.monotonic() >= paused_at + 0.2


def test_a_stop_wakes_a_held_call() -> None:
    limiter = RateLimiter(1000.0)
    limiter.pause(600)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    with pytest.raises(Cancelled):
        limiter.hold(stop)


def test_each_refusal_slows_the_pace_and_each_call_brings_it_back() -> None:
    """Issue 59: AIMD. A refusal (a Retry-After) multiplies the pace by DECREASE; each call
    adds INCREASE of the rate back, up to CEILING of the pace refused at; strict spacing (the
    bench's baseline) keeps its pace."""
    limiter, strict = RateLimiter(1000.0), RateLimiter(1000.0, adaptive=False)
    full = limiter.pace
    for pacer in (limiter, strict):
        pacer.pause(0.0)
    assert limiter.pace == pytest.approx(full * RateLimiter.DECREASE)
    assert limiter.interval == pytest.approx(1 / limiter.pace)
    assert strict.pace == full and (limiter.refusals, strict.refusals) == (1, 1)
    for _ in range(50):  # back up to the most learnt: CEILING of the pace refused at, probed
        limiter.wait()
    assert limiter.pace == pytest.approx(full * RateLimiter.CEILING
                                         + 50 * RateLimiter.PROBE * 1000)
    for _ in range(200):  # the probe reaches the rate less the margin again
        limiter.wait()
    assert limiter.pace == pytest.approx(full)
    assert "1 refusals met" in repr(limiter)
    for _ in range(50):
        limiter.pause(0.0)
    assert limiter.pace == pytest.approx(RateLimiter.FLOOR * 1000)


@pytest.mark.parametrize("headers, expected", [
    ({"X-RateLimit-Remaining": "8"}, (8, "X-RateLimit-Remaining")),
    ({"RateLimit-Remaining": " 0 "}, (0, "RateLimit-Remaining")),
    ({"X-RateLimit-Remaining": "120, 8"}, (8, "X-RateLimit-Remaining")),  # one per window
    ({"RateLimit": "limit=100, remaining=42, reset=30"}, (42, "RateLimit")),
    ({"RateLimit": '"default";r=7;t=30'}, (7, "RateLimit")),
    ({"X-RateLimit-Remaining": "lots"}, None),
    ({"RateLimit": "limit=100, reset=30"}, None),
    ({}, None),
])
def test_remaining_calls_reads_the_quota_headers(headers, expected) -> None:
    from requests.structures import CaseInsensitiveDict

    from parcelsearch._fetch.http import remaining_calls

    assert remaining_calls(CaseInsensitiveDict(headers)) == expected
