"""The team store's settings (the key's quota, each member's budget) and who spent what."""

from __future__ import annotations

from typing import TYPE_CHECKING

from parcelsearch._shared import check_count
from parcelsearch.ledger import Quota
from parcelsearch.search_options import resolve_user
from parcelsearch.team.store import SCHEMA, check_schema, connect

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["set_quota", "set_budget", "team_usage", "USAGE_COLUMNS"]

#: Columns of :func:`team_usage`, one row per key and one per member of each key.
USAGE_COLUMNS = ["scope", "name", "fingerprint", "calls_month", "calls_lifetime", "limit",
                 "period", "pages_shared", "calls_saved"]


def set_quota(url: str, fingerprint: str, calls: int, period: str = "month") -> Quota:
    """Store the key's quota in the team store, so that no member needs to pass it.

    Raises
    ------
    ConfigurationError
        ``calls`` is not a whole number >= 0, or ``period`` is not month or lifetime.
    TeamStoreError
        The store cannot be reached or has no schema.
    """
    return _store_limit(url, "quota", ("keys", "fingerprint", "quota"), fingerprint, calls,
                        period)


def set_budget(url: str, user: str, calls: int, period: str = "month") -> Quota:
    """Store a member's budget: at most ``calls`` calls a month (or for life), all keys.

    Raises
    ------
    ConfigurationError
        A bad user name, count or period.
    TeamStoreError
        The store cannot be reached or has no schema.
    """
    return _store_limit(url, "budget", ("budgets", "member", "calls"), resolve_user(user),
                        calls, period)


def _store_limit(url: str, what: str, where: tuple[str, str, str], owner: str, calls: int,
                 period: str) -> Quota:
    """Insert or replace a quota or a budget: ``where`` = (table, owner column, calls column)."""
    check_count(calls, 0, "calls")
    limit = Quota(calls, period)  # type: ignore[arg-type]
    table, owner_column, calls_column = where
    with connect(url, f"cannot store the {what}") as conn:
        check_schema(url, conn)
        conn.execute(
            f"INSERT INTO {SCHEMA}.{table} ({owner_column}, {calls_column}, period) "
            f"VALUES (%s, %s, %s) ON CONFLICT ({owner_column}) DO UPDATE SET "
            f"{calls_column} = EXCLUDED.{calls_column}, period = EXCLUDED.period",
            (owner, limit.limit, limit.period))
    return limit


_USAGE = f"""
WITH spent AS (
    SELECT fingerprint, member,
           count(*) FILTER (WHERE month = {SCHEMA}.month_now()) AS calls_month,
           count(*) AS calls_lifetime
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
       (SELECT count(*) FROM {SCHEMA}.page_uses u WHERE u.fingerprint = k.fingerprint)
FROM {SCHEMA}.keys k LEFT JOIN spent s ON s.fingerprint = k.fingerprint
GROUP BY k.fingerprint, k.quota, k.period
UNION ALL
SELECT 'member', m.member, m.fingerprint, COALESCE(s.calls_month, 0),
       COALESCE(s.calls_lifetime, 0), b.calls, b.period, COALESCE(v.pages_shared, 0),
       COALESCE(v.calls_saved, 0)
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
        (pages paid by another member and used) and ``calls_saved`` (calls those uses saved).

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
