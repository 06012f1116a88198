"""The runs recorded in a run history, as a table: :func:`runs` (``parcelsearch.runs``),
read through :func:`parcelsearch.stores.open_history` (this machine's or a team's)."""

from __future__ import annotations

import os

import pandas as pd

from parcelsearch.stores import open_history
from parcelsearch.stores.local.cache import CacheFolder

__all__ = ["runs"]


def runs(
    cache_dir: str | os.PathLike[str] | None = None, *, team: str | None = None
) -> pd.DataFrame:
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
