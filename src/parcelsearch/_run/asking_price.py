"""A search's price asked before it runs: :func:`price` pays only for its survey,
:func:`known_price` for nothing.
"""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from parcelsearch import stores
from parcelsearch._run import priced_jobs, pricing, refreshing
from parcelsearch._run.fetching import Run
from parcelsearch._run.options import SearchOptions
from parcelsearch._run.search_run import search
from parcelsearch._run.surveying import Surveying
from parcelsearch.client import Client
from parcelsearch.errors import (
    ConfigurationError,
    Hint,
    PriceNotConfirmedError,
)
from parcelsearch.planning.plans import Plan
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.quotas import Quota

T = TypeVar("T")
S = TypeVar("S")


__all__ = ["price", "known_price"]


def price(
    areas: Any = None,
    *,
    client: Client | None = None,
    plan: Plan | None = None,
    id_column: str | None = None,
    tolerance: float | None = None,
    match: str | None = None,
    quota: Quota | str | None = None,
    refresh: bool | str = False,
    progress: bool = False,
    trust_markets: bool = False,
    survey_share: float | None = None,
) -> pricing.Price:
    """The price of a search before its bulk, paying only for its survey.

    What :func:`search` with the same arguments would spend in all, with its 95 % interval
    where it is estimated: page 1 of a sample of the pieces never searched (all of them
    when they are fewer than 30) is fetched and cached, so the search that follows reuses
    those pages and pays only the rest (``price.remaining``). Nothing is spent when every
    count is known from the cache or the run history. The price is kept in the process
    (:mod:`parcelsearch._run.priced_jobs`): the :func:`search` of the same job that
    follows (same areas or plan, client and options) asks at once with these figures, 0
    calls between, its ``spent`` this job's.

    Parameters
    ----------
    areas, client, plan, id_column, tolerance, match, quota
        As for :func:`search`.
    refresh
        ``False`` or ``True``/``"all"`` as for :func:`search` (``"changed"`` re-reads page 1
        of every piece, which is its price's minimum: use :func:`search`).
    progress
        Show the survey's bar and the price lines (off by default: the price is returned).
    trust_markets, survey_share
        As for :func:`search`.

    Returns
    -------
    Price
        ``total`` calls (``word``: exactly, about), ``low``/``high`` its interval after a
        survey, ``spent`` on the survey, ``remaining`` for the search that follows;
        ``str(price)`` is the price line.

    Raises
    ------
    QuotaWouldExceedError
        Page 1 of every piece, or the estimate, does not fit the known quota.
    ConfigurationError
        ``refresh="changed"``.
    """
    if refresh == "changed":
        raise ConfigurationError(
            "price() prices a search that reads what is not cached (refresh=False or "
            "'all'); a changed-refresh's price is page 1 of every piece, then what changed",
            hints=[Hint("refresh", "all", "use {knob}, or search with refresh='changed'")],
        )
    told: list[pricing.Price] = []

    def tell(price: pricing.Price) -> bool:
        told.append(price)
        return False

    try:
        with priced_jobs.pricing_only():  # the search that follows reuses this price
            result = search(
                areas,
                client=client,
                plan=plan,
                id_column=id_column,
                tolerance=tolerance,
                match=match,
                quota=quota,
                refresh=refresh,
                progress=progress,
                ask_above=0,
                confirm=tell,
                trust_markets=trust_markets,
                survey_share=survey_share,
            )
    except PriceNotConfirmedError:
        return told[-1]
    return pricing.Price(first=0, later=0, known="exact", spent=result.calls)


def known_price(
    plan: Plan, client: Client | None = None, *, quota: Quota | str | None = None
) -> pricing.Price:
    """The price of searching ``plan`` known without spending (no call is made), kept in
    ``plan.price`` so that the plan's repr and map show it: page 1 of
    every piece not cached, the later pages told by cached page 1s or the run history, the
    pieces never searched learnt from earlier pieces nearby where they surround them.

    Parameters
    ----------
    plan
        The plan (:func:`parcelsearch.plan`).
    client
        Whose cache folder, ledger and run history are read (default :class:`Client`).
    quota
        As for :func:`search` (the quota line, :attr:`Price.quota`).

    Returns
    -------
    Price
        ``known`` ``"exact"``, ``"estimated"`` (the run history), ``"learnt"`` (with its 95 %
        interval), or ``"lower"`` (some pieces unpriced: :attr:`Price.survey` is the
        survey's first round that would price them).
    """
    client = client if client is not None else Client()
    options = SearchOptions.resolve(plan, quota=quota, progress=False)
    cache = ResponseCache(client.cache_dir)
    opened = stores.open_store(
        options.team,
        client.fingerprint,
        member=options.user or "",
        cache=cache,
        ledger=Ledger.in_folder(client.cache_dir),
        workers=options.workers,
    )
    try:
        refresh = refreshing.RunRefresh(
            options.refresh,
            options.verify_sample,
            opened.history,
            base_url=client.base_url,
            path=plan.path,
            run_id=uuid.uuid4().hex,
        )
        run = Run(
            client,
            opened.spending,
            options,
            path=plan.path,
            run_id=refresh.run_id,
            rereads=refresh.rereads,
        )
        price = plan.price = Surveying(run, plan, False, refresh).free_price()
        return price
    finally:
        opened.spending.close()
