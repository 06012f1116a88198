"""API keys in one SQLite file: hashes only, limits, counters and the request log.

A key is shown once, at creation; the file keeps its sha256 only. Each key has a name,
a type (``demo`` or ``production``, whose defaults are in
:data:`parcelsearch.settings.KEY_TYPES`), the services it may call, a per-second rate and a
quota (for life, or per calendar month UTC). Counters and the request log live in the same
file, so a restart resets nothing. The admission transaction itself is in
:mod:`parcelsearch.service.limits`.

Examples
--------
>>> import tempfile, pathlib
>>> store = KeyStore(pathlib.Path(tempfile.mkdtemp()) / "keys.sqlite")
>>> key = store.create("alice", key_type="demo")
>>> store.lookup(key).name
'alice'
>>> [(k["name"], k["quota"], k["quota_period"]) for k in store.list()]
[('alice', 50, 'lifetime')]
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from parcelsearch._shared import month_of
from parcelsearch.errors import ConfigurationError
from parcelsearch.settings import KEY_TYPES

__all__ = ["KeyStore", "KeyRecord", "SERVICES", "QUOTA_PERIODS", "hash_key"]

SERVICES: tuple[str, ...] = ("search", "markets")
QUOTA_PERIODS: tuple[str, ...] = ("lifetime", "month")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    key_hash TEXT NOT NULL UNIQUE,
    key_type TEXT NOT NULL,
    per_second REAL NOT NULL,
    quota INTEGER,
    quota_period TEXT NOT NULL,
    services TEXT NOT NULL,
    created REAL NOT NULL,
    revoked REAL,
    used_lifetime INTEGER NOT NULL DEFAULT 0,
    used_month INTEGER NOT NULL DEFAULT 0,
    month TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    key_id INTEGER NOT NULL REFERENCES keys(id),
    time REAL NOT NULL,
    path TEXT NOT NULL,
    polygon_sha256 TEXT,
    page INTEGER,
    status INTEGER NOT NULL,
    counted INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_key_time ON requests (key_id, time);
"""


def hash_key(api_key: str) -> str:
    """The stored form of a key: hex sha256 (keys are 240 random bits: no salt needed)."""
    return hashlib.sha256(api_key.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class KeyRecord:
    """One key's settings (never its plaintext)."""

    id: int
    name: str
    key_type: str
    per_second: float
    quota: int | None
    quota_period: str
    services: tuple[str, ...]
    revoked: bool

    def __repr__(self) -> str:
        return (
            f"KeyRecord(name={self.name!r}, type={self.key_type!r}, per_second={self.per_second},"
            f" quota={self.quota}, quota_period={self.quota_period!r}, services={self.services})"
        )


def _record(row: sqlite3.Row) -> KeyRecord:
    return KeyRecord(
        id=row["id"],
        name=row["name"],
        key_type=row["key_type"],
        per_second=row["per_second"],
        quota=row["quota"],
        quota_period=row["quota_period"],
        services=tuple(row["services"].split(",")),
        revoked=row["revoked"] is not None,
    )


class KeyStore:
    """The key store: one SQLite file (WAL), created if missing.

    Parameters
    ----------
    path
        The SQLite file.

    Notes
    -----
    Each thread gets its own connection; every write is one ``BEGIN IMMEDIATE``
    transaction, so counts stay exact across threads and processes.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self.connection().executescript(_SCHEMA)

    def __repr__(self) -> str:
        return f"KeyStore({str(self.path)!r})"

    # ------------------------------------------------------------------ connections

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (autocommit; use :meth:`transaction` to write)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error)."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        else:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    # ------------------------------------------------------------------ keys

    def create(
        self,
        name: str,
        key_type: str = "demo",
        per_second: float | None = None,
        quota: int | None = None,
        quota_period: str | None = None,
        services: Iterable[str] | str = SERVICES,
    ) -> str:
        """Create a key and return its plaintext (shown once, never stored).

        Parameters
        ----------
        name
            Unique name; the quota message names it (``Identifier : <name>``).
        key_type
            ``demo`` (10/s, 50 calls for life) or ``production`` (10/s, 500 calls a month).
        per_second, quota, quota_period
            Overrides of the type's defaults (``quota_period``: ``lifetime`` or ``month``).
        services
            The services the key may call: ``search``, ``markets`` (a list or a
            comma-separated string).

        Raises
        ------
        ConfigurationError
            Unknown type, period or service, a bad limit, or a name already taken.
        """
        name = name.strip() if isinstance(name, str) else name
        if not isinstance(name, str) or not name or not name.isprintable():
            raise ConfigurationError(f"key name must be printable, non-empty text, got {name!r}")
        if key_type not in KEY_TYPES:
            raise ConfigurationError(
                f"key type must be one of {', '.join(KEY_TYPES)}, got {key_type!r}"
            )
        default_rate, default_quota, default_period = KEY_TYPES[key_type]
        rate = float(default_rate if per_second is None else per_second)
        if not rate > 0 or rate != rate or rate == float("inf"):
            raise ConfigurationError(f"per_second must be a positive number, got {per_second!r}")
        limit = default_quota if quota is None else quota
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigurationError(f"quota must be a whole number >= 0, got {quota!r}")
        period = default_period if quota_period is None else quota_period
        if period not in QUOTA_PERIODS:
            raise ConfigurationError(
                f"quota period must be one of {', '.join(QUOTA_PERIODS)}, got {quota_period!r}"
            )
        wanted = services.split(",") if isinstance(services, str) else list(services)
        wanted = [s.strip() for s in wanted if s.strip()]
        unknown = sorted(set(wanted) - set(SERVICES))
        if unknown or not wanted:
            raise ConfigurationError(
                f"services must be some of {', '.join(SERVICES)}, got {','.join(wanted) or 'none'}"
            )
        api_key = secrets.token_urlsafe(30)
        try:
            with self.transaction() as conn:
                conn.execute(
                    "INSERT INTO keys (name, key_hash, key_type, per_second, quota, quota_period,"
                    " services, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, hash_key(api_key), key_type, rate, limit, period,
                     ",".join(s for s in SERVICES if s in wanted), time.time()),
                )
        except sqlite3.IntegrityError:
            raise ConfigurationError(
                f"a key named {name!r} already exists in {self.path}; choose another name"
            ) from None
        return api_key

    def revoke(self, name: str) -> None:
        """Revoke the key ``name``: it answers ``Invalid ApiKey`` from now on.

        Raises
        ------
        ConfigurationError
            No key has that name.
        """
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE keys SET revoked = coalesce(revoked, ?) WHERE name = ?", (time.time(), name)
            )
        if cur.rowcount == 0:
            raise ConfigurationError(f"no key named {name!r} in {self.path}")

    def lookup(self, api_key: str) -> KeyRecord | None:
        """The live key whose plaintext is ``api_key``, or ``None`` (unknown or revoked)."""
        digest = hash_key(api_key)
        row = self.connection().execute(
            "SELECT * FROM keys WHERE key_hash = ?", (digest,)
        ).fetchone()
        if row is None or not hmac.compare_digest(row["key_hash"], digest) or row["revoked"]:
            return None
        return _record(row)

    def _summary(self, row: sqlite3.Row, now: float) -> dict[str, Any]:
        return {
            "name": row["name"],
            "type": row["key_type"],
            "per_second": row["per_second"],
            "quota": row["quota"],
            "quota_period": row["quota_period"],
            "services": row["services"].split(","),
            "used_lifetime": row["used_lifetime"],
            "used_month": row["used_month"] if row["month"] == month_of(now) else 0,
            "revoked": row["revoked"] is not None,
            "created": datetime.fromtimestamp(row["created"], UTC).isoformat(timespec="seconds"),
        }

    def list(self) -> list[dict[str, Any]]:
        """Every key: name, type, limits, services, calls used (lifetime, this month), revoked."""
        now = time.time()
        rows = self.connection().execute("SELECT * FROM keys ORDER BY id").fetchall()
        return [self._summary(row, now) for row in rows]

    def get(self, name: str) -> dict[str, Any]:
        """One key's summary (as in :meth:`list`).

        Raises
        ------
        ConfigurationError
            No key has that name.
        """
        row = self.connection().execute("SELECT * FROM keys WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ConfigurationError(f"no key named {name!r} in {self.path}")
        return self._summary(row, time.time())

    def requests(self, name: str) -> pd.DataFrame:
        """The service's request log for key ``name``: every request the per-second limiter
        admitted, oldest first.

        Returns
        -------
        pandas.DataFrame
            ``time`` (UTC), ``path``, ``polygon_sha256`` (sha256 of the normalised polygon,
            ``None`` when it could not be parsed or for markets), ``page``, ``status``,
            ``counted`` (whether it counted toward the quota).
        """
        row = self.connection().execute("SELECT id FROM keys WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ConfigurationError(f"no key named {name!r} in {self.path}")
        rows = self.connection().execute(
            "SELECT time, path, polygon_sha256, page, status, counted FROM requests "
            "WHERE key_id = ? ORDER BY id",
            (row["id"],),
        ).fetchall()
        frame = pd.DataFrame(
            [tuple(r) for r in rows],
            columns=["time", "path", "polygon_sha256", "page", "status", "counted"],
        )
        frame["time"] = pd.to_datetime(frame["time"].astype(float), unit="s", utc=True)
        frame["page"] = frame["page"].astype("Int64")
        frame["status"] = frame["status"].astype("int64")
        frame["counted"] = frame["counted"].astype(bool)
        return frame
