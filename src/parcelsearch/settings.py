"""Documented defaults, shared by the toolkit and the reference service.

Every figure that describes the vendor's services lives here, once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Final

#: Longest request line (``GET <target> HTTP/1.1``) the vendor's gateway accepts.
MAX_REQUEST_LINE_BYTES: Final = 7168
#: GroupIDs per page of search results.
PAGE_SIZE: Final = 100
#: Calls per second allowed per key (spike arrest) on demo and production keys.
DEFAULT_RATE: Final = 10.0
#: Decimals kept on every coordinate sent.
COORD_DECIMALS: Final = 6
#: The search and markets paths (the vendor also serves them under ``/prod``).
SEARCH_PATH: Final = "/v1/search"
MARKETS_PATH: Final = "/v1/markets"
STAGE_PREFIX: Final = "/prod"

#: Default limits per key type: (calls per second, quota, quota period).
KEY_TYPES: Final = {
    "demo": (10.0, 50, "lifetime"),
    "production": (10.0, 500, "month"),
}

#: The vendor's zoning prices per call, by tier (USD).
ZONING_PRICES: Final = {"basic": 0.29, "enhanced": 0.49, "premium": 0.69}

#: Environment variables read by :class:`parcelsearch.Client` and the CLI.
ENV_API_KEY: Final = "PARCELSEARCH_API_KEY"
ENV_BASE_URL: Final = "PARCELSEARCH_BASE_URL"
ENV_CA_BUNDLE: Final = "PARCELSEARCH_CA_BUNDLE"
ENV_RATE: Final = "PARCELSEARCH_RATE"
ENV_CACHE_DIR: Final = "PARCELSEARCH_CACHE_DIR"
ENV_QUOTA: Final = "PARCELSEARCH_QUOTA"


def default_cache_dir() -> Path:
    """Folder of the response cache, markets list and quota ledger.

    ``$PARCELSEARCH_CACHE_DIR`` when set, else a per-user cache folder:
    ``$XDG_CACHE_HOME/parcelsearch`` (``~/.cache/parcelsearch``), or
    ``%LOCALAPPDATA%\\parcelsearch\\Cache`` on Windows.
    """
    configured = os.environ.get(ENV_CACHE_DIR, "").strip()
    if configured:
        return Path(configured).expanduser()
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "parcelsearch" / "Cache"
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base) / "parcelsearch"
