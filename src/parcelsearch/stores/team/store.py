"""The team store's schema (versioned, made idempotently) and connections to it.

Everything lives in one PostgreSQL schema, ``parcelsearch_team``::

    meta       the schema version
    keys       per key fingerprint (never the key): the quota stored for it
    pacers     per key: the next free send slot and a pause (Retry-After) for every member
    calls      one row per call reserved: key, member, run, month; 'reserved' until
               'settled'; refunded calls are deleted; a reservation whose fate is unknown
               (a member killed) stays and counts as spent
    budgets    per member: calls allowed per month or for life
    pages      pages fetched by any member (same key as the local cache: never the API key)
    leases     single flight: who is fetching a page now, until when
    page_uses  a member reading a page another member paid for (a call saved)
    runs, run_pieces, run_pages, rings, run_ids
               (version 2) the run history every member's searches record (the same
               tables as :mod:`parcelsearch.stores.local.history` keeps in the ledger, plus who ran
               it)

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

__all__ = ["SCHEMA", "VERSION", "MEMBER_GRANTS", "init_team", "connect", "shown",
           "schema_version"]

SCHEMA = "parcelsearch_team"
#: The schema version this toolkit writes and reads.
VERSION = 3
#: The key's policy stored with it when nobody set it: calls per second (the vendor's
#: spike arrest), the pacer's margin, a page lease's seconds.
DEFAULT_RATE, DEFAULT_MARGIN, DEFAULT_LEASE = 10.0, 0.05, 6.0
#: The ranges ``team pace`` and the members' own settings are held to.
RATE_RANGE, MARGIN_RANGE, LEASE_RANGE = (0.001, 1000.0), (0.0, 0.5), (0.5, 3600.0)
#: Seconds to wait for the store to accept a connection.
CONNECT_TIMEOUT = 5

#: Migration n brings the schema from version n - 1 to n (applied in order, once each).
_MIGRATIONS: dict[int, str] = {
    1: f"""
CREATE TABLE {SCHEMA}.keys (
    fingerprint text PRIMARY KEY CHECK (fingerprint ~ '^[0-9a-f]{{16}}$'),
    quota       integer CHECK (quota >= 0),
    period      text CHECK (period IN ('month', 'lifetime')),
    CHECK ((quota IS NULL) = (period IS NULL))
);
CREATE TABLE {SCHEMA}.pacers (
    fingerprint  text PRIMARY KEY,
    next_slot    timestamptz NOT NULL DEFAULT '-infinity',
    paused_until timestamptz NOT NULL DEFAULT '-infinity'
);
CREATE TABLE {SCHEMA}.calls (
    id          bigserial PRIMARY KEY,
    fingerprint text NOT NULL,
    member      text NOT NULL,
    run_id      text NOT NULL,
    month       text NOT NULL,
    state       text NOT NULL DEFAULT 'reserved' CHECK (state IN ('reserved', 'settled')),
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX calls_by_key ON {SCHEMA}.calls (fingerprint, month);
CREATE INDEX calls_by_member ON {SCHEMA}.calls (member, month);
CREATE TABLE {SCHEMA}.budgets (
    member text PRIMARY KEY,
    calls  integer NOT NULL CHECK (calls >= 0),
    period text NOT NULL CHECK (period IN ('month', 'lifetime'))
);
CREATE TABLE {SCHEMA}.pages (
    request_key  text PRIMARY KEY,
    base_url     text NOT NULL,
    path         text NOT NULL,
    polygon_json text NOT NULL,
    page         integer NOT NULL,
    rows         bigint NOT NULL,
    pages        integer NOT NULL,
    data_rows    integer NOT NULL,
    data         text[] NOT NULL,
    fetched_at   timestamptz NOT NULL,
    paid_by      text NOT NULL,
    fingerprint  text NOT NULL
);
CREATE TABLE {SCHEMA}.leases (
    request_key text PRIMARY KEY,
    holder      text NOT NULL,
    expires     timestamptz NOT NULL
);
CREATE TABLE {SCHEMA}.page_uses (
    id          bigserial PRIMARY KEY,
    request_key text NOT NULL,
    member      text NOT NULL,
    fingerprint text NOT NULL,
    month       text NOT NULL,
    at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION {SCHEMA}.month_now() RETURNS text LANGUAGE sql STABLE AS
$$ SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM') $$;
CREATE FUNCTION {SCHEMA}.spent(p_fp text, p_period text) RETURNS bigint LANGUAGE sql STABLE AS
$$ SELECT count(*) FROM {SCHEMA}.calls
   WHERE fingerprint = p_fp AND (p_period = 'lifetime' OR month = {SCHEMA}.month_now()) $$;
CREATE FUNCTION {SCHEMA}.member_spent(p_member text, p_period text) RETURNS bigint
LANGUAGE sql STABLE AS
$$ SELECT count(*) FROM {SCHEMA}.calls
   WHERE member = p_member AND (p_period = 'lifetime' OR month = {SCHEMA}.month_now()) $$;
-- One reservation: 'ok' and its id, or the limit that refused it ('quota' / 'budget'),
-- with what was spent and the limit. Serialised per key and per member by row locks.
CREATE FUNCTION {SCHEMA}.reserve(p_fp text, p_member text, p_run text, p_quota integer,
                                 p_period text)
RETURNS TABLE (id bigint, verdict text, used bigint, lim integer)
LANGUAGE plpgsql AS $$
DECLARE
    k record;
    b record;
    q integer;
    per text;
    n bigint;
BEGIN
    INSERT INTO {SCHEMA}.keys AS t (fingerprint) VALUES (p_fp) ON CONFLICT DO NOTHING;
    SELECT * INTO k FROM {SCHEMA}.keys AS t WHERE t.fingerprint = p_fp FOR UPDATE;
    q := COALESCE(p_quota, k.quota);
    per := COALESCE(p_period, k.period);
    IF q IS NOT NULL THEN
        n := {SCHEMA}.spent(p_fp, per);
        IF n >= q THEN
            RETURN QUERY SELECT NULL::bigint, 'quota'::text, n, q;
            RETURN;
        END IF;
    END IF;
    SELECT * INTO b FROM {SCHEMA}.budgets AS t WHERE t.member = p_member FOR UPDATE;
    IF FOUND THEN
        n := {SCHEMA}.member_spent(p_member, b.period);
        IF n >= b.calls THEN
            RETURN QUERY SELECT NULL::bigint, 'budget'::text, n, b.calls;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    INSERT INTO {SCHEMA}.calls AS c (fingerprint, member, run_id, month)
    VALUES (p_fp, p_member, p_run, {SCHEMA}.month_now())
    RETURNING c.id, 'ok'::text, NULL::bigint, NULL::integer;
END $$;
""",
    2: f"""
CREATE TABLE {SCHEMA}.runs (
    run_id            text PRIMARY KEY,
    started           text NOT NULL,
    finished          text NOT NULL,
    fingerprint       text NOT NULL,
    base_url          text NOT NULL,
    path              text NOT NULL,
    areas_fingerprint text NOT NULL,
    areas             integer NOT NULL,
    id_name           text NOT NULL,
    tolerance         double precision NOT NULL,
    mode              text NOT NULL,
    complete          integer NOT NULL,
    calls             integer NOT NULL,
    detail            text NOT NULL,
    member            text NOT NULL DEFAULT '',
    seq               bigserial
);
CREATE TABLE {SCHEMA}.run_pieces (
    run_id   text NOT NULL,
    area_id  text NOT NULL,
    piece_id integer NOT NULL,
    polygon  text NOT NULL,
    rows     bigint,
    pages    integer,
    status   text NOT NULL,
    changed  integer,
    seq      bigserial,
    PRIMARY KEY (run_id, area_id, piece_id)
);
CREATE INDEX run_pieces_by_polygon ON {SCHEMA}.run_pieces (polygon);
CREATE TABLE {SCHEMA}.run_pages (
    run_id  text NOT NULL,
    polygon text NOT NULL,
    page    integer NOT NULL,
    digest  text NOT NULL,
    PRIMARY KEY (run_id, polygon, page)
);
CREATE TABLE {SCHEMA}.rings (
    polygon text PRIMARY KEY,
    ring    text NOT NULL
);
CREATE TABLE {SCHEMA}.run_ids (
    run_id    text NOT NULL,
    area_id   text NOT NULL,
    group_ids bytea NOT NULL,
    seq       bigserial,
    PRIMARY KEY (run_id, area_id)
);
""",
    3: f"""
-- The key's policy lives with the key: its pace (calls per second, and the pacer's margin)
-- and how long a page's lease lasts; a member's own settings can only be stricter.
ALTER TABLE {SCHEMA}.keys
    ADD COLUMN rate double precision NOT NULL DEFAULT {DEFAULT_RATE}
        CHECK (rate BETWEEN {RATE_RANGE[0]} AND {RATE_RANGE[1]}),
    ADD COLUMN margin double precision NOT NULL DEFAULT {DEFAULT_MARGIN}
        CHECK (margin BETWEEN {MARGIN_RANGE[0]} AND {MARGIN_RANGE[1]}),
    ADD COLUMN lease_seconds double precision NOT NULL DEFAULT {DEFAULT_LEASE}
        CHECK (lease_seconds BETWEEN {LEASE_RANGE[0]} AND {LEASE_RANGE[1]});
-- Member names are case-folded: budgets and spending of names differing in case merge.
UPDATE {SCHEMA}.calls SET member = lower(member) WHERE member <> lower(member);
UPDATE {SCHEMA}.page_uses SET member = lower(member) WHERE member <> lower(member);
UPDATE {SCHEMA}.runs SET member = lower(member) WHERE member <> lower(member);
DELETE FROM {SCHEMA}.budgets AS b WHERE b.member <> lower(b.member)
    AND EXISTS (SELECT 1 FROM {SCHEMA}.budgets AS o WHERE o.member = lower(b.member));
UPDATE {SCHEMA}.budgets SET member = lower(member) WHERE member <> lower(member);
-- Calls of a key (or a member) settled: sent, as far as anyone knows.
CREATE FUNCTION {SCHEMA}.sent(p_fp text, p_member text, p_period text) RETURNS bigint
LANGUAGE sql STABLE AS
$$ SELECT count(*) FROM {SCHEMA}.calls
   WHERE state = 'settled' AND (p_fp IS NULL OR fingerprint = p_fp)
     AND (p_member IS NULL OR member = p_member)
     AND (p_period = 'lifetime' OR month = {SCHEMA}.month_now()) $$;
-- The stored quota always holds; a member's own quota (p_quota) can only lower it. The
-- refusal says which limit refused, the calls counted and how many of them were sent.
DROP FUNCTION {SCHEMA}.reserve(text, text, text, integer, text);
CREATE FUNCTION {SCHEMA}.reserve(p_fp text, p_member text, p_run text, p_quota integer,
                                 p_period text)
RETURNS TABLE (id bigint, verdict text, used bigint, lim integer, sent bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k record;
    b record;
    n bigint;
BEGIN
    INSERT INTO {SCHEMA}.keys AS t (fingerprint) VALUES (p_fp) ON CONFLICT DO NOTHING;
    SELECT * INTO k FROM {SCHEMA}.keys AS t WHERE t.fingerprint = p_fp FOR UPDATE;
    IF k.quota IS NOT NULL THEN
        n := {SCHEMA}.spent(p_fp, k.period);
        IF n >= k.quota THEN
            RETURN QUERY SELECT NULL::bigint, 'quota'::text, n, k.quota,
                                {SCHEMA}.sent(p_fp, NULL, k.period);
            RETURN;
        END IF;
    END IF;
    IF p_quota IS NOT NULL THEN
        n := {SCHEMA}.spent(p_fp, p_period);
        IF n >= p_quota THEN
            RETURN QUERY SELECT NULL::bigint, 'own quota'::text, n, p_quota,
                                {SCHEMA}.sent(p_fp, NULL, p_period);
            RETURN;
        END IF;
    END IF;
    SELECT * INTO b FROM {SCHEMA}.budgets AS t WHERE t.member = p_member FOR UPDATE;
    IF FOUND THEN
        n := {SCHEMA}.member_spent(p_member, b.period);
        IF n >= b.calls THEN
            RETURN QUERY SELECT NULL::bigint, 'budget'::text, n, b.calls,
                                {SCHEMA}.sent(NULL, p_member, b.period);
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    INSERT INTO {SCHEMA}.calls AS c (fingerprint, member, run_id, month)
    VALUES (p_fp, p_member, p_run, {SCHEMA}.month_now())
    RETURNING c.id, 'ok'::text, NULL::bigint, NULL::integer, NULL::bigint;
END $$;
-- Settling and refunding, the only writes to the ledger a member role needs besides
-- reserve: a refund takes back only a call of the last ten minutes (its answer just came).
CREATE FUNCTION {SCHEMA}.settle(p_id bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ UPDATE {SCHEMA}.calls SET state = 'settled' WHERE id = p_id $$;
CREATE FUNCTION {SCHEMA}.refund(p_id bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ DELETE FROM {SCHEMA}.calls WHERE id = p_id
   AND at > clock_timestamp() - interval '10 minutes' $$;
""",
}

#: What a member role may do (``team init --member-role``): read everything; share pages,
#: leases, the pacer and the run history; touch the ledger only through ``reserve``,
#: ``settle`` and ``refund``; never write the quota, the pace or a budget.
MEMBER_GRANTS = f"""
GRANT USAGE ON SCHEMA {SCHEMA} TO {{role}};
GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {{role}};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {{role}};
GRANT INSERT (fingerprint) ON {SCHEMA}.keys TO {{role}};
GRANT INSERT, UPDATE ON {SCHEMA}.pacers, {SCHEMA}.pages TO {{role}};
GRANT INSERT, UPDATE, DELETE ON {SCHEMA}.leases TO {{role}};
GRANT INSERT ON {SCHEMA}.page_uses, {SCHEMA}.runs, {SCHEMA}.run_pieces, {SCHEMA}.run_pages,
    {SCHEMA}.rings, {SCHEMA}.run_ids TO {{role}};
REVOKE EXECUTE ON FUNCTION {SCHEMA}.reserve(text, text, text, integer, text),
    {SCHEMA}.settle(bigint), {SCHEMA}.refund(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION {SCHEMA}.reserve(text, text, text, integer, text),
    {SCHEMA}.settle(bigint), {SCHEMA}.refund(bigint) TO {{role}};
"""




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
            "pip install \"parcelsearch[team]\"") from None

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
        raise TeamStoreError(f"team store {shown(url)} has no parcelsearch schema",
                             hints=[Hint("team_init", shown(url), "make it with {knob}")])
    if version < VERSION:
        raise TeamStoreError(f"team store {shown(url)} has schema version {version}, this "
                             f"parcelsearch needs {VERSION}",
                             hints=[Hint("team_init", shown(url), "upgrade it with {knob}")])
    raise TeamStoreError(f"team store {shown(url)} has schema version {version}, newer than "
                         f"this parcelsearch knows ({VERSION}): upgrade parcelsearch")


def init_team(url: str, member_role: str | None = None) -> tuple[int, int]:
    """Create or upgrade the team store's schema; idempotent. Returns (before, after).

    Parameters
    ----------
    url
        The store (``postgresql://…``); whoever connects here owns the schema.
    member_role
        An existing PostgreSQL role to give what a member needs and no more (see
        :data:`MEMBER_GRANTS`): members logging in with it can search, but cannot change
        the quota, the pace or a budget, nor rewrite the ledger.

    Raises
    ------
    TeamStoreError
        The store cannot be reached (the message names the URL, without its password), or
        its schema is newer than this toolkit, or ``member_role`` does not exist.
    """
    with connect(url, "cannot make the schema") as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('parcelsearch_team'))")
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.meta (version integer NOT NULL)")
        before = schema_version(conn)
        if before > VERSION:
            raise TeamStoreError(f"team store {shown(url)} has schema version {before}, newer "
                                 f"than this parcelsearch knows ({VERSION})")
        for version in range(before + 1, VERSION + 1):
            conn.execute(_MIGRATIONS[version])
        conn.execute(f"DELETE FROM {SCHEMA}.meta")
        conn.execute(f"INSERT INTO {SCHEMA}.meta (version) VALUES (%s)", (VERSION,))
        if member_role is not None:
            _grant_member(url, conn, member_role)
    return before, VERSION


def _grant_member(url: str, conn: Any, role: str) -> None:
    from psycopg import sql

    found = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    if found is None:
        raise TeamStoreError(f"team store {shown(url)}: no role {role[:64]!r}: make it first "
                             "(CREATE ROLE … LOGIN PASSWORD …)")
    for statement in MEMBER_GRANTS.split(";"):
        if statement.strip():
            conn.execute(sql.SQL(statement.replace("{role}", "{}")).format(
                sql.Identifier(role)))
