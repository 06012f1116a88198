"""Markets: where the vendor's zoning data are live, and whether each study area is in one.

Examples
--------
>>> names = markets(client)  # one call, then reused for a day  # doctest: +SKIP
>>> names[:2]  # doctest: +SKIP
['Abilene, TX', 'Boise, ID']
>>> check_markets(areas, "market", names)[["market", "market_active", "market_suggestion"]]
...  # doctest: +SKIP
"""

from __future__ import annotations

import difflib
import json
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pandas as pd

from parcelsearch import stores
from parcelsearch._fetch.http import Spend
from parcelsearch.client import Client
from parcelsearch.errors import CacheError, Hint, InputError
from parcelsearch.stores.local.cache import CacheFolder, ResponseCache
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.spending import CallSpend

__all__ = [
    "markets",
    "check_markets",
    "check_markets_at_hand",
    "suggest_market",
    "require_market_column",
    "key_spend",
]

#: How long a fetched market list is reused (seconds).
DEFAULT_MAX_AGE = 86400.0

Frame = TypeVar("Frame", bound=pd.DataFrame)

#: US state (and DC) names, lower case, to their two-letter codes.
STATES = {
    "alabama": "al",
    "alaska": "ak",
    "arizona": "az",
    "arkansas": "ar",
    "california": "ca",
    "colorado": "co",
    "connecticut": "ct",
    "delaware": "de",
    "district of columbia": "dc",
    "florida": "fl",
    "georgia": "ga",
    "hawaii": "hi",
    "idaho": "id",
    "illinois": "il",
    "indiana": "in",
    "iowa": "ia",
    "kansas": "ks",
    "kentucky": "ky",
    "louisiana": "la",
    "maine": "me",
    "maryland": "md",
    "massachusetts": "ma",
    "michigan": "mi",
    "minnesota": "mn",
    "mississippi": "ms",
    "missouri": "mo",
    "montana": "mt",
    "nebraska": "ne",
    "nevada": "nv",
    "new hampshire": "nh",
    "new jersey": "nj",
    "new mexico": "nm",
    "new york": "ny",
    "north carolina": "nc",
    "north dakota": "nd",
    "ohio": "oh",
    "oklahoma": "ok",
    "oregon": "or",
    "pennsylvania": "pa",
    "rhode island": "ri",
    "south carolina": "sc",
    "south dakota": "sd",
    "tennessee": "tn",
    "texas": "tx",
    "utah": "ut",
    "vermont": "vt",
    "virginia": "va",
    "washington": "wa",
    "west virginia": "wv",
    "wisconsin": "wi",
    "wyoming": "wy",
}
_STATE_NAME = re.compile(r"\b(" + "|".join(sorted(STATES, key=len, reverse=True)) + r")$")


def markets(
    client: Client,
    *,
    cache: ResponseCache | str | os.PathLike[str] | bool | None = None,
    max_age: float | timedelta = DEFAULT_MAX_AGE,
    spend: Spend | None = None,
    team: str | None = None,
    user: str | None = None,
) -> list[str]:
    """The names of the active markets: one call, then reused for a day.

    Parameters
    ----------
    client
        The client to ask (one call when the cached list is missing or stale).
    cache
        A :class:`~parcelsearch.stores.local.cache.ResponseCache` or folder to keep the list in;
        ``None`` for the default cache folder, ``False`` to always ask the service.
    max_age
        Reuse a list fetched at most this many seconds ago (``0`` forces a call).
    spend
        Passed to :meth:`Client.markets` (the search's spending); default: the call is
        recorded where the key's calls are counted (:func:`key_spend`): the team store in
        team mode, else the ledger beside the client's cache.
    team, user
        Team mode: the team store (``postgresql://…``; default ``$PARCELSEARCH_TEAM``) whose
        ledger and pacer the call goes through, and who spends it (default
        ``$PARCELSEARCH_USER``, else the login name), so that the team's quota counts it.

    Raises
    ------
    CacheError
        The cached list exists but cannot be read (the message names the file).
    """
    if cache is None:
        cache = client.cache_dir
    folder = _folder(cache)
    limit = max_age if isinstance(max_age, timedelta) else timedelta(seconds=max_age)
    if folder is not None and limit > timedelta(0):
        names = folder.markets(client.base_url, limit)
        if names is not None:
            return names
    if spend is not None:
        names = client.markets(spend=spend)
    else:
        with key_spend(client, team=team, user=user) as own:
            names = client.markets(spend=own)
    if folder is not None:
        folder.keep_markets(client.base_url, names)
    return names


def check_markets_at_hand(areas: Any, base_url: str, cache: str | os.PathLike[str]) -> None:
    """Refuse areas far from every US state with an active market, when the market list
    of ``base_url`` is in the cache folder ``cache`` (of any age); else (no list, or one that
    cannot be read) say nothing. Never calls the service (see
    :func:`parcelsearch.planning.land.check_near_markets`).

    Parameters
    ----------
    areas
        Validated study areas (EPSG:4326, indexed by area id).

    Raises
    ------
    InputError
        Naming the rows, their distance, the states and ``trust_markets``.
    """
    from parcelsearch.planning.land import check_near_markets

    folder = CacheFolder(cache)
    try:
        names = folder.markets(base_url, timedelta.max)
    except CacheError:  # a check for free: an unreadable list is no list at hand
        return
    if names:
        check_near_markets(
            areas.geometry.to_numpy(),
            list(areas.index),
            names,
            listed=_which_list(folder, base_url),
        )


def _which_list(folder: CacheFolder, base_url: str) -> str:
    """Which cached list a refusal went by: the service it was fetched from, how long ago,
    and its file (to delete when that service now serves other parcels)."""
    path = folder.markets_path(base_url)
    try:
        fetched = datetime.fromisoformat(json.loads(path.read_text(encoding="utf-8"))["fetched_at"])
        age = f"fetched {_age(datetime.now(UTC) - fetched)} ago"
    except (OSError, ValueError, KeyError, TypeError):
        age = "of unknown age"
    return (
        f"the market list cached from {base_url} ({age}; if that service now serves "
        f"other parcels, delete {path} to fetch its list again)"
    )


def _age(elapsed: timedelta) -> str:
    """``40 s``, ``12 min``, ``3.5 h`` or ``2.0 days``."""
    seconds = max(0.0, elapsed.total_seconds())
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 86400 else f"{seconds / 86400:.1f} days"


def require_market_column(areas: pd.DataFrame, column: str) -> None:
    """Refuse, before anything is spent, areas that have no ``column`` of market names.

    Raises
    ------
    InputError
        Naming the columns there are and the option that names the market column.
    """
    if column not in areas.columns:
        geometry = getattr(areas, "_geometry_column_name", None)
        columns = ", ".join(repr(str(c)) for c in areas.columns if c != geometry)
        raise InputError(
            f"no column {column!r} of market names in the study areas; their columns are: "
            f"{columns or 'none'}",
            field=column,
            hints=[Hint("market_column", None, "name the column of market names with {knob}")],
        )


def check_markets(areas: Frame, column: str, markets: Sequence[str]) -> Frame:
    """Add whether each area's market is active, and the closest name for near misses.

    Parameters
    ----------
    areas
        Study areas (GeoDataFrame or DataFrame) with a column of market names.
    column
        The column holding each area's market name (``"City, ST"``).
    markets
        The active market names, e.g. from :func:`markets` (which spends one call, then
        reuses the list for a day). Required: checking never calls the service by itself.

    Returns
    -------
    GeoDataFrame
        A copy of ``areas`` with ``market_active`` (bool: the name, stripped of outer
        spaces, is listed) and ``market_suggestion`` (the closest listed name when the
        name is not listed but close, e.g. ``"Abilene TX"`` → ``"Abilene, TX"``; else None).

    Raises
    ------
    InputError
        ``column`` is not a column of ``areas`` (the message lists the columns there are).
    """
    require_market_column(areas, column)
    if isinstance(markets, str) or not isinstance(markets, Sequence):
        raise InputError(
            f"markets must be a list of market names, got {type(markets).__name__}",
            field="markets",
            hints=[Hint("markets", phrase="get it with {knob}")],
        )
    names = list(markets)
    listed = set(names)
    flags = [isinstance(v, str) and v.strip() in listed for v in areas[column]]
    suggestions = [
        None if flag or not isinstance(v, str) else suggest_market(v, names)
        for v, flag in zip(areas[column], flags, strict=True)
    ]
    out = areas.copy()
    out["market_active"] = pd.Series(flags, index=areas.index, dtype=bool)
    out["market_suggestion"] = pd.Series(suggestions, index=areas.index, dtype=object)
    return out


def suggest_market(name: str, names: Sequence[str], cutoff: float = 0.75) -> str | None:
    """The listed market closest to ``name``, or ``None`` when none is close.

    Case, punctuation, spacing and spelled-out state names are ignored first
    (``"abilene texas"`` → ``"Abilene, TX"``); then :mod:`difflib` finds the nearest.

    Examples
    --------
    >>> suggest_market("Abilene Tx", ["Abilene, TX", "Boise, ID"])
    'Abilene, TX'
    >>> suggest_market("Boise, Idaho", ["Abilene, TX", "Boise, ID"])
    'Boise, ID'
    >>> suggest_market("Marfa, TX", ["Abilene, TX", "Boise, ID"]) is None
    True
    """
    by_key: dict[str, str] = {}
    for listed in names:
        by_key.setdefault(_key(listed), listed)
    key = _key(name)
    if key in by_key:
        return by_key[key]
    close = difflib.get_close_matches(key, list(by_key), n=1, cutoff=cutoff)
    return by_key[close[0]] if close else None


def _key(name: str) -> str:
    text = re.sub(r"[^0-9a-z]+", " ", name.casefold()).strip()
    return _STATE_NAME.sub(lambda m: STATES[m[1]], text)


# -- the cached list ----------------------------------------------------------------------


@contextmanager
def key_spend(
    client: Client,
    *,
    team: str | None = None,
    user: str | None = None,
    cap: int | None = None,
    capped: str = "{cap} calls are spent",
) -> Iterator[CallSpend]:
    """The spend hook of calls outside a search (the market list, ``parcelsearch doctor``),
    spent where the key's calls are counted (:func:`parcelsearch.stores.open_spending`): in
    team mode (``team=``, else ``$PARCELSEARCH_TEAM``) the team store's ledger and pacer, as
    ``user``, so that the team's quota sees it; else the ledger beside the client's cache.
    Each attempt is reserved just before it is sent and refunded exactly when the service did
    not count it, as a search's calls are; ``cap`` (said with ``capped``) stops the calls
    after that many. The store is let go (a team store's connections) on leaving.

    Raises
    ------
    ConfigurationError
        ``team`` (or ``$PARCELSEARCH_TEAM``) is not a ``postgresql://`` URL.
    TeamStoreError
        The team store cannot be reached or has no schema.
    """
    from parcelsearch.stores.team.members import resolve_team, resolve_user

    team = resolve_team(team)
    spending = stores.open_spending(
        team,
        client.fingerprint,
        member="" if team is None else resolve_user(user),
        ledger=Ledger.in_folder(client.cache_dir) if team is None else None,
        workers=1,
    )
    try:
        yield CallSpend(spending, run_id=uuid.uuid4().hex, cap=cap, capped=capped)
    finally:
        spending.close()


def _folder(cache: Any) -> CacheFolder | None:
    if cache is False:
        return None
    if cache is None or cache is True:
        return CacheFolder()
    return CacheFolder(cache.directory if hasattr(cache, "directory") else cache)
