"""parcelsearch: every parcel GroupID inside your study areas, for the fewest Search calls.

The path a study area takes, one package each::

    planning (areas, tiling) → _run (search, fetch) → stores (ledger, cache) → result → maps

The package imports lazily (PEP 562): ``import parcelsearch`` loads only the error classes,
and each public name loads its module on first use, so the ``parcelsearch`` command starts
fast. The ``gdf.parcels`` accessor is registered on the first use of any public name
(``parcelsearch.search``, ``parcelsearch.plan``, …), and at once when geopandas is already
imported when parcelsearch is; ``import parcelsearch.accessor`` registers it explicitly.

Examples
--------
>>> import parcelsearch
>>> with parcelsearch.local_service() as client:  # doctest: +SKIP
...     result = parcelsearch.search(parcelsearch.demo_areas(), client=client)
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import typing
from typing import TYPE_CHECKING, Any

from parcelsearch.errors import *  # noqa: F403
from parcelsearch.errors import __all__ as _errors_all

#: Public name → the module that defines it (imported on first use).
_LAZY = {
    "Client": "client",
    "LocalService": "local",
    "local_service": "local",
    "Ledger": "stores.local.ledger",
    "Quota": "stores.quotas",
    "Piece": "planning.plans",
    "Plan": "planning.plans",
    "plan": "planning.plans",
    "suggest_tolerance": "planning.plans",
    "ResponseCache": "stores.local.cache",
    "SearchResult": "result",
    "zoning_price": "result",
    "check_markets": "market_list",
    "check_service": "service_check",
    "markets": "market_list",
    "search": "_run.search_run",
    "price": "_run.asking_price",
    "known_price": "_run.asking_price",
    "Price": "_run.pricing",
    "SearchOptions": "_run.options",
    "team_usage": "stores.team",
    "demo_areas": "demo",
    "runs": "_run.recorded_runs",
}

__all__ = [
    "__version__",
    "Client",
    "LocalService",
    "Ledger",
    "Piece",
    "Plan",
    "Price",
    "Quota",
    "ResponseCache",
    "SearchOptions",
    "SearchResult",
    "check_markets",
    "check_service",
    "demo_areas",
    "known_price",
    "local_service",
    "markets",
    "plan",
    "price",
    "runs",
    "search",
    "suggest_tolerance",
    "team_usage",
    "zoning_price",
    *_errors_all,
]

if TYPE_CHECKING:
    __version__: str
    from parcelsearch._run.asking_price import known_price, price
    from parcelsearch._run.options import SearchOptions
    from parcelsearch._run.pricing import Price
    from parcelsearch._run.recorded_runs import runs
    from parcelsearch._run.search_run import search
    from parcelsearch.client import Client
    from parcelsearch.demo import demo_areas
    from parcelsearch.local import LocalService, local_service
    from parcelsearch.market_list import check_markets, markets
    from parcelsearch.planning.plans import Piece, Plan, plan, suggest_tolerance
    from parcelsearch.result import SearchResult, zoning_price
    from parcelsearch.service_check import check_service
    from parcelsearch.stores.local.cache import ResponseCache
    from parcelsearch.stores.local.ledger import Ledger
    from parcelsearch.stores.quotas import Quota
    from parcelsearch.stores.team import team_usage


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (and register ``gdf.parcels``)."""
    if name == "__version__":  # from the installed metadata: pyproject.toml holds it alone
        from parcelsearch._shared import package_version

        globals()[name] = package_version()
        return globals()[name]
    module = _LAZY.get(name)
    if module is None:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
            return importlib.import_module(f"{__name__}.{name}")  # parcelsearch.profiles.save
        raise AttributeError(f"module 'parcelsearch' has no attribute {name!r}")
    importlib.import_module("parcelsearch.accessor")
    value = getattr(importlib.import_module(f"parcelsearch.{module}"), name)
    _rehome(value)
    globals()[name] = value
    return value


def _rehome(value: Any) -> None:
    """Give a public name its public home, as httpx does: ``parcelsearch.Client``, not the
    private module it is written in (reprs, help() and the reference say ``parcelsearch``).

    A class's string annotations are resolved first, in the module that wrote them, so that
    :func:`typing.get_type_hints` still finds their names after the move.
    """
    own = value.__dict__.get("__annotations__") if isinstance(value, type) else None
    if own:
        try:
            hints = typing.get_type_hints(value, include_extras=True)
        except NameError:  # a name imported only for type checkers: leave them as written
            hints = {}
        value.__annotations__ = {name: hints.get(name, kind) for name, kind in own.items()}
    value.__module__ = __name__


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if "geopandas" in sys.modules:  # a notebook that imported geopandas first: gdf.parcels now
    importlib.import_module("parcelsearch.accessor")
