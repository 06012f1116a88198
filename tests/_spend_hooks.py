"""A plain callable as the client's spend hook, for tests that only count or stop attempts."""

from __future__ import annotations

import threading
from collections.abc import Callable

from parcelsearch._fetch.pacing import RateLimiter


class Reserving:
    """A :class:`~parcelsearch._fetch.http.Spend` whose ``reserve`` calls ``hook`` before every
    attempt (it may raise to stop); nothing is paced beyond the client's own limiter, settled,
    refunded or paused."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self._hook = hook

    def reserve(self) -> None:
        self._hook()

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> None:
        limiter.wait(cancel)

    def settle(self) -> None:
        return None

    def refund(self) -> None:
        return None

    def pause(self, seconds: float) -> None:
        return None
