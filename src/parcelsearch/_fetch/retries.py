"""How often to ask again and how long to wait: :class:`RetryPolicy`, and what an answer's
headers advise (``Retry-After``; the calls left in the key's quota)."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import mktime_tz, parsedate_tz

from parcelsearch.errors import ConfigurationError

__all__ = ["RetryPolicy", "retry_after", "remaining_calls", "REMAINING_HEADERS"]


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait in between.

    A request gets ``total + 1`` attempts; of them, attempts that never connect (nothing is
    listening, or connecting timed out) are retried at most ``connect`` times, since waiting
    rarely helps there. Before retry *n* the loop waits ``backoff_factor × 2ⁿ⁻¹`` seconds
    plus up to ``backoff_jitter`` (none before the first retry: 0, 1, 2, 4 … with the
    defaults), at most ``backoff_max``; an answer's ``Retry-After`` (seconds or HTTP-date)
    wins, capped at ``retry_after_max``.
    """

    total: int = 5
    connect: int = 1
    backoff_factor: float = 0.5
    backoff_max: float = 30.0
    backoff_jitter: float = 0.25
    retry_after_max: float = 120.0

    def __post_init__(self) -> None:
        if isinstance(self.total, bool) or not isinstance(self.total, int) or self.total < 0:
            raise ConfigurationError(f"retries must be an integer >= 0, got {self.total!r}")

    def exhausted(self, failures: int, unsent: int) -> bool:
        """Whether ``failures`` failed attempts, ``unsent`` of them never connected, are all."""
        return failures > self.total or unsent > min(self.connect, self.total)

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``failures``-th failed attempt, before the next one."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        if failures <= 1:
            return 0.0
        wait = self.backoff_factor * 2.0 ** (failures - 1) + random.random() * self.backoff_jitter
        return max(0.0, min(self.backoff_max, wait))


_SECONDS = re.compile(r"\s*[0-9]+\s*")


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or HTTP-date), or ``None``.

    A date in the past is 0 seconds; a missing or unreadable header is ``None`` (it is only
    advice).
    """
    value = headers.get("Retry-After")
    if not value:
        return None
    if _SECONDS.fullmatch(value):
        return float(int(value))
    date = parsedate_tz(value)
    if date is None:
        return None
    if date[9] is None:  # no zone given: HTTP-dates are GMT
        date = (*date[:9], 0)
    return max(0.0, mktime_tz(date) - time.time())


#: The headers a gateway tells the calls left in the key's quota with, as read: Apigee's and
#: Kong's ``X-RateLimit-Remaining``, the IETF draft's ``RateLimit-Remaining`` and its
#: structured ``RateLimit: …, remaining=N, …``.
REMAINING_HEADERS = ("X-RateLimit-Remaining", "RateLimit-Remaining", "RateLimit")
_REMAINING_FIELD = re.compile(r"(?:^|[;,\s])r(?:emaining)?=\s*([0-9]+)")


def remaining_calls(headers: Mapping[str, str]) -> tuple[int, str] | None:
    """The calls left in the key's quota that an answer's headers state, and the header
    that said it (``None``: none said, or unreadable — a header is only advice). Of several
    values (a header per window, comma-separated), the smallest."""
    for name in REMAINING_HEADERS:
        value = headers.get(name)
        if not value:
            continue
        if name == "RateLimit":
            found = [int(n) for n in _REMAINING_FIELD.findall(value)]
        else:
            found = [int(part) for part in value.split(",") if _SECONDS.fullmatch(part)]
        if found:
            return min(found), name
    return None
