"""The SQL that makes the team store's schema version 5 from version 4 (issue 58: trust
boundaries, second round); :data:`parcelsearch.stores.team.migrations.MIGRATIONS` runs it."""

from __future__ import annotations

from parcelsearch.stores.history import MOST_RING
from parcelsearch.stores.team.store import (
    _A_MEMBER,
    _MEMBER_FUNCTIONS,
    LEASE_RANGE,
    MOST_HOLD,
    MOST_IDS_BLOB,
    MOST_PAUSE,
    MOST_TURNS,
    SCHEMA,
)

__all__ = ["MIGRATION_5"]

MIGRATION_5 = f"""
-- Trust boundaries, second round (issue 58). A member name belongs to the first member role
-- that uses it (the owner's connection may use any): reserve, keep_page, pause_key and the
-- run history take only the caller's own names.
CREATE TABLE {SCHEMA}.names (
    member text PRIMARY KEY,
    role   text NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO {SCHEMA}.names (member, role)
    SELECT DISTINCT ON (member) member, role FROM {SCHEMA}.calls
    WHERE role <> current_user ORDER BY member, id;
CREATE FUNCTION {SCHEMA}.own_name(p_member text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r text;
BEGIN
    IF session_user = current_user THEN
        RETURN true;
    END IF;
    INSERT INTO {SCHEMA}.names AS n (member, role) VALUES (p_member, session_user)
        ON CONFLICT DO NOTHING;
    SELECT n.role INTO r FROM {SCHEMA}.names AS n WHERE n.member = p_member;
    RETURN r = session_user;
END $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.reserve(p_fp text, p_member text, p_run text,
                                            p_quota integer, p_period text)
RETURNS TABLE (id bigint, token text, verdict text, used bigint, lim integer, sent bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    k record;
    b record;
    n bigint;
    t text := replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
BEGIN
    IF NOT {SCHEMA}.own_name(p_member) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::text, 'name'::text, NULL::bigint,
                            NULL::integer, NULL::bigint;
        RETURN;
    END IF;
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
-- One role a person: a page is replaced (refreshed) only by the role and the member name
-- that wrote it (the owner's connection: any page).
CREATE OR REPLACE FUNCTION {SCHEMA}.keep_page(p_key text, p_base_url text, p_path text,
    p_polygon text, p_page integer, p_rows bigint, p_pages integer, p_data_rows integer,
    p_data text[], p_fetched timestamptz, p_paid_by text, p_fp text, p_holder text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT {SCHEMA}.own_name(p_paid_by) THEN
        RETURN;
    END IF;
    INSERT INTO {SCHEMA}.pages AS t (request_key, base_url, path, polygon_json, page, rows,
        pages, data_rows, data, fetched_at, paid_by, fingerprint)
    VALUES (p_key, p_base_url, p_path, p_polygon, p_page, p_rows, p_pages, p_data_rows,
            p_data, LEAST(p_fetched, clock_timestamp()), p_paid_by, p_fp)
    ON CONFLICT (request_key) DO UPDATE SET rows = EXCLUDED.rows, pages = EXCLUDED.pages,
        data_rows = EXCLUDED.data_rows, data = EXCLUDED.data,
        fetched_at = EXCLUDED.fetched_at, paid_by = EXCLUDED.paid_by, role = session_user
    WHERE session_user = current_user OR (t.role = session_user AND t.paid_by = p_paid_by);
    DELETE FROM {SCHEMA}.leases AS l WHERE l.request_key = p_key AND l.holder = p_holder
        AND l.role = session_user;
END $$;
-- Leases are taken, renewed and dropped only through these: a lease is held at most
-- {MOST_HOLD:g} s in all, by the role that took it.
ALTER TABLE {SCHEMA}.leases ADD COLUMN role text NOT NULL DEFAULT session_user,
    ADD COLUMN taken timestamptz NOT NULL DEFAULT clock_timestamp();
CREATE FUNCTION {SCHEMA}.take_lease(p_key text, p_holder text, p_seconds double precision)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
INSERT INTO {SCHEMA}.leases AS l (request_key, holder, expires, role, taken)
VALUES (p_key, p_holder, clock_timestamp()
        + make_interval(secs => LEAST(GREATEST(p_seconds, {LEASE_RANGE[0]}),
                                      {LEASE_RANGE[1]})), session_user, clock_timestamp())
ON CONFLICT (request_key) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires,
    role = EXCLUDED.role, taken = EXCLUDED.taken
WHERE l.expires < clock_timestamp()
RETURNING true
$$;
CREATE FUNCTION {SCHEMA}.renew_leases(p_holder text, p_seconds double precision)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
UPDATE {SCHEMA}.leases AS l SET expires = LEAST(
    clock_timestamp() + make_interval(secs => LEAST(GREATEST(p_seconds, {LEASE_RANGE[0]}),
                                                    {LEASE_RANGE[1]})),
    l.taken + make_interval(secs => {MOST_HOLD}))
WHERE l.holder = p_holder AND l.role = session_user AND l.expires >= clock_timestamp()
$$;
CREATE FUNCTION {SCHEMA}.drop_lease(p_key text, p_holder text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DELETE FROM {SCHEMA}.leases AS l WHERE l.request_key = p_key AND l.holder = p_holder
    AND l.role = session_user
$$;
-- A pause is set by a member only after a call of its own with the key (in the last
-- {MOST_PAUSE:g} s: the 429's), and a role does not set one again while its last one could
-- last; a role holds at most {MOST_TURNS} turns at the pacer ahead of now.
CREATE TABLE {SCHEMA}.answered (
    fingerprint text NOT NULL,
    role        text NOT NULL,
    at          timestamptz NOT NULL,
    PRIMARY KEY (fingerprint, role)
);
-- A refund (a 429's call, which the service did not count) keeps when the role was last
-- answered so: its pause follows.
CREATE OR REPLACE FUNCTION {SCHEMA}.refund(p_token text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fp text;
BEGIN
    DELETE FROM {SCHEMA}.calls AS c WHERE c.token_hash = sha256(convert_to(p_token, 'UTF8'))
        AND c.at > clock_timestamp() - interval '10 minutes' RETURNING c.fingerprint INTO fp;
    IF fp IS NOT NULL THEN
        INSERT INTO {SCHEMA}.answered AS a (fingerprint, role, at)
            VALUES (fp, session_user, clock_timestamp())
            ON CONFLICT (fingerprint, role) DO UPDATE SET at = EXCLUDED.at;
    END IF;
END $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.pause_key(p_fp text, p_member text,
                                              p_seconds double precision)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
UPDATE {SCHEMA}.pacers AS x SET paused_at = clock_timestamp(),
    paused_until = clock_timestamp()
        + make_interval(secs => LEAST(GREATEST(p_seconds, 0), {MOST_PAUSE})),
    paused_by = p_member, paused_role = session_user
WHERE x.fingerprint = p_fp AND LEAST(x.paused_until,
    x.paused_at + make_interval(secs => {MOST_PAUSE})) < clock_timestamp()
        + make_interval(secs => LEAST(GREATEST(p_seconds, 0), {MOST_PAUSE}))
    AND (session_user = current_user OR (
        {SCHEMA}.own_name(p_member)
        AND (EXISTS (SELECT 1 FROM {SCHEMA}.calls AS c WHERE c.fingerprint = p_fp
                     AND c.role = session_user
                     AND c.at > clock_timestamp() - make_interval(secs => {MOST_PAUSE}))
             OR EXISTS (SELECT 1 FROM {SCHEMA}.answered AS a WHERE a.fingerprint = p_fp
                        AND a.role = session_user
                        AND a.at > clock_timestamp() - make_interval(secs => {MOST_PAUSE})))
        AND NOT (x.paused_role IS NOT DISTINCT FROM session_user
                 AND x.paused_at > clock_timestamp() - make_interval(secs => {MOST_PAUSE}))));
$$;
CREATE TABLE {SCHEMA}.turns (
    fingerprint text NOT NULL,
    role        text NOT NULL,
    turn        timestamptz NOT NULL
);
CREATE INDEX turns_by_role ON {SCHEMA}.turns (fingerprint, role);
ALTER FUNCTION {SCHEMA}.pace_turn(text, boolean) RENAME TO pace_turn_unbounded;
REVOKE EXECUTE ON FUNCTION {SCHEMA}.pace_turn_unbounded(text, boolean) FROM PUBLIC;
CREATE FUNCTION {SCHEMA}.pace_turn(p_fp text, p_first boolean)
RETURNS TABLE (wait double precision, bounded text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
    w double precision;
    b text;
BEGIN
    IF {_A_MEMBER} THEN
        PERFORM 1 FROM {SCHEMA}.pacers AS x WHERE x.fingerprint = p_fp FOR UPDATE;
        DELETE FROM {SCHEMA}.turns AS t WHERE t.fingerprint = p_fp
            AND t.turn < clock_timestamp();
        SELECT count(*) INTO n FROM {SCHEMA}.turns AS t
            WHERE t.fingerprint = p_fp AND t.role = session_user;
        IF n >= {MOST_TURNS} THEN
            RAISE EXCEPTION 'role % holds % turns at the pacer already (at most {MOST_TURNS})',
                session_user, n USING ERRCODE = 'program_limit_exceeded';
        END IF;
    END IF;
    SELECT u.wait, u.bounded INTO w, b FROM {SCHEMA}.pace_turn_unbounded(p_fp, p_first) AS u;
    IF {_A_MEMBER} THEN
        INSERT INTO {SCHEMA}.turns (fingerprint, role, turn)
            VALUES (p_fp, session_user, clock_timestamp() + make_interval(secs => w));
    END IF;
    RETURN QUERY SELECT w, b;
END $$;
-- The run history: each run is stamped with the role that recorded it; its pieces, pages
-- and GroupIDs are added only by that role; a ring is stored under its own digest and no
-- longer than {MOST_RING} characters, a blob of GroupIDs no larger than {MOST_IDS_BLOB}
-- bytes.
ALTER TABLE {SCHEMA}.runs ADD COLUMN role text NOT NULL DEFAULT session_user;
ALTER TABLE {SCHEMA}.rings ADD CONSTRAINT ring_size CHECK (length(ring) <= {MOST_RING})
    NOT VALID;
ALTER TABLE {SCHEMA}.runs ADD CONSTRAINT detail_size
    CHECK (length(detail) <= {MOST_IDS_BLOB}) NOT VALID;
ALTER TABLE {SCHEMA}.run_ids ADD CONSTRAINT ids_size
    CHECK (length(group_ids) <= {MOST_IDS_BLOB}) NOT VALID;
CREATE FUNCTION {SCHEMA}.stamp_run() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.role := session_user;
    IF NOT {SCHEMA}.own_name(NEW.member) THEN
        RAISE EXCEPTION 'member name % belongs to another role', left(NEW.member, 64)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER stamp_run BEFORE INSERT ON {SCHEMA}.runs
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.stamp_run();
CREATE FUNCTION {SCHEMA}.own_run() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF {_A_MEMBER} AND NOT EXISTS (SELECT 1 FROM {SCHEMA}.runs AS r
                                   WHERE r.run_id = NEW.run_id AND r.role = session_user) THEN
        RAISE EXCEPTION 'run % was not recorded by role %', left(NEW.run_id, 64),
            session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER own_run BEFORE INSERT ON {SCHEMA}.run_pieces
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.own_run();
CREATE TRIGGER own_run BEFORE INSERT ON {SCHEMA}.run_pages
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.own_run();
CREATE TRIGGER own_run BEFORE INSERT ON {SCHEMA}.run_ids
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.own_run();
-- Each ring's bounding box, computed by the store (nearby() chooses rings by it in SQL).
ALTER TABLE {SCHEMA}.rings ADD COLUMN x0 double precision, ADD COLUMN y0 double precision,
    ADD COLUMN x1 double precision, ADD COLUMN y1 double precision;
CREATE FUNCTION {SCHEMA}.ring_box(p_ring text) RETURNS double precision[]
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT ARRAY[min((p->>0)::float8), min((p->>1)::float8),
                         max((p->>0)::float8), max((p->>1)::float8)]
            FROM jsonb_array_elements(p_ring::jsonb) AS p);
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;
UPDATE {SCHEMA}.rings AS g SET x0 = b[1], y0 = b[2], x1 = b[3], y1 = b[4]
    FROM (SELECT polygon, {SCHEMA}.ring_box(ring) AS b FROM {SCHEMA}.rings
          WHERE length(ring) <= {MOST_RING}) AS o WHERE o.polygon = g.polygon;
CREATE FUNCTION {SCHEMA}.ring_digest() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b double precision[];
BEGIN
    IF NEW.polygon <> left(encode(sha256(convert_to(NEW.ring, 'UTF8')), 'hex'), 32) THEN
        RAISE EXCEPTION 'ring % is not stored under its digest', left(NEW.polygon, 64)
            USING ERRCODE = 'check_violation';
    END IF;
    b := CASE WHEN length(NEW.ring) <= {MOST_RING} THEN {SCHEMA}.ring_box(NEW.ring) END;
    NEW.x0 := b[1]; NEW.y0 := b[2]; NEW.x1 := b[3]; NEW.y1 := b[4];
    RETURN NEW;
END $$;
CREATE TRIGGER ring_digest BEFORE INSERT ON {SCHEMA}.rings
    FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.ring_digest();
REVOKE EXECUTE ON FUNCTION {_MEMBER_FUNCTIONS} FROM PUBLIC;
"""

#: Migration n brings the schema from version n - 1 to n (applied in order, once each).
