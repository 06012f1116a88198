"""This machine's store: the cache folder (:mod:`~parcelsearch.stores.local.cache`), the
ledger of calls per key (:mod:`~parcelsearch.stores.local.ledger`), the spending over both
(:mod:`~parcelsearch.stores.local.spending`) and the run history in the ledger's file
(:mod:`~parcelsearch.stores.local.history`). :func:`open_spending` and :func:`open_history`
are the twin's openers, as :data:`parcelsearch.stores.TWINS` names them (for ``None``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from parcelsearch import settings

if TYPE_CHECKING:
    from parcelsearch.stores.local.cache import ResponseCache
    from parcelsearch.stores.local.history import RunHistory
    from parcelsearch.stores.local.ledger import Ledger
    from parcelsearch.stores.local.spending import LocalSpending

__all__ = ["open_spending", "open_history"]


def open_spending(
    location: str | None,
    fingerprint: str,
    *,
    member: str = "",
    cache: ResponseCache | None = None,
    ledger: Ledger | None = None,
    workers: int = settings.DEFAULT_WORKERS,
) -> LocalSpending:
    """This machine's spending for the key ``fingerprint`` names: ``ledger`` and ``cache``
    (either ``None``: none; ``location`` is ``None``; ``member`` and ``workers`` unused)."""
    from parcelsearch.stores.local.spending import LocalSpending

    return LocalSpending(fingerprint, ledger, cache)


def open_history(
    location: str | None, ledger_path: str | os.PathLike[str] | None, *, member: str = ""
) -> RunHistory | None:
    """The run history in the ledger's file ``ledger_path`` (``None``: none)."""
    from parcelsearch.stores.local.history import RunHistory

    return None if ledger_path is None else RunHistory(ledger_path)
