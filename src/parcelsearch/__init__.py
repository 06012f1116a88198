"""parcelsearch: every parcel GroupID inside your study areas, for the fewest Search calls.

The path a study area takes, one module each::

    areas (validate) → planning (tiling) → pipeline (client, cache, ledger) → result → maps

Examples
--------
>>> import parcelsearch
>>> with parcelsearch.local_service() as client:  # doctest: +SKIP
...     result = parcelsearch.search(parcelsearch.demo_areas(), client=client)
"""

from __future__ import annotations

from parcelsearch import accessor as _accessor  # noqa: F401  (registers gdf.parcels)
from parcelsearch.cache import ResponseCache
from parcelsearch.client import Client
from parcelsearch.demo import demo_areas
from parcelsearch.errors import *  # noqa: F403
from parcelsearch.errors import __all__ as _errors_all
from parcelsearch.ledger import Ledger, Quota
from parcelsearch.local import LocalService, local_service
from parcelsearch.market_list import check_markets, markets
from parcelsearch.pipeline import search
from parcelsearch.planning import Piece, Plan, plan, suggest_tolerance
from parcelsearch.result import SearchResult, zoning_price

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Client",
    "LocalService",
    "Ledger",
    "Piece",
    "Plan",
    "Quota",
    "ResponseCache",
    "SearchResult",
    "check_markets",
    "demo_areas",
    "local_service",
    "markets",
    "plan",
    "search",
    "suggest_tolerance",
    "zoning_price",
    *_errors_all,
]
