"""Team mode: one key, one ledger, one pacer, one page store, shared by every member.

A team's PostgreSQL database holds the store (``parcelsearch team init postgresql://…``
makes it); a search joins it with ``team=URL`` (``--team``, ``$PARCELSEARCH_TEAM``) as
``user`` (``--user``, ``$PARCELSEARCH_USER``, default the login name). Modules:

- :mod:`~parcelsearch.stores.team.store`: the versioned schema, made idempotently; connections;
- :mod:`~parcelsearch.stores.team.spending`: :class:`TeamSpending`, the
  :class:`~parcelsearch.stores.spending.Spending` of a team (reserve → settle | refund, one pacer
  per key, pages with single-flight leases);
- :mod:`~parcelsearch.stores.team.usage`: the key's quota and pace and the budgets stored, and who
  spent what.
"""

from __future__ import annotations

from parcelsearch.stores.team.store import init_team
from parcelsearch.stores.team.usage import (
    Pace,
    clear_pause,
    set_budget,
    set_pace,
    set_quota,
    team_usage,
)

__all__ = ["init_team", "set_quota", "set_pace", "set_budget", "clear_pause", "team_usage",
           "Pace"]
