"""Where calls are counted and pages and runs are kept, opened by one ``open_store(location)``.

:func:`open_store` opens a search's stores at one location, a team store's URL
(``postgresql://…``) or ``None`` for this machine's, as :class:`Stores`: the
:class:`~parcelsearch.stores.spending.Spending` a run spends through and the
:class:`~parcelsearch.stores.history.History` it records into; :func:`open_spending` and
:func:`open_history` open either alone (a call outside a search spends through
:func:`open_spending`). The protocols are :mod:`~parcelsearch.stores.spending` and
:mod:`~parcelsearch.stores.history`, the value types they share :mod:`~parcelsearch.stores.quotas`;
their two twins keep the same facts in two places: :mod:`~parcelsearch.stores.local` on this
machine (SQLite ledger and run history, parquet response cache) and
:mod:`~parcelsearch.stores.team` in a team's PostgreSQL store. :data:`TWINS` says which twin
opens which location; a twin is imported only when a location of its own is opened (psycopg
only for teams).

Examples
--------
>>> from parcelsearch import stores
>>> ledger = Ledger.in_folder(client.cache_dir)  # doctest: +SKIP
>>> opened = stores.open_store(None, client.fingerprint, ledger=ledger)  # doctest: +SKIP
>>> opened.history.runs()  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast, overload

from parcelsearch import settings
from parcelsearch.errors import ConfigurationError, Hint

if TYPE_CHECKING:
    from parcelsearch.stores.history import History
    from parcelsearch.stores.local.cache import ResponseCache
    from parcelsearch.stores.local.ledger import Ledger
    from parcelsearch.stores.spending import Spending

# The twins are imported when opened: importing one store's module (a ledger, a cache) loads
# this package first, and must not load the others (pandas, requests, psycopg).

__all__ = ["Stores", "TWINS", "Twin", "twin", "open_store", "open_spending", "open_history"]

#: The module of the twin that opens each kind of location, by its URL's scheme (``""``:
#: ``None``, this machine). A new store is one module (a :class:`Twin`) and one row here.
TWINS: dict[str, str] = {
    "": "parcelsearch.stores.local",
    "postgresql": "parcelsearch.stores.team",
    "postgres": "parcelsearch.stores.team",
}


class Twin(Protocol):
    """What a twin's module offers: its spending and its run history, opened at a location."""

    def open_spending(
        self,
        location: str | None,
        fingerprint: str,
        *,
        member: str,
        cache: ResponseCache | None,
        ledger: Ledger | None,
        workers: int,
    ) -> Spending:
        """The spending at ``location`` (see :func:`open_spending`)."""

    def open_history(
        self, location: str | None, ledger_path: str | os.PathLike[str] | None, *, member: str
    ) -> History | None:
        """The run history at ``location`` (see :func:`open_history`)."""


@dataclass(frozen=True)
class Stores:
    """A search's stores: where it spends and where it records its run."""

    #: Where calls are reserved, counted and pages kept (close it when the search ends).
    spending: Spending
    #: The run history the search records into (``None``: none).
    history: History | None


def twin(location: str | None) -> Twin:
    """The twin that opens ``location`` (:data:`TWINS`), imported now.

    Raises
    ------
    ConfigurationError
        No twin opens a location of that scheme.
    """
    scheme = "" if location is None else location.partition("://")[0].lower()
    if scheme not in TWINS:
        from parcelsearch.stores.team.members import shown

        raise ConfigurationError(
            f"no store opens {shown(str(location))!r}: its scheme is none of "
            f"{', '.join(repr(s + '://') for s in TWINS if s)}",
            hints=[Hint("team", "postgresql://host/db", "for example {knob}")],
        )
    return cast("Twin", importlib.import_module(TWINS[scheme]))


def open_store(
    location: str | None,
    fingerprint: str,
    *,
    member: str = "",
    cache: ResponseCache | None = None,
    ledger: Ledger | None = None,
    workers: int = settings.DEFAULT_WORKERS,
) -> Stores:
    """A search's stores at ``location``: a team store's, or this machine's.

    Parameters
    ----------
    location
        A team store (``postgresql://…``): its spending and run history, as ``member``, with
        ``cache`` as this machine's copy of its pages (``ledger`` unused). ``None``: this
        machine's ``ledger`` and ``cache`` and the run history in the ledger's file.
    fingerprint
        The fingerprint of the key that spends
        (:func:`parcelsearch.client.key_fingerprint`: it names what is counted).
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
    spending = open_spending(
        location, fingerprint, member=member, cache=cache, ledger=ledger, workers=workers
    )
    try:
        history = open_history(
            None if ledger is None else ledger.path, team=location, member=member
        )
    except BaseException:
        spending.close()  # its pool and lease renewer, not left behind
        raise
    return Stores(spending, history)


def open_spending(
    location: str | None,
    fingerprint: str,
    *,
    member: str = "",
    cache: ResponseCache | None = None,
    ledger: Ledger | None = None,
    workers: int = settings.DEFAULT_WORKERS,
) -> Spending:
    """Where the calls of the key ``fingerprint`` names are spent at ``location`` (as in
    :func:`open_store`): close it when done."""
    return twin(location).open_spending(
        location, fingerprint, member=member, cache=cache, ledger=ledger, workers=workers
    )


@overload
def open_history(
    ledger_path: str | os.PathLike[str], *, team: str | None = None, member: str = ""
) -> History: ...


@overload
def open_history(
    ledger_path: None, *, team: str | None = None, member: str = ""
) -> History | None: ...


def open_history(
    ledger_path: str | os.PathLike[str] | None, *, team: str | None = None, member: str = ""
) -> History | None:
    """The run history a search records into: the team store's when ``team`` is given (as
    ``member``), else the one in the ledger's file ``ledger_path`` (``None``: none)."""
    return twin(team).open_history(team, ledger_path, member=member)
