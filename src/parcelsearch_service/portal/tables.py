"""The portal's tables, beside the keys in the same store.

The portal keeps its own tables in the key store (one source of truth with
``parcelsearch keys …`` and the gateway):

- ``portal_users``: e-mail, scrypt hash, admin flag;
- ``portal_sessions``: the sha256 of each session cookie, its user (``NULL`` before sign-in),
  its CSRF token, when it started and was last seen;
- ``portal_signin_failures``: sign-in attempts not (yet) known to have succeeded (e-mail,
  client address, time), for throttling: each is recorded *before* its password is checked;
- ``portal_devices``: browsers a user signed in from (the sha256 of a device cookie), which
  the account's throttle does not slow down;
- ``portal_apps``: which user owns which key, under which app name (unique per user; keys
  made with ``parcelsearch keys create`` have no owner; admins see them);
- ``spike_refusals``: spike-arrest refusals per key and UTC day (the gateway records them;
  they are not in the request log, which holds admitted requests only);
- ``portal_signins``: each account's recent successful sign-ins (time, client address, the
  browser's own description), shown on its Account page;
- ``portal_admin_actions``: what an admin did to another user's app (revoked it, changed its
  limits: who, when, what), shown on the app's page to its owner.

Keys themselves are created, revoked, counted and listed through
:class:`~parcelsearch_service.keys.KeyStore`; only a key's hash (regenerate) and its limits
(admin) are updated by the portal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parcelsearch_service.keys.postgres import PostgresKeyStore
from parcelsearch_service.keys.store import KeyStore

__all__ = ["StorePart", "create_tables", "serialise_signins"]

#: The portal's tables; ``{p}`` is the schema prefix, ``{id}``/``{ref}``/``{real}`` the
#: types (SQLite: ``INTEGER PRIMARY KEY``/``INTEGER``/``REAL``; PostgreSQL: ``BIGSERIAL
#: PRIMARY KEY``/``BIGINT``/``DOUBLE PRECISION`` in schema ``parcelsearch``).
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS {p}portal_users (
    id {id},
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created {real} NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_sessions (
    token_hash TEXT PRIMARY KEY,
    user_id {ref} REFERENCES {p}portal_users(id),
    csrf TEXT NOT NULL,
    created {real} NOT NULL,
    last_seen {real} NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_signin_failures (
    id {id},
    email TEXT NOT NULL,
    address TEXT NOT NULL,
    time {real} NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS portal_signin_failures_email"
    " ON {p}portal_signin_failures (email, time)",
    "CREATE INDEX IF NOT EXISTS portal_signin_failures_address"
    " ON {p}portal_signin_failures (address, time)",
    """CREATE TABLE IF NOT EXISTS {p}portal_devices (
    token_hash TEXT PRIMARY KEY,
    user_id {ref} NOT NULL REFERENCES {p}portal_users(id),
    created {real} NOT NULL,
    failures {ref} NOT NULL DEFAULT 0
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_apps (
    key_id {ref} PRIMARY KEY REFERENCES {p}keys(id),
    user_id {ref} NOT NULL REFERENCES {p}portal_users(id)
)""",
    """CREATE TABLE IF NOT EXISTS {p}spike_refusals (
    key_id {ref} NOT NULL REFERENCES {p}keys(id),
    day TEXT NOT NULL,
    count {ref} NOT NULL,
    PRIMARY KEY (key_id, day)
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_signins (
    id {id},
    user_id {ref} NOT NULL REFERENCES {p}portal_users(id),
    time {real} NOT NULL,
    address TEXT NOT NULL,
    agent TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS portal_signins_user ON {p}portal_signins (user_id, time)",
    """CREATE TABLE IF NOT EXISTS {p}portal_admin_actions (
    id {id},
    key_id {ref} NOT NULL REFERENCES {p}keys(id),
    time {real} NOT NULL,
    admin TEXT NOT NULL,
    action TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS portal_admin_actions_key ON {p}portal_admin_actions (key_id)",
)
_SQLITE_TYPES = {"p": "", "id": "INTEGER PRIMARY KEY", "ref": "INTEGER", "real": "REAL"}
_POSTGRES_TYPES = {
    "p": "parcelsearch.",
    "id": "BIGSERIAL PRIMARY KEY",
    "ref": "BIGINT",
    "real": "DOUBLE PRECISION",
}
#: Advisory lock taken while creating the portal's PostgreSQL tables (workers start at once).
_SCHEMA_LOCK = 0x706F7274616C
#: ... and while checking a sign-in's throttles (attempts are serialised).
_SIGNIN_LOCK = _SCHEMA_LOCK + 1

#: App names are unique per user: the key behind an app is named ``<e-mail>/<app name>`` in the
#: key store (unique there, and what the gateway's quota message names), the app keeps its
#: own name here. Added to stores made before.
_APP_NAME_COLUMN = "ALTER TABLE {p}portal_apps ADD COLUMN name TEXT"
_APP_NAME_UNIQUE = (
    "CREATE UNIQUE INDEX IF NOT EXISTS portal_apps_user_name ON {p}portal_apps (user_id, name)"
)


def create_tables(keys: KeyStore) -> None:
    """Create the portal's tables in ``keys`` if missing (and add what older stores lack),
    in one transaction.

    Parameters
    ----------
    keys
        The key store the gateway uses.
    """
    postgres = isinstance(keys, PostgresKeyStore)
    types = _POSTGRES_TYPES if postgres else _SQLITE_TYPES
    with keys.transaction() as conn:
        if postgres:
            keys.execute(conn, "SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
        for statement in _SCHEMA:
            keys.execute(conn, statement.format(**types))
        if not _has_app_names(keys, conn):
            keys.execute(conn, _APP_NAME_COLUMN.format(**types))
        keys.execute(conn, _APP_NAME_UNIQUE.format(**types))


def _has_app_names(keys: KeyStore, conn: Any) -> bool:
    if isinstance(keys, PostgresKeyStore):
        return (
            keys.execute(
                conn,
                (
                    "SELECT 1 FROM information_schema.columns WHERE table_schema = 'parcelsearch'"
                    " AND table_name = 'portal_apps' AND column_name = 'name'"
                ),
            ).fetchone()
            is not None
        )
    rows = keys.execute(conn, "PRAGMA table_info(portal_apps)").fetchall()
    return any(row["name"] == "name" for row in rows)


def serialise_signins(keys: KeyStore, conn: Any) -> None:
    """Inside a transaction: wait for other sign-ins' checks (SQLite's ``BEGIN IMMEDIATE``
    does it already; PostgreSQL takes a transaction-scoped advisory lock).

    Parameters
    ----------
    keys
        The key store.
    conn
        The connection of the transaction.
    """
    if isinstance(keys, PostgresKeyStore):
        keys.execute(conn, "SELECT pg_advisory_xact_lock(?)", (_SIGNIN_LOCK,))


class StorePart:
    """One part of the portal's storage: its tables are in ``keys``, ``clock`` tells the time.

    Parameters
    ----------
    keys
        The key store that holds the portal's tables.
    clock
        Seconds since the epoch.
    """

    def __init__(self, keys: KeyStore, clock: Callable[[], float]) -> None:
        self.keys = keys
        self.clock = clock
