"""Quota ledger: every call attempt, counted per key fingerprint, in SQLite.

The service never tells a client how many calls its key has left, so the toolkit keeps its
own count: one row per HTTP attempt (retries included), by key fingerprint (never the key),
run and calendar month (UTC). Given a :class:`~parcelsearch.stores.quotas.Quota` it refuses,
before spending, a call the key has no room for (a run's own budget is the run's:
:class:`parcelsearch._run.fetching.Run`).

The vendor's quota refusal of a key (a 429 quota violation) is kept too, by fingerprint, until
the quota resets (:meth:`Ledger.refused`, :meth:`Ledger.refusal`): the next search then
prices with 0 left instead of meeting the refusal again.

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
from datetime import UTC, datetime
from pathlib import Path

from parcelsearch._shared import month_of
from parcelsearch.errors import ConfigurationError, InputError
from parcelsearch.stores.local.cache import CacheFolder
from parcelsearch.stores.quotas import Quota, QuotaRefused, Usage, no_calls_left

# ``Quota`` and ``Usage`` live in :mod:`parcelsearch.stores.quotas`; still importable from here.
__all__ = ["Ledger", "Quota", "Usage"]

_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
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
CREATE TABLE IF NOT EXISTS quota_refusals (
    fingerprint TEXT PRIMARY KEY, -- first 16 hex of sha256(key); never the key
    at          TEXT NOT NULL,    -- ISO 8601, UTC: when the vendor refused it for its quota
    until       TEXT              -- ISO 8601, UTC: when its quota resets; NULL: never
);
"""


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
            keys = [
                row[0]
                for row in db.execute(
                    "SELECT DISTINCT fingerprint FROM attempts ORDER BY fingerprint"
                )
            ]
            month = month_of(self._clock())
            return {key: self._usage(db, key, month) for key in keys}

    def refusal(self, fingerprint: str) -> QuotaRefused | None:
        """The vendor's quota refusal of the key, while in force (before its reset)."""
        _check_fingerprint(fingerprint)
        with self._transaction(immediate=False) as db:
            row = db.execute(
                "SELECT at, until FROM quota_refusals WHERE fingerprint = ?", (fingerprint,)
            ).fetchone()
        if row is None:
            return None
        refused = QuotaRefused(
            datetime.fromisoformat(row[0]),
            None if row[1] is None else datetime.fromisoformat(row[1]),
        )
        if refused.until is not None and self._clock() >= refused.until:
            return None  # the quota has reset since
        return refused

    # -- checking and recording ------------------------------------------------------

    def refused(self, fingerprint: str, until: datetime | None) -> QuotaRefused:
        """Remember that the vendor refused the key for its quota now, until ``until`` (its
        reset; ``None``: never)."""
        _check_fingerprint(fingerprint)
        now = self._clock()
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO quota_refusals (fingerprint, at, until) VALUES (?, ?, ?)",
                (fingerprint, now.isoformat(), None if until is None else until.isoformat()),
            )
        return QuotaRefused(now, until)

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
            db.execute(
                "DELETE FROM attempts WHERE id = ? AND fingerprint = ?", (reservation, fingerprint)
            )

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
        raise InputError(
            "the ledger records key fingerprints (16 lowercase hex, Client.fingerprint), "
            "never keys",
            field="fingerprint",
        )
