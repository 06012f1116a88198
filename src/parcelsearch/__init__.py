"""parcelsearch: every parcel GroupID inside your study areas, for the fewest Search calls."""

from __future__ import annotations

from parcelsearch.errors import *  # noqa: F403
from parcelsearch.errors import __all__ as _errors_all

__version__ = "0.1.0"

__all__ = ["__version__", *_errors_all]
