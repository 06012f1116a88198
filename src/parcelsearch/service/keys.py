"""API keys: hashes only, limits, counters and the request log — in SQLite or PostgreSQL.

A key is shown once, at creation; the store keeps its sha256 only. Each key has a name,
a type (``demo`` or ``production``, whose defaults are in
:data:`parcelsearch.settings.KEY_TYPES`), the services it may call, a per-second rate and a
quota (for life, or per calendar month UTC). Counters and the request log live in the same
store, so a restart resets nothing.

:class:`KeyStore` is one small interface with two implementations, chosen by the location
given: a file path opens :class:`SqliteKeyStore` (one file, WAL); a ``postgresql://`` URL opens
:class:`PostgresKeyStore` (tables in schema ``parcelsearch``), which any number of service
hosts share. ``KeyStore(location)`` picks the right one. The admission transaction itself is
in :mod:`parcelsearch.service.limits`.

Examples
--------
>>> import tempfile, pathlib
>>> store = KeyStore(pathlib.Path(tempfile.mkdtemp()) / "keys.sqlite")
>>> type(store).__name__
'SqliteKeyStore'
>>> key = store.create("alice", key_type="demo")
>>> [(k["name"], k["quota"], k["quota_period"]) for k in store.list()]
[('alice', 50, 'lifetime')]
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import psycopg
import psycopg.errors
from psycopg.rows import dict_row

from parcelsearch import settings
from parcelsearch._shared import month_of
from parcelsearch.errors import ConfigurationError
from parcelsearch.service.connections import ThreadConnections
from parcelsearch.service.errors import StoreBusyError
from parcelsearch.settings import KEY_TYPES

__all__ = [
    "KeyStore",
    "SqliteKeyStore",
    "PostgresKeyStore",
    "KeyRecord",
    "SERVICES",
    "QUOTA_PERIODS",
    "BUSY_TIMEOUT",
    "hash_key",
    "is_postgres_url",
    "default_keys_location",
    "check_limits",
    "bounded_rate",
    "MIN_RATE",
    "MAX_RATE",
    "MAX_QUOTA",
    "MAX_KEY_NAME",
]

SERVICES: tuple[str, ...] = ("search", "markets")
QUOTA_PERIODS: tuple[str, ...] = ("lifetime", "month")
#: Seconds a request waits for a key store lock before the service answers 503.
BUSY_TIMEOUT = 5.0
#: The per-second rates a key may have: one call in 100 s at the least (a spike-arrest
#: Retry-After is never longer), a million a second at the most (far more than a worker
#: serves: in effect no rate limit).
MIN_RATE, MAX_RATE = 0.01, 1_000_000.0
#: The largest quota a key may have (far beyond any use; well inside 64-bit counters).
MAX_QUOTA = 10**12
#: The longest key name (a portal app's key is named ``<e-mail>/<app name>``: up to 355).
MAX_KEY_NAME = 400


def check_limits(per_second: object, quota: object) -> None:
    """Refuse a per-second rate or a quota outside the ranges the gateway works with.

    Raises
    ------
    ConfigurationError
        Naming the field and its allowed range: ``per_second`` a number from
        :data:`MIN_RATE` to :data:`MAX_RATE`, ``quota`` a whole number from 0 to
        :data:`MAX_QUOTA` (or none).
    """
    rate_ok = (isinstance(per_second, int | float) and not isinstance(per_second, bool)
               and MIN_RATE <= per_second <= MAX_RATE)
    if not rate_ok:
        raise ConfigurationError(
            f"per_second must be a number from {MIN_RATE:g} to {MAX_RATE:,.0f} (calls a "
            f"second), got {str(per_second)[:40]}"
        )
    if quota is not None and (isinstance(quota, bool) or not isinstance(quota, int)
                              or not 0 <= quota <= MAX_QUOTA):
        raise ConfigurationError(
            f"quota must be a whole number from 0 to {MAX_QUOTA:,} (or none), "
            f"got {str(quota)[:40]}"
        )


def bounded_rate(per_second: float) -> float:
    """``per_second`` as the gateway applies it: within :data:`MIN_RATE`–:data:`MAX_RATE`
    whatever the store holds (a rate written there by other means, or before the ranges were
    checked, cannot overflow the admission's arithmetic)."""
    if not per_second >= MIN_RATE:  # NaN included
        return MIN_RATE
    return min(float(per_second), MAX_RATE)

_SQLITE_SCHEMA = """
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
CREATE TRIGGER IF NOT EXISTS requests_count AFTER INSERT ON requests WHEN NEW.counted
BEGIN
    UPDATE keys SET used_lifetime = used_lifetime + 1,
        used_month = CASE WHEN month = strftime('%Y-%m', CAST(NEW.time AS INTEGER), 'unixepoch')
                          THEN used_month + 1 ELSE 1 END,
        month = strftime('%Y-%m', CAST(NEW.time AS INTEGER), 'unixepoch')
    WHERE id = NEW.key_id;
END;
"""

_POSTGRES_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS parcelsearch",
    """CREATE TABLE IF NOT EXISTS parcelsearch.keys (
    id BIGSERIAL PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    key_hash TEXT NOT NULL UNIQUE,
    key_type TEXT NOT NULL,
    per_second DOUBLE PRECISION NOT NULL,
    quota BIGINT,
    quota_period TEXT NOT NULL,
    services TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    revoked DOUBLE PRECISION,
    used_lifetime BIGINT NOT NULL DEFAULT 0,
    used_month BIGINT NOT NULL DEFAULT 0,
    month TEXT NOT NULL DEFAULT ''
)""",
    """CREATE TABLE IF NOT EXISTS parcelsearch.requests (
    id BIGSERIAL PRIMARY KEY,
    key_id BIGINT NOT NULL REFERENCES parcelsearch.keys(id),
    time DOUBLE PRECISION NOT NULL,
    path TEXT NOT NULL,
    polygon_sha256 TEXT,
    page BIGINT,
    status INTEGER NOT NULL,
    counted BOOLEAN NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS requests_key_time ON parcelsearch.requests (key_id, time)",
    # The gateway's checks in one call (one round trip an admission): the same rules, in the
    # same order, as parcelsearch.service.limits applies them with SQLite. Each statement of
    # a PL/pgSQL function sees what was committed before it starts, so the count after the
    # row lock is exact across hosts. Its statements keep their cached plans whatever the
    # session's plan_cache_mode (PostGIS searches force custom plans; re-planning these
    # took the call from 0.26 to 0.45 ms, measured on a 1 M-parcel database).
    """CREATE OR REPLACE FUNCTION parcelsearch.admit(
    p_hash TEXT, p_service TEXT, p_path TEXT, p_time DOUBLE PRECISION, p_month TEXT,
    p_status INTEGER, p_polygon_sha256 TEXT, p_page BIGINT
) RETURNS TABLE (verdict TEXT, key_id BIGINT, name TEXT, per_second DOUBLE PRECISION,
                 oldest DOUBLE PRECISION, request_id BIGINT)
LANGUAGE plpgsql SET plan_cache_mode = auto AS $$
DECLARE
    k parcelsearch.keys%ROWTYPE;
    allowed BIGINT;
    rate DOUBLE PRECISION;
    span DOUBLE PRECISION;
    seen DOUBLE PRECISION;
    used BIGINT;
    logged BIGINT;
BEGIN
    SELECT * INTO k FROM parcelsearch.keys WHERE key_hash = p_hash FOR UPDATE;
    IF NOT FOUND OR k.revoked IS NOT NULL THEN
        RETURN QUERY SELECT 'invalid', NULL::BIGINT, NULL::TEXT, NULL::DOUBLE PRECISION,
                            NULL::DOUBLE PRECISION, NULL::BIGINT;
        RETURN;
    END IF;
    IF NOT (p_service = ANY (string_to_array(k.services, ','))) THEN
        RETURN QUERY SELECT 'resource', k.id, k.name, k.per_second, NULL::DOUBLE PRECISION,
                            NULL::BIGINT;
        RETURN;
    END IF;
    -- The rate as the gateway applies it (keys.bounded_rate): within 0.01-1000000 a second,
    -- whatever the row holds, so the arithmetic cannot overflow.
    rate := CASE WHEN k.per_second >= 0.01 AND k.per_second <= 1000000 THEN k.per_second
                 WHEN k.per_second > 1000000 THEN 1000000 ELSE 0.01 END;
    IF rate >= 1 THEN
        allowed := floor(rate); span := 1.0;
    ELSE
        allowed := 1; span := 1.0 / rate;
    END IF;
    SELECT r.time INTO seen FROM parcelsearch.requests r
    WHERE r.key_id = k.id AND r.time > p_time - span
    ORDER BY r.time DESC LIMIT 1 OFFSET allowed - 1;
    IF FOUND THEN
        RETURN QUERY SELECT 'spike', k.id, k.name, k.per_second, seen, NULL::BIGINT;
        RETURN;
    END IF;
    used := CASE WHEN k.quota_period = 'lifetime' THEN k.used_lifetime
                 WHEN k.month = p_month THEN k.used_month ELSE 0 END;
    IF k.quota IS NOT NULL AND used >= k.quota THEN
        INSERT INTO parcelsearch.requests (key_id, time, path, polygon_sha256, page, status,
                                           counted)
        VALUES (k.id, p_time, p_path, NULL, NULL, 429, FALSE);
        RETURN QUERY SELECT 'quota', k.id, k.name, k.per_second, NULL::DOUBLE PRECISION,
                            NULL::BIGINT;
        RETURN;
    END IF;
    UPDATE parcelsearch.keys SET used_lifetime = used_lifetime + 1,
        used_month = CASE WHEN month = p_month THEN used_month + 1 ELSE 1 END, month = p_month
    WHERE id = k.id;
    INSERT INTO parcelsearch.requests (key_id, time, path, polygon_sha256, page, status, counted)
    VALUES (k.id, p_time, p_path, p_polygon_sha256, p_page, p_status, TRUE)
    RETURNING id INTO logged;
    RETURN QUERY SELECT 'admitted', k.id, k.name, k.per_second, NULL::DOUBLE PRECISION, logged;
END
$$""",
)
#: Advisory lock id taken while creating the PostgreSQL schema (several workers may start
#: at once).
_SCHEMA_LOCK = 0x7061726365


def hash_key(api_key: str) -> str:
    """The stored form of a key: hex sha256 (keys are 240 random bits: no salt needed)."""
    return hashlib.sha256(api_key.encode("utf-8", "surrogateescape")).hexdigest()


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def default_keys_location() -> Path:
    """The default key store file, in the per-user service directory."""
    return Path(settings.options.service_dir) / "keys.sqlite"


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


def _services(wanted: Iterable[str] | str) -> str:
    names = wanted.split(",") if isinstance(wanted, str) else list(wanted)
    names = [s.strip() for s in names if s.strip()]
    unknown = sorted(set(names) - set(SERVICES))
    if unknown or not names:
        raise ConfigurationError(
            f"services must be some of {', '.join(SERVICES)}, got {','.join(names) or 'none'}"
        )
    return ",".join(s for s in SERVICES if s in names)


class KeyStore:
    """The key store interface; ``KeyStore(location)`` opens the implementation that fits.

    Parameters
    ----------
    location
        A SQLite file path (created if missing) or a ``postgresql://`` URL.
    busy_timeout
        Seconds to wait for a lock held by another request, process or host before giving
        up with :class:`StoreBusyError` (the service answers 503 with ``Retry-After``).

    Notes
    -----
    Every statement is written once, with ``?`` placeholders, against tables ``keys`` and
    ``requests``; an implementation supplies connections, transactions, the statement
    dialect and the mapping of its lock and uniqueness errors. Each thread has its own
    connection.
    """

    #: How the store names itself in messages (a path, or a URL without its password).
    location: str
    #: ``"sqlite"`` or ``"postgresql"``, for code that adds its own tables.
    dialect: str

    def __new__(cls, location: str | Path, busy_timeout: float = BUSY_TIMEOUT) -> KeyStore:
        if cls is KeyStore:
            cls = PostgresKeyStore if is_postgres_url(location) else SqliteKeyStore
        return super().__new__(cls)

    def __init__(self, location: str | Path, busy_timeout: float = BUSY_TIMEOUT) -> None:
        self.busy_timeout = float(busy_timeout)
        self._connections = ThreadConnections(self._connect)
        #: Keys' per-second rates by key hash, as last read by an admission: with the rate
        #: known, an admission on SQLite is one statement (which checks it is unchanged).
        self.rates: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    # ------------------------------------------------------------------ implementation hooks

    def _connect(self) -> Any:
        raise NotImplementedError

    def _begin(self, conn: Any) -> None:
        raise NotImplementedError

    def sql(self, statement: str) -> str:
        """``statement`` (``?`` placeholders, bare table names) in this store's dialect."""
        return statement

    def _busy(self, exc: BaseException) -> bool:
        """Whether ``exc`` means: locked or unreachable (so: 503, not 500)."""
        raise NotImplementedError

    def _duplicate(self, exc: BaseException) -> bool:
        raise NotImplementedError


    # ------------------------------------------------------------------ connections

    def connection(self) -> Any:
        """This thread's connection (autocommit; use :meth:`transaction` to write)."""
        try:
            return self._connections.get()
        except Exception as exc:
            if self._busy(exc):
                raise StoreBusyError(f"key store {self.location} is unavailable") from exc
            raise

    def execute(
        self, conn: Any, statement: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> Any:
        """Run one statement on ``conn`` (``params`` by position, or by name for named
        placeholders); lock timeouts become :class:`StoreBusyError`."""
        try:
            return conn.execute(self.sql(statement),
                                params if isinstance(params, Mapping) else tuple(params))
        except Exception as exc:
            self._raise_if_busy(conn, exc)
            raise

    def _raise_if_busy(self, conn: Any, exc: Exception) -> None:
        """Lock timeouts and lost servers are raised as :class:`StoreBusyError` (a lost
        connection is reopened next time); other errors are left to the caller to re-raise."""
        if getattr(conn, "closed", False):
            self._connections.forget()
        if self._busy(exc):
            raise self._stayed_busy() from exc

    def _stayed_busy(self) -> StoreBusyError:
        return StoreBusyError(f"key store {self.location} stayed busy for {self.busy_timeout:g}s")

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction (``COMMIT`` at the end, ``ROLLBACK`` on error)."""
        with self._one_writer():
            yield from self._transaction()

    @contextmanager
    def _one_writer(self) -> Iterator[None]:
        """Held around each write transaction: nothing here (the database queues writers)."""
        yield

    def _transaction(self) -> Iterator[Any]:
        conn = self.connection()
        try:
            self._begin(conn)
        except Exception as exc:
            self._raise_if_busy(conn, exc)
            raise
        try:
            yield conn
        except BaseException:
            self._rollback(conn)
            raise
        else:
            self.execute(conn, "COMMIT")

    def _rollback(self, conn: Any) -> None:
        try:
            conn.execute("ROLLBACK")
        except Exception:  # noqa: BLE001 - the original error matters, not this one
            pass

    def close(self) -> None:
        """Close every connection this store opened (it reconnects if used again)."""
        self._connections.close()

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
        if len(name) > MAX_KEY_NAME:
            raise ConfigurationError(
                f"key name must have at most {MAX_KEY_NAME} characters, got {len(name):,}")
        if key_type not in KEY_TYPES:
            raise ConfigurationError(
                f"key type must be one of {', '.join(KEY_TYPES)}, got {key_type!r}"
            )
        default_rate, default_quota, default_period = KEY_TYPES[key_type]
        rate = default_rate if per_second is None else per_second
        limit = default_quota if quota is None else quota
        check_limits(rate, limit)
        rate = float(rate)
        period = default_period if quota_period is None else quota_period
        if period not in QUOTA_PERIODS:
            raise ConfigurationError(
                f"quota period must be one of {', '.join(QUOTA_PERIODS)}, got {quota_period!r}"
            )
        allowed = _services(services)
        api_key = secrets.token_urlsafe(30)
        try:
            with self.transaction() as conn:
                self.execute(
                    conn,
                    "INSERT INTO keys (name, key_hash, key_type, per_second, quota, quota_period,"
                    " services, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, hash_key(api_key), key_type, rate, limit, period, allowed,
                     time.time()),
                )
        except Exception as exc:
            if self._duplicate(exc):
                raise ConfigurationError(
                    f"a key named {name!r} already exists in {self.location}; choose another name"
                ) from None
            raise
        return api_key

    def revoke(self, name: str) -> None:
        """Revoke the key ``name``: it answers ``Invalid ApiKey`` from now on.

        Raises
        ------
        ConfigurationError
            No key has that name.
        """
        with self.transaction() as conn:
            cur = self.execute(
                conn, "UPDATE keys SET revoked = coalesce(revoked, ?) WHERE name = ?",
                (time.time(), name),
            )
            changed = cur.rowcount
        if changed == 0:
            raise ConfigurationError(f"no key named {name!r} in {self.location}")

    def _summary(self, row: Any, now: float) -> dict[str, Any]:
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
        rows = self.execute(self.connection(), "SELECT * FROM keys ORDER BY id").fetchall()
        return [self._summary(row, now) for row in rows]

    def get(self, name: str) -> dict[str, Any]:
        """One key's summary (as in :meth:`list`).

        Raises
        ------
        ConfigurationError
            No key has that name.
        """
        row = self.execute(
            self.connection(), "SELECT * FROM keys WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise ConfigurationError(f"no key named {name!r} in {self.location}")
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
        conn = self.connection()
        row = self.execute(conn, "SELECT id FROM keys WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise ConfigurationError(f"no key named {name!r} in {self.location}")
        columns = ["time", "path", "polygon_sha256", "page", "status", "counted"]
        rows = self.execute(
            conn,
            f"SELECT {', '.join(columns)} FROM requests WHERE key_id = ? ORDER BY id",
            (row["id"],),
        ).fetchall()
        frame = pd.DataFrame([[r[c] for c in columns] for r in rows], columns=columns)
        frame["time"] = pd.to_datetime(frame["time"].astype(float), unit="s", utc=True)
        frame["page"] = frame["page"].astype("Int64")
        frame["status"] = frame["status"].astype("int64")
        frame["counted"] = frame["counted"].astype(bool)
        return frame


def _owner_only(path: Path) -> None:
    """Create the store file readable by its owner only (0600) — it holds password and session
    hashes, CSRF tokens and the request log — and take group and other access away from an
    existing one and its companions (SQLite gives ``-wal``/``-shm`` the file's own mode)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for companion in ("", "-wal", "-shm", "-journal", ".writer"):
        target = path.with_name(path.name + companion)
        try:
            if target.stat().st_mode & 0o077:
                os.chmod(target, 0o600)
        except FileNotFoundError:
            pass


class SqliteKeyStore(KeyStore):
    """The key store in one SQLite file (WAL), created if missing.

    Every write is one ``BEGIN IMMEDIATE`` transaction, so counts stay exact across threads
    and processes on one machine.
    """

    dialect = "sqlite"

    def __init__(self, location: str | Path, busy_timeout: float = BUSY_TIMEOUT) -> None:
        super().__init__(location, busy_timeout)
        self._writer = threading.Lock()
        self._writer_fd: int | None = None
        self._writer_pid = 0
        self.path = Path(location)
        self.location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _owner_only(self.path)
        self.connection().executescript(_SQLITE_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @contextmanager
    def _one_writer(self) -> Iterator[None]:
        """One writer at a time among this store's users, queued on locks that wake waiters
        at once: a lock between threads, then a file lock (``flock``) on ``<file>.writer``
        between processes (the kernel drops it if a process dies).

        SQLite itself makes a blocked writer poll with growing sleeps (up to 100 ms each), so
        writers that all waited on its lock would answer late and leave the CPU idle; here
        only a writer from elsewhere (another program on the file) meets SQLite's polling.
        """
        if not self._writer.acquire(timeout=self.busy_timeout):
            raise self._stayed_busy()
        try:
            fd = self._writer_file()
            fcntl.flock(fd, fcntl.LOCK_EX)  # held by another worker only while it admits
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._writer.release()

    def close(self) -> None:
        super().close()
        if self._writer_fd is not None and self._writer_pid == os.getpid():
            os.close(self._writer_fd)
        self._writer_fd = None

    def _writer_file(self) -> int:
        """This process's descriptor of the writer lock file (opened again after a fork: a
        descriptor inherited from the parent would share the parent's lock)."""
        if self._writer_fd is None or self._writer_pid != os.getpid():
            self._writer_fd = os.open(self.path.with_name(self.path.name + ".writer"),
                                      os.O_RDWR | os.O_CREAT, 0o600)
            self._writer_pid = os.getpid()
        return self._writer_fd

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def _rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _busy(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and (
            "locked" in str(exc) or "busy" in str(exc)
        )

    def _duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)


def _without_password(url: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(url)
    shown = {k: v for k, v in info.items() if k != "password"}
    host = shown.get("host", "")
    port = shown.get("port", "")
    return f"postgresql://{shown.get('user', '')}@{host}:{port}/{shown.get('dbname', '')}"


class PostgresKeyStore(KeyStore):
    """The key store in PostgreSQL (schema ``parcelsearch``), shared by every service host.

    Admission is one call of the function ``parcelsearch.admit`` (created with the schema):
    it locks the key's row (``SELECT … FOR UPDATE``) and then counts the request log in a
    separate statement; under READ COMMITTED that second statement sees every admission
    committed before the lock was granted, so limits stay exact across hosts.
    """

    dialect = "postgresql"

    def __init__(self, location: str | Path, busy_timeout: float = BUSY_TIMEOUT) -> None:
        super().__init__(location, busy_timeout)
        self.url = str(location)
        try:
            self.location = _without_password(self.url)
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"not a valid PostgreSQL URL for --keys: {exc}") from None
        try:
            conn = self.connection()
        except StoreBusyError as exc:
            raise ConfigurationError(
                f"cannot connect to the key store {self.location}: {exc.__cause__}"
            ) from None
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in _POSTGRES_SCHEMA:
                conn.execute(statement)

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.url, **self.connect_options())
        for statement in self.session():
            conn.execute(statement)
        return conn

    def connect_options(self) -> dict[str, Any]:
        """The options every connection to this store is opened with (autocommit, rows as
        dicts, the busy timeout to connect)."""
        return {"autocommit": True, "row_factory": dict_row,
                "connect_timeout": max(1, round(self.busy_timeout))}

    def session(self) -> tuple[str, ...]:
        """The settings every connection to this store runs with (its schema first, locks
        waited for up to the busy timeout)."""
        return ("SET search_path TO parcelsearch, public",
                f"SET lock_timeout = {int(self.busy_timeout * 1000)}")

    def sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def _begin(self, conn: Any) -> None:
        conn.execute("BEGIN")

    def _busy(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.OperationalError)

    def _duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.errors.UniqueViolation)
