"""The vendor down as a whole (a maintenance page, 502/503/504): :class:`Breaker` holds every
request of a transport, and one probe at a time asks again."""

from __future__ import annotations

import copy
import threading
import time

from parcelsearch._fetch.failures import RequestFailure
from parcelsearch._fetch.pacing import Cancelled
from parcelsearch._fetch.retries import RetryPolicy

__all__ = ["Breaker", "PROBES_FIRST", "PROBES_MIDRUN"]

#: Paid probes while the vendor is down, when it was met at the first answer (nothing
#: answered before: it may be down for long) and when it went down after answering.
PROBES_FIRST = 1
PROBES_MIDRUN = 3


class Breaker:
    """The vendor is down (a maintenance page, 502/503/504): every request holds, and one
    probe at a time asks again, backed off, until an answer that is not an outage closes it,
    or the probes allowed are used up and every request fails with the outage's words.

    Shared by every thread of a :class:`Transport`. Requests already on the wire when it
    opens are not recalled: their answers are read (an outage answer opens nothing more).
    Probe *n* waits ``4 × backoff_factor × 2ⁿ⁻¹`` seconds (2, 4, 8 s by default) or the
    vendor's short ``Retry-After``. At most :data:`PROBES_FIRST` probe when the outage was
    met before any answer (it costs at most 2 calls), :data:`PROBES_MIDRUN` after one, and
    never more than the policy's retries.
    """

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self._cond = threading.Condition()
        self.open = False
        self._probing = False
        self._probes = 0
        self._limit = 0
        self._next = 0.0
        self._opened = 0.0
        self._down = 0  # outage answers since it opened (each a call)
        self._generation = 0
        self._gave_up: RequestFailure | None = None
        self.answered_before = False

    def _delay(self, probe: int, asked: float | None) -> float:
        if asked is not None:
            return min(asked, self.policy.retry_after_max)
        return min(self.policy.backoff_max, 4 * self.policy.backoff_factor * 2.0 ** (probe - 1))

    def admit(self, cancel: threading.Event | None) -> bool:
        """Before an attempt: ``False`` at once while closed; while open, wait until this
        attempt is the probe (``True``) or the breaker closes (``False``).

        Raises
        ------
        Cancelled
            ``cancel`` was set while holding.
        ServiceError
            The probes were used up while holding (a copy of the outage's error).
        """
        with self._cond:
            if not self.open:
                return False
            generation = self._generation
            while True:
                if self._generation != generation:
                    if self._gave_up is not None:
                        raise copy.copy(self._gave_up)
                    return False
                wait = 0.1
                if not self._probing:
                    wait = self._next - time.monotonic()
                    if wait <= 0:
                        self._probing = True
                        return True
                self._cond.wait(min(wait, 0.1))
                if cancel is not None and cancel.is_set():
                    raise Cancelled("stopped while the vendor was down")

    def answered(self, probe: bool) -> None:
        """An attempt got an answer that is not an outage: a probe's closes the breaker."""
        with self._cond:
            self.answered_before = True
            if probe and self.open:
                self.open = self._probing = False
                self._gave_up = None
                self._generation += 1
                self._cond.notify_all()

    def release(self, probe: bool) -> None:
        """An attempt ended with no answer (stopped, not connected): a probe lets another
        take its place."""
        if probe:
            with self._cond:
                self._probing = False
                self._cond.notify_all()

    def down(self, probe: bool, error: RequestFailure, asked: float | None, attempts: int) -> None:
        """An answer said the vendor is down: open the breaker (the first), or count a
        failed probe. Returns to hold and try again.

        Raises
        ------
        ServiceError
            The probes allowed are used up: ``error``, saying how many calls and how long.
        """
        with self._cond:
            now = time.monotonic()
            self._down += 1
            if not self.open:
                self.open, self._probes, self._down, self._opened = True, 0, 1, now
                first = PROBES_FIRST if not self.answered_before else PROBES_MIDRUN
                self._limit = min(first, self.policy.total)
                self._next = now + self._delay(1, asked)
                self._gave_up = None
                if self._limit > 0:
                    return
            elif not probe:
                return  # on the wire when it opened: it holds like the others
            else:
                self._probes += 1
                self._probing = False
                if self._probes < self._limit:
                    self._next = now + self._delay(self._probes + 1, asked)
                    self._cond.notify_all()
                    return
            final = _outage(error, self._down, self._probes, now - self._opened, attempts)
            self.open = self._probing = False
            self._gave_up = final
            self._generation += 1
            self._cond.notify_all()
            raise final


def _outage(
    error: RequestFailure, answers: int, probes: int, seconds: float, attempts: int
) -> RequestFailure:
    """``error``, now saying the vendor stayed down through the probes allowed: what it
    cost in calls and time, and that nothing else was sent meanwhile."""
    said = error.message.replace(": the service kept failing through the retries", "")
    error.message = (
        f"{said.rstrip('.')}; it stayed down: {answers} answer{'' if answers == 1 else 's'} "
        f"said so ({probes} of them {'a probe' if probes == 1 else 'probes'}, one at a time, "
        f"over {seconds:.0f} s, while every other request held), so the outage cost "
        f"{answers} call{'' if answers == 1 else 's'}. Everything complete is kept; search "
        "again later."
    )
    error.attempts = attempts
    return error
