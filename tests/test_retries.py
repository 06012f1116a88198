"""The retry policy as a plain value, the one ``Retry-After`` parser, and the quota headers
(:mod:`parcelsearch._fetch.retries`)."""

from __future__ import annotations

import email.utils
import time

import pytest

from parcelsearch._fetch.retries import RetryPolicy, retry_after
from parcelsearch.errors import ConfigurationError


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


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"X-RateLimit-Remaining": "8"}, (8, "X-RateLimit-Remaining")),
        ({"RateLimit-Remaining": " 0 "}, (0, "RateLimit-Remaining")),
        ({"X-RateLimit-Remaining": "120, 8"}, (8, "X-RateLimit-Remaining")),  # one per window
        ({"RateLimit": "limit=100, remaining=42, reset=30"}, (42, "RateLimit")),
        ({"RateLimit": '"default";r=7;t=30'}, (7, "RateLimit")),
        ({"X-RateLimit-Remaining": "lots"}, None),
        ({"RateLimit": "limit=100, reset=30"}, None),
        ({}, None),
    ],
)
def test_remaining_calls_reads_the_quota_headers(headers, expected) -> None:
    from requests.structures import CaseInsensitiveDict

    from parcelsearch._fetch.retries import remaining_calls

    assert remaining_calls(CaseInsensitiveDict(headers)) == expected
