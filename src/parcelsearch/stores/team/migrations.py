"""The team store's schema made or upgraded, idempotently: the SQL of each version from the one
before (:data:`MIGRATIONS`; version 5's in :mod:`parcelsearch.stores.team.migration_5`), what
a member role is granted (:data:`MEMBER_GRANTS`), and :func:`init_team`, which runs them."""

from __future__ import annotations

from typing import Any

from parcelsearch._fetch.pacing import FIRST_CALL_ALLOWANCE
from parcelsearch.errors import TeamStoreError
from parcelsearch.stores.spending import RESERVE_LEAD
from parcelsearch.stores.team.migration_5 import MIGRATION_5
from parcelsearch.stores.team.store import (
    _MEMBER_FUNCTIONS,
    _MEMBER_FUNCTIONS_4,
    DEFAULT_LEASE,
    DEFAULT_MARGIN,
    DEFAULT_RATE,
    HORIZON_SLOTS,
    LEASE_RANGE,
    MARGIN_RANGE,
    MOST_PAUSE,
    RATE_RANGE,
    SCHEMA,
    VERSION,
    connect,
    schema_version,
    shown,
)

__all__ = ["MIGRATIONS", "MEMBER_GRANTS", "init_team"]

MIGRATIONS: dict[int, str] = {
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
    4: f"""
-- Trust boundaries (issue 46). A reservation is held by its token: reserve returns it, the
-- store keeps only its sha256, and settle and refund take the token, never an id.
ALTER TABLE {SCHEMA}.calls ADD COLUMN token_hash bytea UNIQUE,
    ADD COLUMN role text NOT NULL DEFAULT session_user;
DROP FUNCTION {SCHEMA}.reserve(text, text, text, integer, text);
DROP FUNCTION {SCHEMA}.settle(bigint);
DROP FUNCTION {SCHEMA}.refund(bigint);
CREATE FUNCTION {SCHEMA}.reserve(p_fp text, p_member text, p_run text, p_quota integer,
                                 p_period text)
RETURNS TABLE (id bigint, token text, verdict text, used bigint, lim integer, sent bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k record;
    b record;
    n bigint;
    t text := replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
BEGIN
    INSERT INTO {SCHEMA}.keys AS x (fingerprint) VALUES (p_fp) ON CONFLICT DO NOTHING;
    SELECT * INTO k FROM {SCHEMA}.keys AS x WHERE x.fingerprint = p_fp FOR UPDATE;
    IF k.quota IS NOT NULL THEN
        n := {SCHEMA}.spent(p_fp, k.period);
        IF n >= k.quota THEN
            RETURN QUERY SELECT NULL::bigint, NULL::text, 'quota'::text, n, k.quota,
                                {SCHEMA}.sent(p_fp, NULL, k.period);
            RETURN;
        END IF;
    END IF;
    IF p_quota IS NOT NULL THEN
        n := {SCHEMA}.spent(p_fp, p_period);
        IF n >= p_quota THEN
            RETURN QUERY SELECT NULL::bigint, NULL::text, 'own quota'::text, n, p_quota,
                                {SCHEMA}.sent(p_fp, NULL, p_period);
            RETURN;
        END IF;
    END IF;
    SELECT * INTO b FROM {SCHEMA}.budgets AS x WHERE x.member = p_member FOR UPDATE;
    IF FOUND THEN
        n := {SCHEMA}.member_spent(p_member, b.period);
        IF n >= b.calls THEN
            RETURN QUERY SELECT NULL::bigint, NULL::text, 'budget'::text, n, b.calls,
                                {SCHEMA}.sent(NULL, p_member, b.period);
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    INSERT INTO {SCHEMA}.calls AS c (fingerprint, member, run_id, month, token_hash)
    VALUES (p_fp, p_member, p_run, {SCHEMA}.month_now(), sha256(convert_to(t, 'UTF8')))
    RETURNING c.id, t, 'ok'::text, NULL::bigint, NULL::integer, NULL::bigint;
END $$;
CREATE FUNCTION {SCHEMA}.settle(p_token text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ UPDATE {SCHEMA}.calls SET state = 'settled'
   WHERE token_hash = sha256(convert_to(p_token, 'UTF8')) $$;
CREATE FUNCTION {SCHEMA}.refund(p_token text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ DELETE FROM {SCHEMA}.calls WHERE token_hash = sha256(convert_to(p_token, 'UTF8'))
   AND at > clock_timestamp() - interval '10 minutes' $$;
-- A page is written by the role that fetched it; keep_page adds a page, and replaces one
-- (a refresh) only when the same role wrote it. Its fetched_at is never in the future.
ALTER TABLE {SCHEMA}.pages ADD COLUMN role text NOT NULL DEFAULT session_user;
CREATE FUNCTION {SCHEMA}.keep_page(p_key text, p_base_url text, p_path text,
    p_polygon text, p_page integer, p_rows bigint, p_pages integer, p_data_rows integer,
    p_data text[], p_fetched timestamptz, p_paid_by text, p_fp text, p_holder text)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
INSERT INTO {SCHEMA}.pages AS t (request_key, base_url, path, polygon_json, page, rows,
    pages, data_rows, data, fetched_at, paid_by, fingerprint)
VALUES (p_key, p_base_url, p_path, p_polygon, p_page, p_rows, p_pages, p_data_rows, p_data,
        LEAST(p_fetched, clock_timestamp()), p_paid_by, p_fp)
ON CONFLICT (request_key) DO UPDATE SET rows = EXCLUDED.rows, pages = EXCLUDED.pages,
    data_rows = EXCLUDED.data_rows, data = EXCLUDED.data, fetched_at = EXCLUDED.fetched_at,
    paid_by = EXCLUDED.paid_by
WHERE t.role = session_user;
DELETE FROM {SCHEMA}.leases WHERE request_key = p_key AND holder = p_holder;
$$;
-- The pacer is moved only by pace_turn and pause_key: a pause lasts at most
-- {MOST_PAUSE:g} s from when it was set (the longest Retry-After honoured), a turn is never
-- further than {HORIZON_SLOTS} of the key's intervals after the pause (or now); who paused
-- is kept.
ALTER TABLE {SCHEMA}.pacers ADD COLUMN paused_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN paused_by text, ADD COLUMN paused_role text;
UPDATE {SCHEMA}.pacers SET paused_at = clock_timestamp(),
    paused_until = LEAST(paused_until, clock_timestamp() + interval '{MOST_PAUSE:g} seconds')
    WHERE paused_until > clock_timestamp();
CREATE FUNCTION {SCHEMA}.pace_turn(p_fp text, p_first boolean)
RETURNS TABLE (wait double precision, bounded text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k record;
    p record;
    now_ timestamptz;
    step double precision := 1.0 / ({DEFAULT_RATE} * (1 - {DEFAULT_MARGIN}));
    pause_end timestamptz;
    slot timestamptz;
    turn timestamptz;
    why text;
BEGIN
    INSERT INTO {SCHEMA}.pacers AS x (fingerprint) VALUES (p_fp) ON CONFLICT DO NOTHING;
    SELECT x.rate, x.margin INTO k FROM {SCHEMA}.keys AS x WHERE x.fingerprint = p_fp;
    IF FOUND THEN
        step := 1.0 / (k.rate * (1 - k.margin));
    END IF;
    SELECT * INTO p FROM {SCHEMA}.pacers AS x WHERE x.fingerprint = p_fp FOR UPDATE;
    now_ := clock_timestamp();  -- after the lock: a turn counted from before it is late
    pause_end := LEAST(p.paused_until,
                       p.paused_at + make_interval(secs => {MOST_PAUSE}));
    slot := LEAST(p.next_slot, GREATEST(now_, pause_end)
                               + make_interval(secs => {HORIZON_SLOTS} * step));
    IF pause_end < p.paused_until AND p.paused_until > now_ THEN
        why := format('a pause until %s by %s was bounded to %s s', p.paused_until,
                      COALESCE(p.paused_by, p.paused_role, 'the owner'), {MOST_PAUSE:g});
    ELSIF slot < p.next_slot THEN
        why := format('the next turn, at %s, was bounded to %s s ahead', p.next_slot,
                      round(EXTRACT(EPOCH FROM slot - now_)));
    END IF;
    turn := GREATEST(now_ + make_interval(secs => {RESERVE_LEAD}), slot, pause_end);
    UPDATE {SCHEMA}.pacers AS x SET paused_until = pause_end,
        next_slot = turn + make_interval(secs => step
                                         + CASE WHEN p_first THEN {FIRST_CALL_ALLOWANCE}
                                                ELSE 0 END)
        WHERE x.fingerprint = p_fp;
    RETURN QUERY SELECT EXTRACT(EPOCH FROM turn - clock_timestamp())::double precision, why;
END $$;
CREATE FUNCTION {SCHEMA}.pause_key(p_fp text, p_member text, p_seconds double precision)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
UPDATE {SCHEMA}.pacers AS x SET paused_at = clock_timestamp(),
    paused_until = clock_timestamp()
        + make_interval(secs => LEAST(GREATEST(p_seconds, 0), {MOST_PAUSE})),
    paused_by = p_member, paused_role = session_user
WHERE x.fingerprint = p_fp AND LEAST(x.paused_until,
    x.paused_at + make_interval(secs => {MOST_PAUSE})) < clock_timestamp()
        + make_interval(secs => LEAST(GREATEST(p_seconds, 0), {MOST_PAUSE}));
$$;
REVOKE EXECUTE ON FUNCTION {_MEMBER_FUNCTIONS_4} FROM PUBLIC;
""",
    5: MIGRATION_5,
}

#: What a member role may do (``team init --member-role``): read everything; record its own
#: runs in the run history (stamped and checked by triggers); touch the ledger, the pacer,
#: the leases and the pages only through the store's functions (``reserve`` → ``settle`` |
#: ``refund`` by the reservation's token; ``pace_turn`` and ``pause_key``, bounded by the
#: key's policy; ``take_lease``, ``renew_leases``, ``drop_lease``; ``keep_page``, which never
#: changes a page another role or member name wrote), each only as the role's own member
#: names; never write the quota, the pace or a budget. The ``REVOKE`` first takes back what
#: an older store granted (version 3 let a member UPDATE pages and pacers, version 4 write
#: leases and execute the unbounded pacer).
MEMBER_GRANTS = f"""
REVOKE ALL ON ALL TABLES IN SCHEMA {SCHEMA} FROM {{role}};
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA {SCHEMA} FROM {{role}};
GRANT USAGE ON SCHEMA {SCHEMA} TO {{role}};
GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {{role}};
GRANT USAGE ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {{role}};
GRANT INSERT (fingerprint) ON {SCHEMA}.keys, {SCHEMA}.pacers TO {{role}};
GRANT INSERT ON {SCHEMA}.page_uses, {SCHEMA}.runs, {SCHEMA}.run_pieces, {SCHEMA}.run_pages,
    {SCHEMA}.rings, {SCHEMA}.run_ids TO {{role}};
GRANT EXECUTE ON FUNCTION {_MEMBER_FUNCTIONS} TO {{role}};
"""


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
            raise TeamStoreError(
                f"team store {shown(url)} has schema version {before}, newer "
                f"than this parcelsearch knows ({VERSION})"
            )
        members = _member_roles(conn) if before < VERSION else []
        for version in range(before + 1, VERSION + 1):
            conn.execute(MIGRATIONS[version])
        conn.execute(f"DELETE FROM {SCHEMA}.meta")
        conn.execute(f"INSERT INTO {SCHEMA}.meta (version) VALUES (%s)", (VERSION,))
        for role in [*members, *([member_role] if member_role is not None else [])]:
            _grant_member(url, conn, role)
    return before, VERSION


def _member_roles(conn: Any) -> list[str]:
    """The roles an older ``team init --member-role`` made members (they read the ledger
    and do not own it): an upgrade gives them this version's grants, and takes back the
    rest."""
    if conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.calls",)).fetchone()[0] is None:
        return []
    rows = conn.execute(
        "SELECT DISTINCT grantee FROM information_schema.role_table_grants "
        "WHERE table_schema = %s AND table_name = 'calls' AND privilege_type = 'SELECT' "
        "AND grantee NOT IN (current_user, 'PUBLIC') "
        "AND grantee <> (SELECT tableowner FROM pg_tables WHERE schemaname = %s "
        "AND tablename = 'calls')",
        (SCHEMA, SCHEMA),
    ).fetchall()
    return [str(row[0]) for row in rows]


def _grant_member(url: str, conn: Any, role: str) -> None:
    from psycopg import sql

    found = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
    if found is None:
        raise TeamStoreError(
            f"team store {shown(url)}: no role {role[:64]!r}: make it first "
            "(CREATE ROLE … LOGIN PASSWORD …)"
        )
    for statement in MEMBER_GRANTS.split(";"):
        if statement.strip():
            conn.execute(sql.SQL(statement.replace("{role}", "{}")).format(sql.Identifier(role)))
