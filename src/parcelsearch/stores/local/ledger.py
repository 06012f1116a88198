"""Quota ledger: every call attempt, counted per key fingerprint, in SQLite.

The service never tells a client how many calls its key has left, so the toolkit keeps its
own count: one row per HTTP attempt (retries included), by key fingerprint (never the key),
run and calendar month (UTC). Given a :class:`Quota` it refuses, before spending, a call
the key has no room for (a run's own budget is the run's: :class:`parcelsearch._run.fetching.Run`).

Every check-and-record is one ``BEGIN IMMEDIATE`` transaction, so threads and processes
sharing the file can never, together, overspend a quota.

Examples
--------
>>> ledger = Ledger("/tmp/ledger.sqlite")  # doctest: +SKIP
>>> ledger.reserve(fingerprint, run_id="r1", quota=Quota.parse("demo"))  # doctest: +SKIP
1
>>> ledger.usage(fingerprint)  # doctest: +SKIP
Usage(lifetime=1, month=1)
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from parcelsearch import settings
from parcelsearch._shared import month_of
from parcelsearch.errors import (
    ConfigurationError,
    Hint,
    QuotaWouldExceedError,
)
from parcelsearch.stores.local.cache import CacheFolder

__all__ = ["Ledger", "Quota", "Usage", "budget_reached", "no_calls_left"]

Period = Literal["month", "lifetime"]

#: The most calls a quota may hold (what a PostgreSQL ``integer``, the team store's, holds).
MAX_CALLS = 2**31 - 1
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
_QUOTA = re.compile(r"\s*(\d+)\s*/\s*(month|lifetime)\s*", re.IGNORECASE)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    id          INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL,   -- first 16 hex of sha256(key); never the key
    run_id      TEXT NOT NULL,
    month       TEXT NOT NULL,   -- calendar month, UTC: 'YYYY-MM'
    at          TEXT NOT NULL    -- ISO 8601, UTC
);
CREATE INDEX IF NOT EXISTS attempts_by_key ON attempts (fingerprint, month);
CREATE INDEX IF NOT EXISTS attempts_by_run ON attempts (run_id);
"""


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
                hints=[Hint("quota", "500/month", "for example {knob}")])
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


def budget_reached(budget: int) -> str:
    """The message of a run stopped at its budget (with or without a ledger)."""
    return (f"budget of {budget} calls reached: everything fetched so far is cached, and "
            "running the same search again resumes without spending those calls again.")


def no_calls_left(fingerprint: str, quota: Quota, used: int,
                  where: str = "this ledger", *, sent: int | None = None) -> QuotaWouldExceedError:
    """The refusal of a reservation when the key's quota has no call left (``sent``: of the
    ``used`` calls counted, those known sent; the rest are on the wire or of unknown fate)."""
    counted = f"{used}" if sent is None or sent >= used else \
        f"{used} ({sent} sent, {used - sent} on the wire or of unknown fate)"
    return QuotaWouldExceedError(
        f"key sha256:{fingerprint} has no calls left: {where} counts {counted} of its quota "
        f"({quota.describe()}). Everything fetched so far is cached; "
        + ("the quota resets at the start of the next month (UTC)."
           if quota.period == "month" else "a lifetime quota never resets."),
        needed=1,
        allowed=0,
    )


class Ledger:
    """Attempts per key fingerprint, by run and UTC month, in one SQLite file.

    Parameters
    ----------
    path
        The SQLite file; default ``ledger.sqlite`` in the cache folder
        (``$PARCELSEARCH_CACHE_DIR`` or ``~/.cache/parcelsearch``).
    clock
        Returns the current UTC time (for tests of month boundaries).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.path = Path(path).expanduser() if path else CacheFolder().ledger_path
        self._clock = clock or (lambda: datetime.now(UTC))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(sqlite3.connect(self.path, timeout=60.0, isolation_level=None)) as db:
                db.execute("PRAGMA busy_timeout = 60000")
                db.execute("PRAGMA journal_mode = WAL")  # readers never wait for a writer
                db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigurationError(f"cannot open the quota ledger {self.path}: {exc}") from None

    @classmethod
    def in_folder(cls, directory: str | os.PathLike[str]) -> Ledger:
        """The ledger kept beside a response cache in ``directory``."""
        return cls(CacheFolder(directory).ledger_path)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # -- reading ---------------------------------------------------------------------

    def usage(self, fingerprint: str) -> Usage:
        """Attempts recorded for a key: for life and in the current UTC month."""
        _check_fingerprint(fingerprint)
        with self._transaction(immediate=False) as db:
            return self._usage(db, fingerprint, month_of(self._clock()))

    def remaining(self, fingerprint: str, quota: Quota | None) -> int | None:
        """Calls the key has left under ``quota``; ``None`` when the quota is unknown."""
        if quota is None:
            return None
        return quota.remaining(self.usage(fingerprint))

    def usage_by_key(self) -> dict[str, Usage]:
        """Attempts recorded for every key fingerprint seen, for life and this UTC month."""
        with self._transaction(immediate=False) as db:
            keys = [row[0] for row in db.execute(
                "SELECT DISTINCT fingerprint FROM attempts ORDER BY fingerprint")]
            month = month_of(self._clock())
            return {key: self._usage(db, key, month) for key in keys}

    # -- checking and recording ------------------------------------------------------

    def reserve(self, fingerprint: str, *, run_id: str, quota: Quota | None = None) -> int:
        """Atomically check, then record, one attempt; returns the reservation (its row).

        Raises
        ------
        QuotaWouldExceedError
            The key has no calls left under ``quota`` (nothing is recorded).
        """
        _check_fingerprint(fingerprint)
        now = self._clock()
        with self._transaction() as db:
            if quota is not None:
                usage = self._usage(db, fingerprint, month_of(now))
                if quota.remaining(usage) <= 0:
                    raise no_calls_left(fingerprint, quota, quota.used(usage))
            cursor = db.execute(
                "INSERT INTO attempts (fingerprint, run_id, month, at) VALUES (?, ?, ?, ?)",
                (fingerprint, run_id, month_of(now), now.isoformat()),
            )
        return int(cursor.lastrowid or 0)

    def refund(self, fingerprint: str, reservation: int) -> None:
        """Take back one reservation: it was never sent, or the service did not count it."""
        _check_fingerprint(fingerprint)
        with self._transaction() as db:
            db.execute("DELETE FROM attempts WHERE id = ? AND fingerprint = ?",
                       (reservation, fingerprint))

    # -- internals -------------------------------------------------------------------

    @staticmethod
    def _usage(db: sqlite3.Connection, fingerprint: str, month: str) -> Usage:
        lifetime, this_month = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(month = ?), 0) FROM attempts WHERE fingerprint = ?",
            (month, fingerprint),
        ).fetchone()
        return Usage(lifetime=int(lifetime), month=int(this_month))

    def transaction(self, immediate: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        """One connection to the ledger's file, one transaction (``BEGIN IMMEDIATE`` unless
        ``immediate=False``): what the run history kept in the same file uses."""
        return self._transaction(immediate)

    @contextmanager
    def _transaction(self, immediate: bool = True) -> Iterator[sqlite3.Connection]:
        """One connection, one transaction: committed on success, rolled back on error."""
        with closing(sqlite3.connect(self.path, timeout=60.0, isolation_level=None)) as db:
            db.execute("PRAGMA busy_timeout = 60000")
            db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")


def _check_fingerprint(fingerprint: str) -> None:
    if not isinstance(fingerprint, str) or not _FINGERPRINT.fullmatch(fingerprint):
        raise ValueError(
            "the ledger records key fingerprints (16 lowercase hex, Client.fingerprint), "
            "never keys"
        )
