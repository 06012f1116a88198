"""The one exception tree of parcelsearch.

Every error the toolkit raises on purpose derives from :class:`ParcelSearchError`,
so ``except parcelsearch.ParcelSearchError`` catches them all::

    ParcelSearchError
    ├── ConfigurationError        missing key or base URL, http:// URL, bad setting
    ├── InputError                study areas that cannot be planned (row, field, fix)
    ├── BudgetError               a run that would spend more than allowed
    │   ├── QuotaWouldExceedError   refused before spending: plan > known remaining quota
    │   └── BudgetExhaustedError    stopped at ``budget=N``; everything fetched is kept
    ├── CacheError                an unreadable or corrupt cache file (named)
    ├── TransportError            no usable HTTP response after retries (timeouts, resets)
    ├── MalformedResponseError    a response whose body or counts do not add up
    └── ServiceError              the service answered with an error envelope
        ├── AuthenticationError     401 (the service's message verbatim)
        ├── RateLimitError          429 spike arrest that outlasted the retries
        ├── QuotaExhaustedError     429 quota violation: the key has no calls left
        ├── BadPolygonError         400
        ├── RequestTooLargeError    414
        └── ServiceFailureError     5xx

Errors raised about a request carry its *redacted* URL (never the API key) and,
for service errors, the HTTP status and the service's ``messages`` verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ParcelSearchError",
    "ConfigurationError",
    "InputError",
    "BudgetError",
    "QuotaWouldExceedError",
    "BudgetExhaustedError",
    "CacheError",
    "TransportError",
    "MalformedResponseError",
    "ServiceError",
    "AuthenticationError",
    "RateLimitError",
    "QuotaExhaustedError",
    "BadPolygonError",
    "RequestTooLargeError",
    "ServiceFailureError",
]


class ParcelSearchError(Exception):
    """Base class of every error parcelsearch raises on purpose.

    Attributes
    ----------
    result
        When a search stops on this error: the partial
        :class:`~parcelsearch.SearchResult` of everything fetched (all of it cached).
    """

    result: object = None


class ConfigurationError(ParcelSearchError):
    """A setting is missing or unusable; the message says how to set it."""


class InputError(ParcelSearchError, ValueError):
    """Study areas that cannot be planned.

    Parameters
    ----------
    message
        What is wrong and how to fix it.
    row
        The area id (or index label) of the offending row, when one is to blame.
    field
        The column at fault (usually ``"geometry"``).
    """

    def __init__(self, message: str, *, row: object = None, field: str | None = None) -> None:
        super().__init__(message)
        self.row = row
        self.field = field


class BudgetError(ParcelSearchError):
    """A run would spend, or has spent, all the calls it was allowed."""


class QuotaWouldExceedError(BudgetError):
    """Refused before spending anything: the plan needs more calls than allowed."""

    def __init__(self, message: str, *, needed: int, allowed: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.allowed = allowed


class BudgetExhaustedError(BudgetError):
    """A run stopped at its budget; everything fetched so far is cached."""

    def __init__(self, message: str, *, spent: int, budget: int, result: object = None) -> None:
        super().__init__(message)
        self.spent = spent
        self.budget = budget
        self.result = result


class CacheError(ParcelSearchError):
    """A cache file cannot be read or trusted. The message names the file."""


class _RequestError(ParcelSearchError):
    """An error about one request; carries its redacted URL."""

    def __init__(self, message: str, *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class TransportError(_RequestError):
    """No usable HTTP response after the allowed retries (timeouts, resets, TLS)."""


class MalformedResponseError(_RequestError):
    """A response whose body is not the documented shape or whose counts disagree."""


class ServiceError(_RequestError):
    """The service answered with an error envelope.

    Attributes
    ----------
    status
        The HTTP status code.
    messages
        The service's ``messages`` list, verbatim.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        messages: Sequence[str] = (),
        url: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, url=url)
        self.status = status
        self.messages = list(messages)
        self.retry_after = retry_after


class AuthenticationError(ServiceError):
    """401: the key is missing, unknown or not enabled for this service."""


class RateLimitError(ServiceError):
    """429 spike arrest that outlasted the client's retries."""


class QuotaExhaustedError(ServiceError):
    """429 quota violation: the key has no calls left this period."""


class BadPolygonError(ServiceError):
    """400: the service refused the request's polygon or page."""


class RequestTooLargeError(ServiceError):
    """414: the request line was longer than the gateway allows."""


class ServiceFailureError(ServiceError):
    """5xx: the service failed, and kept failing through the retries."""
