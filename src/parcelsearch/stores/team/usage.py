"""The team store's settings (the key's quota and pace, each member's budget) and who spent
what."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from parcelsearch._shared import check_count
from parcelsearch.errors import ConfigurationError
from parcelsearch.stores.quotas import MAX_CALLS, Quota
from parcelsearch.stores.team.members import resolve_user
from parcelsearch.stores.team.store import (
    DEFAULT_LEASE,
    DEFAULT_MARGIN,
    DEFAULT_RATE,
    LEASE_RANGE,
    MARGIN_RANGE,
    MOST_PAUSE,
    RATE_RANGE,
    SCHEMA,
    check_schema,
    connect,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "set_quota",
    "set_budget",
    "set_pace",
    "clear_pause",
    "team_usage",
    "Pace",
    "USAGE_COLUMNS",
    "check_in_range",
]

#: Columns of :func:`team_usage`, one row per key and one per member of each key.
USAGE_COLUMNS = [
    "scope",
    "name",
    "fingerprint",
    "calls_month",
    "calls_lifetime",
    "limit",
    "period",
    "pages_shared",
    "calls_saved",
    "rate",
    "margin",
    "lease_seconds",
    "paused_until",
    "paused_by",
    "roles",
]


@dataclass(frozen=True)
class Pace:
    """A key's pace as the team store holds it: ``rate`` calls per second allowed, the share
    ``margin`` the pacer keeps in reserve, and a page lease's ``lease_seconds``."""

    rate: float = DEFAULT_RATE
    margin: float = DEFAULT_MARGIN
    lease_seconds: float = DEFAULT_LEASE

    @property
    def interval(self) -> float:
        """Seconds between two of the key's calls, whoever sends them."""
        return 1.0 / (self.rate * (1.0 - self.margin))


def check_in_range(value: object, bounds: tuple[float, float], name: str) -> float:
    """``value`` as a float when finite and within ``bounds``.

    Raises
    ------
    ConfigurationError
        ``name must be a number from low to high, got value``.
    """
    low, high = bounds
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or not low <= number <= high:
        raise ConfigurationError(
            f"{name} must be a number from {low:g} to {high:g}, got {str(value)[:40]!r}"
        )
    return number


def set_quota(url: str, fingerprint: str, calls: int, period: str = "month") -> Quota:
    """Store the key's quota in the team store, so that no member needs to pass it; a
    member's own quota can only lower it.

    Raises
    ------
    ConfigurationError
        ``calls`` is not a whole number from 0 to 2147483647, or ``period`` is not month or
        lifetime.
    TeamStoreError
        The store cannot be reached or has no schema.
    """
    return _store_limit(url, "quota", ("keys", "fingerprint", "quota"), fingerprint, calls, period)


def set_budget(url: str, user: str, calls: int, period: str = "month") -> Quota:
    """Store a member's budget: at most ``calls`` calls a month (or for life), all keys.

    Raises
    ------
    ConfigurationError
        A bad user name, count (0 to 2147483647) or period.
    TeamStoreError
        The store cannot be reached or has no schema.
    """
    return _store_limit(
        url, "budget", ("budgets", "member", "calls"), resolve_user(user), calls, period
    )


def _store_limit(
    url: str, what: str, where: tuple[str, str, str], owner: str, calls: int, period: str
) -> Quota:
    """Insert or replace a quota or a budget: ``where`` = (table, owner column, calls column)."""
    check_count(calls, 0, "calls")
    if calls > MAX_CALLS:
        raise ConfigurationError(f"calls must be at most {MAX_CALLS}, got {calls}")
    limit = Quota(calls, period)  # type: ignore[arg-type]
    table, owner_column, calls_column = where
    with connect(url, f"cannot store the {what}") as conn:
        check_schema(url, conn)
        conn.execute(
            f"INSERT INTO {SCHEMA}.{table} ({owner_column}, {calls_column}, period) "
            f"VALUES (%s, %s, %s) ON CONFLICT ({owner_column}) DO UPDATE SET "
            f"{calls_column} = EXCLUDED.{calls_column}, period = EXCLUDED.period",
            (owner, limit.limit, limit.period),
        )
    return limit


def set_pace(url: str, fingerprint: str, pace: Pace) -> Pace:
    """Store the key's pace (calls per second, the pacer's margin, the page lease): every
    member's calls are spaced by it, and no member's own settings can widen it.

    Raises
    ------
    ConfigurationError
        A value out of its range (rate 0.001-1000, margin 0-0.5, lease 0.5-3600 seconds).
    TeamStoreError
        The store cannot be reached or has no schema.
    """
    checked = Pace(
        check_in_range(pace.rate, RATE_RANGE, "rate"),
        check_in_range(pace.margin, MARGIN_RANGE, "margin"),
        check_in_range(pace.lease_seconds, LEASE_RANGE, "lease"),
    )
    with connect(url, "cannot store the pace") as conn:
        check_schema(url, conn)
        conn.execute(
            f"INSERT INTO {SCHEMA}.keys (fingerprint, rate, margin, lease_seconds) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (fingerprint) DO UPDATE SET "
            "rate = EXCLUDED.rate, margin = EXCLUDED.margin, "
            "lease_seconds = EXCLUDED.lease_seconds",
            (fingerprint, checked.rate, checked.margin, checked.lease_seconds),
        )
    return checked


def clear_pause(url: str, fingerprint: str) -> None:
    """End the key's pause and free its next turn at the pacer now: what a member (or a
    429) left there, every member's next call goes at once (then at the key's pace).

    Raises
    ------
    TeamStoreError
        The store cannot be reached or has no schema, or the role connecting may not
        change the pacer (a member role: only the store's owner can).
    """
    with connect(url, "cannot clear the pause") as conn:
        check_schema(url, conn)
        # paused_at and paused_role stay: that role cannot pause again within the cap
        conn.execute(
            f"UPDATE {SCHEMA}.pacers SET next_slot = '-infinity', "
            "paused_until = '-infinity', paused_by = NULL "
            "WHERE fingerprint = %s",
            (fingerprint,),
        )


_USAGE = f"""
WITH spent AS (
    SELECT fingerprint, member,
           count(*) FILTER (WHERE month = {SCHEMA}.month_now()) AS calls_month,
           count(*) AS calls_lifetime,
           string_agg(DISTINCT role, ', ' ORDER BY role) AS roles
    FROM {SCHEMA}.calls GROUP BY fingerprint, member
), saved AS (
    SELECT fingerprint, member, count(DISTINCT request_key) AS pages_shared,
           count(*) AS calls_saved
    FROM {SCHEMA}.page_uses GROUP BY fingerprint, member
), active AS (
    SELECT fingerprint, member FROM spent UNION SELECT fingerprint, member FROM saved
), members AS (
    SELECT fingerprint, member FROM active
    UNION SELECT NULL, member FROM {SCHEMA}.budgets
    WHERE member NOT IN (SELECT member FROM active)
)
SELECT 'key', 'sha256:' || k.fingerprint, k.fingerprint,
       COALESCE(sum(s.calls_month), 0), COALESCE(sum(s.calls_lifetime), 0), k.quota, k.period,
       (SELECT count(DISTINCT request_key) FROM {SCHEMA}.page_uses u
        WHERE u.fingerprint = k.fingerprint),
       (SELECT count(*) FROM {SCHEMA}.page_uses u WHERE u.fingerprint = k.fingerprint),
       k.rate, k.margin, k.lease_seconds,
       CASE WHEN p.until > clock_timestamp() THEN p.until END,
       CASE WHEN p.until > clock_timestamp() THEN
           COALESCE(p.paused_by, '?') || ' (role ' || COALESCE(p.paused_role, '?') || ')'
           || CASE WHEN p.until < p.paused_until THEN ', bounded from '
                   || to_char(p.paused_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS')
                   || ' UTC' ELSE '' END END,
       (SELECT string_agg(DISTINCT c.role, ', ' ORDER BY c.role) FROM {SCHEMA}.calls c
        WHERE c.fingerprint = k.fingerprint)
FROM {SCHEMA}.keys k LEFT JOIN spent s ON s.fingerprint = k.fingerprint
LEFT JOIN (SELECT *, LEAST(paused_until, paused_at + make_interval(secs => {MOST_PAUSE}))
           AS until FROM {SCHEMA}.pacers) p ON p.fingerprint = k.fingerprint
GROUP BY k.fingerprint, k.quota, k.period, k.rate, k.margin, k.lease_seconds, p.until,
         p.paused_until, p.paused_by, p.paused_role
UNION ALL
SELECT 'member', m.member, m.fingerprint, COALESCE(s.calls_month, 0),
       COALESCE(s.calls_lifetime, 0), b.calls, b.period, COALESCE(v.pages_shared, 0),
       COALESCE(v.calls_saved, 0), NULL::float8, NULL::float8, NULL::float8,
       NULL::timestamptz, NULL::text, s.roles
FROM members m
LEFT JOIN spent s USING (fingerprint, member)
LEFT JOIN saved v USING (fingerprint, member)
LEFT JOIN {SCHEMA}.budgets b ON b.member = m.member
ORDER BY 1, 3, 2
"""


def team_usage(url: str) -> pd.DataFrame:
    """Who spent what: calls per key and per member, this month (UTC) and for life.

    Parameters
    ----------
    url
        The team store (``postgresql://…``).

    Returns
    -------
    pandas.DataFrame
        One row per key (``scope="key"``, ``name="sha256:<fingerprint>"``, ``limit`` and
        ``period``: its stored quota) and one per member of each key (``scope="member"``,
        ``limit``/``period``: the member's budget; a member with a budget who has not
        spent yet has no ``fingerprint``); ``calls_month`` and ``calls_lifetime``
        (calls reserved and not refunded: a call whose fate is unknown counts), ``pages_shared``
        (pages paid by another member and used) and ``calls_saved`` (calls those uses saved);
        a key's row also has its stored pace: ``rate`` (calls per second), ``margin`` (the
        pacer's reserve) and ``lease_seconds`` (a page lease's length), and, while the key is
        paused (a 429's ``Retry-After``), ``paused_until`` (UTC, at most
        :data:`~parcelsearch.stores.team.store.MOST_PAUSE` seconds after it was set) and
        ``paused_by`` (the member and its PostgreSQL role; "bounded from …" when it was set
        longer); ``roles``: the PostgreSQL roles that reserved the row's calls (a member
        name is its first member role's; the owner's connection may reserve as any). A key's
        calls are those
        made in team mode through this store: calls made with the same key outside team mode
        are not seen here (the vendor's portal counts them all).

    Raises
    ------
    TeamStoreError
        The store cannot be reached or has no schema.

    Examples
    --------
    >>> parcelsearch.team_usage("postgresql://db.example/team")  # doctest: +SKIP
    """
    import pandas as pd

    with connect(url, "cannot read usage") as conn:
        check_schema(url, conn)
        rows = conn.execute(_USAGE).fetchall()
    frame = pd.DataFrame(rows, columns=USAGE_COLUMNS)
    for column in ("calls_month", "calls_lifetime", "pages_shared", "calls_saved"):
        frame[column] = frame[column].astype("int64")
    frame["limit"] = frame["limit"].astype("Int64")
    return frame
