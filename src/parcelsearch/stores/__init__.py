"""Where calls are counted and pages and runs are kept, opened by one ``open(location)``.

:func:`open` opens a search's stores at one location, a team store's URL (``postgresql://…``)
or ``None`` for this machine's, as :class:`Stores`: the
:class:`~parcelsearch.stores.spending.Spending` a run spends through and the
:class:`~parcelsearch.stores.history.History` it records into; :func:`open_history` opens the
run history alone. The protocols are :mod:`~parcelsearch.stores.spending` and
:mod:`~parcelsearch.stores.history`; their two twins keep the same facts in two places:
:mod:`~parcelsearch.stores.local` on this machine (SQLite ledger and run history, parquet
response cache) and :mod:`~parcelsearch.stores.team` in a team's PostgreSQL store. The choice
between the twins is made here, above both, and the team twin is imported only when a team
store is opened (psycopg only for teams).

Examples
--------
>>> from parcelsearch import stores
>>> opened = stores.open(None, client, ledger=Ledger.in_folder(client.cache_dir))  # doctest: +SKIP
>>> opened.history.runs()  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from parcelsearch import settings

if TYPE_CHECKING:
    from parcelsearch._fetch.client import Client
    from parcelsearch.stores.history import History
    from parcelsearch.stores.local.cache import ResponseCache
    from parcelsearch.stores.local.ledger import Ledger
    from parcelsearch.stores.spending import Spending

# The twins are imported inside the functions: importing one store's module (a ledger, a
# cache) loads this package first, and must not load the others (pandas, requests, psycopg).

__all__ = ["Stores", "open", "open_history"]


@dataclass(frozen=True)
class Stores:
    """A search's stores: where it spends and where it records its run."""

    #: Where calls are reserved, counted and pages kept (close it when the search ends).
    spending: Spending
    #: The run history the search records into (``None``: none).
    history: History | None


def open(location: str | None, client: Client, *, member: str = "",
         cache: ResponseCache | None = None, ledger: Ledger | None = None,
         workers: int = settings.DEFAULT_WORKERS) -> Stores:
    """A search's stores at ``location``: a team store's, or this machine's.

    Parameters
    ----------
    location
        A team store (``postgresql://…``): its spending and run history, as ``member``, with
        ``cache`` as this machine's copy of its pages (``ledger`` unused). ``None``: this
        machine's ``ledger`` and ``cache`` and the run history in the ledger's file.
    client
        The client that spends (its key's fingerprint names what is counted).
    member
        Who records and spends in a team store.
    cache, ledger
        This machine's response cache and ledger (``None``: none; no ledger, no run history).
    workers
        The threads that will spend through it at once (a team store keeps a connection
        ready for each).

    Returns
    -------
    Stores
        The spending and the run history.

    Raises
    ------
    TeamStoreError
        The team store cannot be reached or lacks this toolkit's schema.
    """
    spending: Spending
    if location is None:
        from parcelsearch.stores.spending import LocalSpending

        spending = LocalSpending(client.fingerprint, ledger, cache)
    else:
        from parcelsearch.stores.team.spending import TeamSpending  # psycopg only for teams

        spending = TeamSpending.open(location, client, user=member, cache=cache,
                                     threads=workers)
    try:
        history = open_history(None if ledger is None else ledger.path, team=location,
                               member=member)
    except BaseException:
        spending.close()  # its pool and lease renewer, not left behind
        raise
    return Stores(spending, history)


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
    from parcelsearch.stores.local.history import RunHistory

    return None if ledger_path is None else RunHistory(ledger_path)
