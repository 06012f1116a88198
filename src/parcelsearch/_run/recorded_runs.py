"""Where a search spends and records, and reading its runs: this machine's stores (the
ledger and cache of a cache folder), or a team's.

Kept apart from :mod:`parcelsearch.stores.local` and :mod:`parcelsearch.stores.team` (the
twins), so that each of those imports only what is below it and the choice between them is
made here, above both: :func:`open_stores` for a search, :func:`open_history` for the
history alone.
"""

from __future__ import annotations

import os
from typing import overload

import pandas as pd

from parcelsearch._fetch.client import Client
from parcelsearch.stores.history import History
from parcelsearch.stores.local.cache import CacheFolder, ResponseCache
from parcelsearch.stores.local.history import RunHistory
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.spending import LocalSpending, Spending

__all__ = ["runs", "open_history", "open_stores"]


def runs(cache_dir: str | os.PathLike[str] | None = None, *,
         team: str | None = None) -> pd.DataFrame:
    """Every search recorded in the run history of a cache folder (or of a team), the
    latest first.

    Parameters
    ----------
    cache_dir
        The cache folder (default ``$PARCELSEARCH_CACHE_DIR`` or ``~/.cache/parcelsearch``).
    team
        A team store (``postgresql://…``; default ``$PARCELSEARCH_TEAM``, as for
        :func:`parcelsearch.search`): the runs every member recorded there (team mode records
        into the team store, not the cache folder); then a ``member`` column too.

    Returns
    -------
    pandas.DataFrame
        ``run_id``, ``started``, ``finished`` (UTC), ``mode`` (cached: the default, all, changed),
        ``tolerance``, ``areas`` and ``areas_fingerprint``, ``calls``, ``complete``, ``key``
        (the key's fingerprint, never the key), ``base_url``, ``path``, ``pieces`` and how
        many were ``read``, ``inferred``, ``sampled``, ``cached`` or ``changed``,
        ``id_name``, ``verification`` (the verify sample and its estimate), ``areas_ids``
        and ``areas_complete``.
    """
    from parcelsearch.stores.team.members import resolve_team

    return open_history(CacheFolder(cache_dir).ledger_path, team=resolve_team(team)).runs()


def open_stores(client: Client, team: str | None, member: str, cache: ResponseCache | None,
                ledger: Ledger | None) -> tuple[Spending, History | None]:
    """Where a search spends and records: the team's store when ``team`` is given (as
    ``member``, with ``cache`` as this machine's copy of its pages), else this machine's
    ``ledger`` and ``cache`` (either may be ``None``: none; no ledger, no run history)."""
    spending: Spending
    if team is None:
        spending = LocalSpending(client.fingerprint, ledger, cache)
    else:
        from parcelsearch.stores.team.spending import TeamSpending  # psycopg only for teams

        spending = TeamSpending.open(team, client, user=member, cache=cache)
    return spending, open_history(None if ledger is None else ledger.path, team=team,
                                  member=member)


@overload
def open_history(ledger_path: str | os.PathLike[str], *, team: str | None = None,
                 member: str = "") -> History: ...


@overload
def open_history(ledger_path: None, *, team: str | None = None,
                 member: str = "") -> History | None: ...


def open_history(ledger_path: str | os.PathLike[str] | None, *, team: str | None = None,
                 member: str = "") -> History | None:
    """The run history a search records into: the team store's when ``team`` is given (as
    ``member``), else the one in the ledger's file ``ledger_path`` (``None``: none)."""
    if team is not None:
        from parcelsearch.stores.team.run_history import TeamRunHistory  # psycopg only for teams

        return TeamRunHistory(team, member=member)
    return None if ledger_path is None else RunHistory(ledger_path)
