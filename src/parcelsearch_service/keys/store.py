"""The key store's interface and the statements both implementations share.

:class:`KeyStore` gives each thread its own connection, runs write transactions (one writer
at a time where the database needs it), turns lock timeouts and lost servers into
:class:`~parcelsearch_service.errors.StoreBusyError`, and creates, revokes, lists and reads
keys with statements written once (``?`` placeholders, bare table names). An implementation
(:mod:`~parcelsearch_service.keys.sqlite`, :mod:`~parcelsearch_service.keys.postgres`)
supplies connections, the dialect and the mapping of its errors; ``KeyStore(location)``
opens the one that fits the location.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from parcelsearch import settings
from parcelsearch._shared import month_of
from parcelsearch.errors import ConfigurationError
from parcelsearch_service.connections import ThreadConnections
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys.request_log import REQUEST_COLUMNS, request_frame
from parcelsearch_service.keys.rules import SERVICES, check_new_key

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["KeyStore", "BUSY_TIMEOUT", "hash_key", "is_postgres_url", "default_keys_location"]

#: Seconds a request waits for a key store lock before the service answers 503.
BUSY_TIMEOUT = 5.0


def hash_key(api_key: str) -> str:
    """The stored form of a key: hex sha256 (keys are 240 random bits: no salt needed)."""
    return hashlib.sha256(api_key.encode("utf-8", "surrogateescape")).hexdigest()


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def default_keys_location() -> Path:
    """The default key store file, in the per-user service directory."""
    return Path(settings.options.service_dir) / "keys.sqlite"


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

    #: The implementation of each dialect (each registers itself when it is defined).
    _implementations: ClassVar[dict[str, type[KeyStore]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "dialect" in vars(cls):
            KeyStore._implementations.setdefault(cls.dialect, cls)

    def __new__(cls, location: str | Path, busy_timeout: float = BUSY_TIMEOUT) -> KeyStore:
        if cls is KeyStore:
            cls = KeyStore._implementations["postgresql" if is_postgres_url(location) else "sqlite"]
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
            return conn.execute(
                self.sql(statement), params if isinstance(params, Mapping) else tuple(params)
            )
        except Exception as exc:
            self._raise_if_busy(conn, exc)
            raise

    def query(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Run one read statement (``?`` placeholders) on this thread's connection; the
        cursor, as :meth:`execute` returns it."""
        return self.execute(self.connection(), statement, params)

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
        key = check_new_key(name, key_type, per_second, quota, quota_period, services)
        api_key = secrets.token_urlsafe(30)
        try:
            with self.transaction() as conn:
                self.execute(
                    conn,
                    "INSERT INTO keys (name, key_hash, key_type, per_second, quota, quota_period,"
                    " services, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        key.name,
                        hash_key(api_key),
                        key.key_type,
                        key.per_second,
                        key.quota,
                        key.quota_period,
                        key.services,
                        time.time(),
                    ),
                )
        except Exception as exc:
            if self._duplicate(exc):
                raise ConfigurationError(
                    f"a key named {key.name!r} already exists in {self.location}; "
                    "choose another name"
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
                conn,
                "UPDATE keys SET revoked = coalesce(revoked, ?) WHERE name = ?",
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
        rows = self.query("SELECT * FROM keys ORDER BY id").fetchall()
        return [self._summary(row, now) for row in rows]

    def get(self, name: str) -> dict[str, Any]:
        """One key's summary (as in :meth:`list`).

        Raises
        ------
        ConfigurationError
            No key has that name.
        """
        row = self.query("SELECT * FROM keys WHERE name = ?", (name,)).fetchone()
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
        rows = self.execute(
            conn,
            f"SELECT {', '.join(REQUEST_COLUMNS)} FROM requests WHERE key_id = ? ORDER BY id",
            (row["id"],),
        ).fetchall()
        return request_frame(rows)
