"""The key store in PostgreSQL (schema ``parcelsearch``), shared by every service host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import psycopg.errors
from psycopg.rows import dict_row

from parcelsearch.errors import ConfigurationError
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys.schema import POSTGRES_SCHEMA, SCHEMA_LOCK
from parcelsearch_service.keys.store import BUSY_TIMEOUT, KeyStore

__all__ = ["PostgresKeyStore"]


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
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            for statement in POSTGRES_SCHEMA:
                conn.execute(statement)

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self.url, **self.connect_options())
        for statement in self.session():
            conn.execute(statement)
        return conn

    def connect_options(self) -> dict[str, Any]:
        """The options every connection to this store is opened with (autocommit, rows as
        dicts, the busy timeout to connect)."""
        return {
            "autocommit": True,
            "row_factory": dict_row,
            "connect_timeout": max(1, round(self.busy_timeout)),
        }

    def session(self) -> tuple[str, ...]:
        """The settings every connection to this store runs with (its schema first, locks
        waited for up to the busy timeout)."""
        return (
            "SET search_path TO parcelsearch, public",
            f"SET lock_timeout = {int(self.busy_timeout * 1000)}",
        )

    def sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def _begin(self, conn: Any) -> None:
        conn.execute("BEGIN")

    def _busy(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.errors.LockNotAvailable | psycopg.OperationalError)

    def _duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, psycopg.errors.UniqueViolation)
