"""parcelsearch: every parcel GroupID inside your study areas, for the fewest Search calls.

The path a study area takes, one module each::

    areas (validate) → planning (tiling) → pipeline (client, cache, ledger) → result → maps

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
import sys
from typing import TYPE_CHECKING, Any

from parcelsearch.errors import *  # noqa: F403
from parcelsearch.errors import __all__ as _errors_all

#: Public name → the module that defines it (imported on first use).
_LAZY = {
    "Client": "_fetch.client",
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
    "price": "_run.search_run",
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
    from parcelsearch._fetch.client import Client
    from parcelsearch._run.options import SearchOptions
    from parcelsearch._run.pricing import Price
    from parcelsearch._run.recorded_runs import runs
    from parcelsearch._run.search_run import price, search
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
        raise AttributeError(f"module 'parcelsearch' has no attribute {name!r}")
    importlib.import_module("parcelsearch.accessor")
    value = getattr(importlib.import_module(f"parcelsearch.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if "geopandas" in sys.modules:  # a notebook that imported geopandas first: gdf.parcels now
    importlib.import_module("parcelsearch.accessor")
