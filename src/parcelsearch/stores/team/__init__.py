"""Team mode: one key, one ledger, one pacer, one page store, shared by every member.

A team's PostgreSQL database holds the store (``parcelsearch team init postgresql://…``
makes it); a search joins it with ``team=URL`` (``--team``, ``$PARCELSEARCH_TEAM``) as
``user`` (``--user``, ``$PARCELSEARCH_USER``, default the login name). Modules:

- :mod:`~parcelsearch.stores.team.store`: the versioned schema's limits, checked; connections;
- :mod:`~parcelsearch.stores.team.migrations`: the SQL of each version, made idempotently
  (:func:`init_team`);
- :mod:`~parcelsearch.stores.team.spending`: :class:`TeamSpending`, the
  :class:`~parcelsearch.stores.spending.Spending` of a team (reserve → settle | refund, one pacer
  per key, pages with single-flight leases);
- :mod:`~parcelsearch.stores.team.shared_pages`: :class:`~.shared_pages.SharedPages`, those pages
  as one member sees them (any member's page is every member's, fetched once);
- :func:`open_spending`, :func:`open_history`: the twin's openers, as
  :data:`parcelsearch.stores.TWINS` names them;
- :mod:`~parcelsearch.stores.team.usage`: the key's quota and pace and the budgets stored, and who
  spent what.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from parcelsearch import settings
from parcelsearch.stores.team.migrations import init_team
from parcelsearch.stores.team.usage import (
    Pace,
    clear_pause,
    set_budget,
    set_pace,
    set_quota,
    team_usage,
)

if TYPE_CHECKING:
    from parcelsearch.stores.local.cache import ResponseCache
    from parcelsearch.stores.local.ledger import Ledger
    from parcelsearch.stores.team.run_history import TeamRunHistory
    from parcelsearch.stores.team.spending import TeamSpending

__all__ = [
    "init_team",
    "set_quota",
    "set_pace",
    "set_budget",
    "clear_pause",
    "team_usage",
    "Pace",
    "open_spending",
    "open_history",
]


def open_spending(
    location: str | None,
    fingerprint: str,
    *,
    member: str = "",
    cache: ResponseCache | None = None,
    ledger: Ledger | None = None,
    workers: int = settings.DEFAULT_WORKERS,
) -> TeamSpending:
    """The team store's spending at ``location``, as ``member``, with ``cache`` as this
    machine's copy of its pages (``ledger`` unused; see
    :meth:`~parcelsearch.stores.team.spending.TeamSpending.open`)."""
    from parcelsearch.stores.team.spending import TeamSpending

    return TeamSpending.open(str(location), fingerprint, user=member, cache=cache, threads=workers)


def open_history(
    location: str | None, ledger_path: str | os.PathLike[str] | None, *, member: str = ""
) -> TeamRunHistory:
    """The team store's run history at ``location``, recording as ``member``."""
    from parcelsearch.stores.team.run_history import TeamRunHistory

    return TeamRunHistory(str(location), member=member)
