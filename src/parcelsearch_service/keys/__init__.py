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
in :mod:`parcelsearch_service.limits`.

One concern a module: ``rules`` (what a key may be: names, types, services, rates and
quotas), ``schema`` (the tables, the counting trigger, PostgreSQL's admission function),
``store`` (the interface: connections, transactions, busy stores; keys created, revoked,
listed), ``request_log`` (the log as a table), ``sqlite`` and ``postgres`` (the two
implementations). Importing the package defines both, so ``KeyStore(location)`` finds them.

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

from parcelsearch_service.keys.postgres import PostgresKeyStore
from parcelsearch_service.keys.rules import (
    MAX_KEY_NAME,
    MAX_QUOTA,
    MAX_RATE,
    MIN_RATE,
    QUOTA_PERIODS,
    SERVICES,
    bounded_rate,
    check_limits,
)
from parcelsearch_service.keys.sqlite import SqliteKeyStore
from parcelsearch_service.keys.store import (
    BUSY_TIMEOUT,
    KeyStore,
    default_keys_location,
    hash_key,
    is_postgres_url,
)

__all__ = [
    "KeyStore",
    "SqliteKeyStore",
    "PostgresKeyStore",
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
