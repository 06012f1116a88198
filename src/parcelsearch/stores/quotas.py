"""What a key may spend and what it spent: the value types every store shares.

:class:`Quota` (a key's calls a month or for its life), :class:`Usage` (what a store counts
for it) and the refusals said when none is left. Both twins' ledgers
(:mod:`~parcelsearch.stores.local.ledger`, :mod:`~parcelsearch.stores.team.spending`) and the
protocol (:mod:`~parcelsearch.stores.spending`) import them from here, none from the other.

Examples
--------
>>> Quota.parse("500/month").remaining(Usage(lifetime=900, month=120))
380
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from parcelsearch import settings
from parcelsearch.errors import ConfigurationError, Hint, QuotaWouldExceedError

__all__ = [
    "MAX_CALLS",
    "Period",
    "Quota",
    "Usage",
    "QuotaRefused",
    "budget_reached",
    "no_calls_left",
]

Period = Literal["month", "lifetime"]

#: The most calls a quota may hold (what a PostgreSQL ``integer``, the team store's, holds).
MAX_CALLS = 2**31 - 1
_QUOTA = re.compile(r"\s*(\d+)\s*/\s*(month|lifetime)\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Usage:
    """Attempts recorded for one key: over its life, and in the current UTC month."""

    lifetime: int
    month: int


@dataclass(frozen=True)
class Quota:
    """What a key may spend: ``limit`` calls per calendar month (UTC) or for its lifetime.

    Examples
    --------
    >>> Quota.parse("demo")
    Quota(limit=50, period='lifetime')
    >>> Quota.parse("500/month").remaining(Usage(lifetime=900, month=120))
    380
    """

    limit: int
    period: Period

    def __post_init__(self) -> None:
        if self.limit < 0 or self.period not in ("month", "lifetime"):
            raise ConfigurationError(f"bad quota {self.limit}/{self.period}")

    def __str__(self) -> str:
        return f"{self.limit}/{self.period}"

    @classmethod
    def parse(cls, value: str | Quota | None) -> Quota | None:
        """A quota from ``"demo"``, ``"production"``, ``"500/month"``, ``"50/lifetime"``.

        ``None`` reads ``$PARCELSEARCH_QUOTA``; unset, empty or ``"none"`` means no known
        quota (nothing is refused).

        Raises
        ------
        ConfigurationError
            Text that is none of the forms above.
        """
        if isinstance(value, Quota):
            return value
        source = ""
        if value is None:
            value, source = os.environ.get(settings.ENV_QUOTA, ""), f" (from {settings.ENV_QUOTA})"
        text = value.strip().lower()
        if text in ("", "none"):
            return None
        if text in settings.KEY_TYPES:
            _, limit, period = settings.KEY_TYPES[text]
            return cls(int(limit), period)  # type: ignore[arg-type]
        match = _QUOTA.fullmatch(text)
        if match is None:
            raise ConfigurationError(
                f"{value[:40]!r}{source} is not a quota: use 'demo', 'production', "
                "'<N>/month' or '<N>/lifetime'",
                hints=[Hint("quota", "500/month", "for example {knob}")],
            )
        if int(match[1]) > MAX_CALLS:
            raise ConfigurationError(
                f"{value.strip()[:40]!r}{source}: a quota is at most {MAX_CALLS} calls",
                hints=[Hint("quota", "500/month", "for example {knob}")],
            )
        return cls(int(match[1]), match[2])  # type: ignore[arg-type]

    def used(self, usage: Usage) -> int:
        """Calls that count against this quota."""
        return usage.month if self.period == "month" else usage.lifetime

    def remaining(self, usage: Usage) -> int:
        """Calls left (never negative)."""
        return max(0, self.limit - self.used(usage))

    def describe(self) -> str:
        """``'500 calls a month (UTC)'`` / ``'50 calls for the life of the key'``."""
        if self.period == "month":
            return f"{self.limit} calls a calendar month (UTC)"
        return f"{self.limit} calls for the life of the key"


@dataclass(frozen=True)
class QuotaRefused:
    """The vendor refused a key for its quota (a 429 quota violation) at ``at``: no call is
    left until ``until`` (UTC; ``None``: never, a lifetime quota). Kept by key fingerprint
    in the ledger, so that the next search prices with 0 left instead of meeting the
    refusal again."""

    at: datetime
    until: datetime | None

    def left(self) -> str:
        """``'0 left this month, resets 2026-12-01 00:00 UTC'`` (or ``'0 left, for good'``)."""
        if self.until is None:
            return "0 left, for good (a lifetime quota never resets)"
        return f"0 left this month, resets {self.until:%Y-%m-%d %H:%M} UTC"

    def describe(self) -> str:
        """What the ledger remembers, and since when."""
        return (
            f"the vendor refused the key for its quota on {self.at:%Y-%m-%d %H:%M} UTC: "
            f"{self.left()}"
        )


def budget_reached(budget: int) -> str:
    """The message of a run stopped at its budget (with or without a ledger)."""
    return (
        f"budget of {budget} calls reached: everything fetched so far is cached, and "
        "running the same search again resumes without spending those calls again."
    )


def no_calls_left(
    fingerprint: str,
    quota: Quota,
    used: int,
    where: str = "this ledger",
    *,
    sent: int | None = None,
) -> QuotaWouldExceedError:
    """The refusal of a reservation when the key's quota has no call left (``sent``: of the
    ``used`` calls counted, those known sent; the rest are on the wire or of unknown fate)."""
    counted = (
        f"{used}"
        if sent is None or sent >= used
        else f"{used} ({sent} sent, {used - sent} on the wire or of unknown fate)"
    )
    return QuotaWouldExceedError(
        f"key sha256:{fingerprint} has no calls left: {where} counts {counted} of its quota "
        f"({quota.describe()}). Everything fetched so far is cached; "
        + (
            "the quota resets at the start of the next month (UTC)."
            if quota.period == "month"
            else "a lifetime quota never resets."
        ),
        needed=1,
        allowed=0,
    )
