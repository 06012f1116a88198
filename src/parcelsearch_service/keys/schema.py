"""The key store's tables: ``keys`` (hashes, limits, counters) and ``requests`` (the request log).

SQLite counts a request with a trigger; PostgreSQL keeps the tables in schema
``parcelsearch`` and admits with the PL/pgSQL function ``parcelsearch.admit`` (the rules of
:mod:`parcelsearch_service.limits`, in one round trip).
"""

from __future__ import annotations

__all__ = ["SQLITE_SCHEMA", "POSTGRES_SCHEMA", "SCHEMA_LOCK"]

#: The tables and the counting trigger, made if missing (one script).
SQLITE_SCHEMA = """
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

#: The schema, its tables and the admission function (each statement idempotent).
POSTGRES_SCHEMA: tuple[str, ...] = (
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
    # same order, as parcelsearch_service.limits applies them with SQLite. Each statement of
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
SCHEMA_LOCK = 0x7061726365
