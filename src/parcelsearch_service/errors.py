"""The reference service's own errors (the toolkit's are in :mod:`parcelsearch.errors`).

Both derive from :class:`parcelsearch.errors.ParcelSearchError`; the toolkit never sees them,
only the answers the service makes of them (a 400 or a 503 envelope)::

    ParcelSearchError
    ├── BadRequestError     a searchPolygon or page the service refuses (answered 400)
    └── StoreBusyError      the key or parcel store stayed locked or out of reach (answered 503)
"""

from __future__ import annotations

from collections.abc import Sequence

from parcelsearch.errors import ParcelSearchError

__all__ = ["BadRequestError", "StoreBusyError"]


class BadRequestError(ParcelSearchError):
    """A request's ``searchPolygon`` or ``page`` the service refuses: it answers 400.

    Attributes
    ----------
    status
        The HTTP status answered (400).
    messages
        The messages of the 400 envelope, each saying what is wrong and how to fix it.
    """

    status = 400

    def __init__(self, message: str, *, messages: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.messages = list(messages) or [message]


class StoreBusyError(ParcelSearchError):
    """The key store stayed locked (or unreachable) past the busy timeout: answer 503."""
