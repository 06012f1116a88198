"""Which run history a search records into, and reading it: the cache folder's, or a team's.

Kept apart from :mod:`parcelsearch.stores.local.history` (the local history and what every history
is)
and :mod:`parcelsearch.stores.team.run_history` (the team store's), so that each of those imports
only what is above it and the choice between them is made here, above both.
"""

from __future__ import annotations

import os

import pandas as pd

from parcelsearch.stores.local.cache import CacheFolder
from parcelsearch.stores.local.history import History, RunHistory

__all__ = ["runs", "open_history"]


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
    from parcelsearch._run.options import resolve_team

    return open_history(CacheFolder(cache_dir).ledger_path, team=resolve_team(team)).runs()


def open_history(ledger_path: str | os.PathLike[str], *, team: str | None = None,
                 member: str = "") -> History:
    """The run history a search records into: the team store's when ``team`` is given (as
    ``member``), else the one in the ledger's file ``ledger_path``."""
    if team is not None:
        from parcelsearch.stores.team.run_history import TeamRunHistory  # psycopg only for teams

        return TeamRunHistory(team, member=member)
    return RunHistory(ledger_path)
