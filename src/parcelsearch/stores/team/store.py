"""The team store's schema (its version, the limits its functions hold to) and connections to it.

The SQL of each version, and ``init_team`` which runs it, are in
:mod:`parcelsearch.stores.team.migrations`.

Everything lives in one PostgreSQL schema, ``parcelsearch_team``::

    meta       the schema version
    keys       per key fingerprint (never the key): the quota stored for it
    pacers     per key: the next free send slot and a pause (Retry-After) for every member,
               with who paused and when (version 4: moved only by pace_turn and pause_key,
               which bound a pause to MOST_PAUSE and a turn to HORIZON_SLOTS intervals)
    calls      one row per call reserved: key, member, run, month; 'reserved' until
               'settled'; refunded calls are deleted; a reservation whose fate is unknown
               (a member killed) stays and counts as spent. Version 4: the sha256 of the
               reservation's token (settle and refund take the token, never an id) and the
               PostgreSQL role that reserved it
    budgets    per member: calls allowed per month or for life
    pages      pages fetched by any member (same key as the local cache: never the API key);
               version 4: the role that wrote it; keep_page never changes another role's
    leases     single flight: who is fetching a page now, until when (version 5: by which
               role, since when; written only by take_lease, renew_leases and drop_lease,
               held at most MOST_HOLD seconds in all)
    names      (version 5) each member name and the member role that first used it: a
               member role reserves, keeps pages, pauses and records runs only as its own
    turns      (version 5) the turns each member role holds at a key's pacer (MOST_TURNS)
    answered   (version 5) when a role's call of a key was last refunded (a 429's): its
               pause follows
    page_uses  a member reading a page another member paid for (a call saved)
    runs, run_pieces, run_pages, rings, run_ids
               (version 2) the run history every member's searches record (the same
               tables as :mod:`parcelsearch.stores.local.history` keeps in the ledger, plus who ran
               it); version 5: each run stamped with its role, its pieces, pages and
               GroupIDs added only by that role, rings under their own digest, at most
               MOST_RING characters, with their bounding box

Reservations are made by one call of ``parcelsearch_team.reserve(...)``: under the key's row
lock (and the member's budget row lock) it counts what is spent and inserts the
reservation only if the quota and the budget leave room — one statement, no
read-then-write race between members.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from parcelsearch.errors import Hint, TeamStoreError
from parcelsearch.stores.team.members import shown

__all__ = ["SCHEMA", "VERSION", "connect", "shown", "schema_version", "check_schema"]

SCHEMA = "parcelsearch_team"
#: The schema version this toolkit writes and reads.
VERSION = 5
#: The key's policy stored with it when nobody set it: calls per second (the vendor's
#: spike arrest), the pacer's margin, a page lease's seconds.
DEFAULT_RATE, DEFAULT_MARGIN, DEFAULT_LEASE = 10.0, 0.05, 6.0
#: The ranges ``team pace`` and the members' own settings are held to.
RATE_RANGE, MARGIN_RANGE, LEASE_RANGE = (0.001, 1000.0), (0.0, 0.5), (0.5, 3600.0)
#: Seconds to wait for the store to accept a connection.
CONNECT_TIMEOUT = 5
#: The longest pause a 429's ``Retry-After`` sets on the key (the most a member honours:
#: :attr:`parcelsearch._fetch.retries.RetryPolicy.retry_after_max`); a pause stored longer is
#: treated as this long from when it was set.
MOST_PAUSE = 120.0
#: A turn at the pacer is never further ahead than this many of the key's intervals (and a
#: pause's end): sixteen members with sixteen workers each queued, whatever a member wrote.
HORIZON_SLOTS = 256
#: The functions a member role may execute (version 4).
_MEMBER_FUNCTIONS_4 = (
    f"{SCHEMA}.reserve(text, text, text, integer, text), {SCHEMA}.settle(text), "
    f"{SCHEMA}.refund(text), {SCHEMA}.keep_page(text, text, text, text, integer, bigint, "
    f"integer, integer, text[], timestamptz, text, text, text), "
    f"{SCHEMA}.pace_turn(text, boolean), {SCHEMA}.pause_key(text, text, double precision)"
)

#: The longest a page's lease is held, renewals and all (a waiter fetches the page itself
#: after about one lease's time anyway).
MOST_HOLD = 300.0
#: The most turns at a key's pacer one role holds ahead of now (a member's workers, at most
#: 16, each hold one; ``markets`` and ``doctor`` one more).
MOST_TURNS = 32
#: The largest run's GroupIDs of one area the run history keeps (compressed bytes).
MOST_IDS_BLOB = 64 * 1024 * 1024
#: What a caller that is not the schema's owner is, inside the store's SECURITY DEFINER
#: functions (they run as the owner: ``current_user``; ``session_user`` logged in).
_A_MEMBER = "session_user <> current_user"
#: The functions a member role may execute (the only writes to ledger, pacer, leases and
#: pages).
_MEMBER_FUNCTIONS = (
    f"{SCHEMA}.reserve(text, text, text, integer, text), {SCHEMA}.settle(text), "
    f"{SCHEMA}.refund(text), {SCHEMA}.keep_page(text, text, text, text, integer, bigint, "
    f"integer, integer, text[], timestamptz, text, text, text), "
    f"{SCHEMA}.pace_turn(text, boolean), {SCHEMA}.pause_key(text, text, double precision), "
    f"{SCHEMA}.own_name(text), {SCHEMA}.take_lease(text, text, double precision), "
    f"{SCHEMA}.renew_leases(text, double precision), {SCHEMA}.drop_lease(text, text)"
)


def _failure(url: str, exc: BaseException, doing: str) -> TeamStoreError:
    reason = " ".join(str(exc).split())[:300] or type(exc).__name__
    return TeamStoreError(f"team store {shown(url)}: {doing}: {reason}")


@contextmanager
def connect(url: str, doing: str = "cannot connect") -> Iterator[Any]:
    """One autocommit connection to the store; failures raise :class:`TeamStoreError`
    naming the URL (without its password)."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - TeamSpending's pool: missing is said here, once
    except ImportError as exc:
        raise TeamStoreError(
            f"team mode needs psycopg 3 and psycopg-pool ({exc.name} is missing): "
            'pip install "parcelsearch[team]"'
        ) from None

    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        raise _failure(url, exc, "cannot connect") from None
    try:
        with conn:
            yield conn
    except psycopg.Error as exc:
        raise _failure(url, exc, doing) from None


def schema_version(conn: Any) -> int:
    """The store's schema version (0: no schema)."""
    found = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.meta",)).fetchone()[0]
    if found is None:
        return 0
    row = conn.execute(f"SELECT version FROM {SCHEMA}.meta").fetchone()
    return int(row[0]) if row else 0


def check_schema(url: str, conn: Any) -> None:
    """Raise unless the store has this toolkit's schema version."""
    version = schema_version(conn)
    if version == VERSION:
        return
    if version == 0:
        raise TeamStoreError(
            f"team store {shown(url)} has no parcelsearch schema",
            hints=[Hint("team_init", shown(url), "make it with {knob}")],
        )
    if version < VERSION:
        raise TeamStoreError(
            f"team store {shown(url)} has schema version {version}, this "
            f"parcelsearch needs {VERSION}",
            hints=[Hint("team_init", shown(url), "upgrade it with {knob}")],
        )
    raise TeamStoreError(
        f"team store {shown(url)} has schema version {version}, newer than "
        f"this parcelsearch knows ({VERSION}): upgrade parcelsearch"
    )
