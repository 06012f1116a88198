"""The pacer: calls spaced evenly and held to the vendor's spike-arrest window.

:class:`RateLimiter` is shared by every thread of a :class:`~parcelsearch._fetch.http.Transport`
(and wrapped by the stores' spend hooks); :class:`Cancelled` is the stop signal it, the breaker
and the transport raise instead of sending or sleeping once the caller's stop event is set.
"""

from __future__ import annotations

import heapq
import math
import threading
import time

from parcelsearch.errors import ConfigurationError

__all__ = [
    "Cancelled",
    "RateLimiter",
    "DEFAULT_MARGIN",
    "FIRST_CALL_ALLOWANCE",
    "MOST_PERMITS",
    "PERMIT_POLL",
    "spike_window",
]

#: Share of the allowed rate kept in reserve, so network jitter never puts N + 1 calls in
#: one second of the server's sliding window (10/s → one call every 103 ms, 9.7 calls/s).
DEFAULT_MARGIN = 0.03
#: Seconds left empty after a pacer's first slot: a first call takes longer to reach the
#: service (a new connection's handshake, code run for the first time on both sides; its
#: round trip measured 57 ms against 4 ms for the next), and the next call, on time, would
#: otherwise pack the server's window.
FIRST_CALL_ALLOWANCE = 0.1
#: Seconds between looks at a stop event while every permit of a pacer is in flight.
PERMIT_POLL = 0.05
#: The most permits a pacer holds: a rate allowing more calls in a window (a test's or a
#: local service's, never the vendor's 10 a second) is paced by spacing alone.
MOST_PERMITS = 1000


def spike_window(rate: float) -> tuple[int, float]:
    """``(n, seconds)``: the vendor's spike arrest at ``rate`` calls a second allows at most
    ``n`` calls in any window of ``seconds`` (10/s: 10 in any second; 0.5/s: 1 in any 2 s;
    2.5/s: 2 in any second)."""
    if rate >= 1:
        return int(math.floor(rate)), 1.0
    return 1, 1.0 / rate


class Cancelled(Exception):  # noqa: N818 - a signal, not an error
    """Raised instead of sending (or sleeping on) once the caller's stop event is set."""


class RateLimiter:
    """Calls spaced evenly and held to the server's window, shared by all threads: no
    bursts, no spike refusal whatever the network's jitter; a pace that adapts to the
    refusals it meets.

    Two rules decide when a call may leave, both kept under one lock (a caller claims its
    turn, then sleeps *outside* the lock until it comes, so one sleeper never holds up
    another and a stop wakes every sleeper at once):

    - **Permits.** A server allowing ``n`` calls in any window of ``w`` seconds (``rate`` 10:
      10 in any second; below 1 a second, 1 in ``1 / rate`` s) counts them by its *own*
      admission time, and under load the delay between sending a call and its admission
      jitters: spacing calls evenly at the client does not keep them evenly spaced at the
      server. So the limiter holds ``n`` permits: a call takes one in :meth:`wait`, and the
      permit comes back (:meth:`done`) ``w`` seconds after the *answer* of the call that
      used it arrived (a call that never reached the server gives it back at once). The
      server admitted that call before it answered, so the next call on the same permit
      reaches it more than ``w`` seconds after that admission: the ``i``-th call is sent no
      earlier than the answer of call ``i - n`` plus the window, and no window at the server
      ever holds ``n + 1`` of this limiter's calls. Throughput is then about
      ``n / (w + round trip)``: 9.7 calls a second at 10/s and a 30 ms round trip. Above
      :data:`MOST_PERMITS` calls a second, no permits (spacing alone).
    - **Spacing.** Successive turns are at least ``1 / (rate * (1 - margin))`` seconds apart,
      so the permits never go out in a burst; the first turn is followed by
      :data:`FIRST_CALL_ALLOWANCE` more, since a first call arrives late.

    The pace adapts to the refusals it meets, as TCP's and the cloud SDKs' do (additive
    increase, multiplicative decrease): each refusal met (:meth:`pause`: a spike arrest's
    ``Retry-After``, e.g. from another client of the same key) multiplies the pace by
    :data:`DECREASE`; each call then adds :data:`INCREASE` of ``rate`` back, up to
    :data:`CEILING` of the pace refused at (which itself grows back by :data:`PROBE` a call, up
    to ``rate`` less the margin). :attr:`refusals` counts the refusals met; :attr:`pace` is the
    pace now (calls a second). ``bench/bench_pacer.py`` measures it on a loaded machine
    beside the pacers before it (bench/RESULTS.md, section ``pacer``).

    Parameters
    ----------
    rate
        Calls per second the server allows.
    margin
        Share of ``rate`` kept in reserve in the spacing.
    adaptive
        Adapt the pace to the refusals met (AIMD); ``False``: strict spacing (the bench's
        baseline).
    permits
        Hold calls to the server's window by the answers' times (above); ``False``: spacing
        alone, as before issue 59's fourth point (the bench's baseline).
    """

    #: The pace is multiplied by this at each refusal met.
    DECREASE = 0.9
    #: Each call sent adds back this share of ``rate`` to the pace (50 calls: 10 % of it).
    INCREASE = 0.002
    #: The pace never falls below this share of ``rate``.
    FLOOR = 0.25
    #: At each refusal, the most the pace grows back to is this share of the pace it was
    #: refused at (the jitter that caused it stays: the pace learns the slack it needs) …
    CEILING = 0.98
    #: … and that most grows back by this share of ``rate`` per call (a slow probe: 10 % of
    #: the rate in 500 calls), up to ``rate`` less the margin.
    PROBE = 0.0002

    def __init__(
        self,
        rate: float,
        margin: float = DEFAULT_MARGIN,
        *,
        adaptive: bool = True,
        permits: bool = True,
    ) -> None:
        if not rate > 0 or not 0 <= margin < 1:
            raise ConfigurationError(f"rate must be > 0 and margin in [0, 1), got {rate}, {margin}")
        self.rate = float(rate)
        self.margin = float(margin)
        self.adaptive = adaptive
        self.pace = self.rate * (1.0 - margin)  # calls a second now (AIMD)
        self._most = self.pace  # the most the pace grows back to, learnt from refusals
        #: Refusals met (:meth:`pause` calls): each slowed the pace.
        self.refusals = 0
        #: ``(n, seconds)``: at most ``n`` calls in any window of ``seconds`` at the server
        #: (``None`` above :data:`MOST_PERMITS` calls a second: spacing alone).
        self.window = spike_window(self.rate) if self.rate <= MOST_PERMITS else None
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)  # a permit came back
        # When each permit not in flight is free again (time.monotonic), a heap; None: no
        # permits (spacing alone).
        self._free: list[float] | None = (
            [0.0] * self.window[0] if permits and self.window is not None else None
        )
        self._mine = threading.local()  # the permit this thread holds: its free time before
        self._next: float | None = None  # the next free slot; None before the first call
        self._paused_until = 0.0  # no call before this (time.monotonic): a Retry-After

    @property
    def interval(self) -> float:
        """Seconds between two slots at the pace now."""
        return 1.0 / self.pace

    def wait(self, cancel: threading.Event | None = None, lead: float = 0.0) -> float:
        """Block until this caller's slot (``lead`` seconds before it: the caller then
        waits out the rest itself); returns the slot (``time.monotonic``).

        The calling thread takes a permit for its call and hands it back with :meth:`done`
        once the call's answer came (or it was never sent); a thread that waits again
        without it hands back the permit of its last call as answered now.

        Raises
        ------
        Cancelled
            ``cancel`` was set before the slot came (the slot and its permit are given up).
        """
        self.done()  # this thread is here again: its last call is over, answered by now
        with self._lock:
            free = self._take(cancel)
            # Never a slot sooner than ``lead`` from now: a call due at once would otherwise
            # be sent late by what the caller does in the lead, and the next one on time.
            first = self._next is None
            slot = max(time.monotonic() + lead, self._next or 0.0, self._paused_until, free)
            self._next = slot + self.interval + (FIRST_CALL_ALLOWANCE if first else 0.0)
        try:
            self._sleep(slot - lead - time.monotonic(), cancel)
        except Cancelled:
            self.done(sent=False)
            raise
        if not self.adaptive:  # strict spacing alone
            return slot
        with self._lock:
            self._most = min(self.rate * (1.0 - self.margin), self._most + self.PROBE * self.rate)
            self.pace = min(self._most, self.pace + self.INCREASE * self.rate)
        return slot

    def _take(self, cancel: threading.Event | None) -> float:
        """Under the lock: take the permit free soonest for this thread (waiting while all
        are in flight); when it is free (``time.monotonic``), 0 without permits."""
        if self._free is None:
            return 0.0
        while not self._free:  # every permit in flight: the next answer frees one
            if cancel is not None and cancel.is_set():
                raise Cancelled("stopped while waiting for the pacer")
            self._freed.wait(PERMIT_POLL)
        free = heapq.heappop(self._free)
        self._mine.free = free
        return free

    def done(self, sent: bool = True) -> None:
        """The call that took this thread's permit is over: its answer came now, or it
        failed now (``sent``: it may have reached the server), or it never reached the
        server (``sent=False``: the permit is free again at once). No-op without a permit."""
        free: float | None = getattr(self._mine, "free", None)
        if free is None or self._free is None or self.window is None:
            return
        self._mine.free = None
        with self._lock:
            heapq.heappush(self._free, time.monotonic() + self.window[1] if sent else free)
            self._freed.notify()

    @staticmethod
    def _sleep(delay: float, cancel: threading.Event | None) -> None:
        if cancel is not None:
            if cancel.wait(max(0.0, delay)):
                raise Cancelled("stopped while waiting for the pacer")
        elif delay > 0:
            time.sleep(delay)

    def pause(self, seconds: float) -> None:
        """The service asked the key to wait ``seconds`` (a ``Retry-After``): no slot, and
        no call that already holds one (see :meth:`hold`), before then. A refusal met: the
        pace is multiplied by :data:`DECREASE` (when adaptive)."""
        with self._lock:
            until = time.monotonic() + max(0.0, seconds)
            self._paused_until = max(self._paused_until, until)
            self.refusals += 1
            if self.adaptive:
                floor = self.FLOOR * self.rate
                self._most = max(floor, min(self._most, self.pace) * self.CEILING)
                self.pace = max(floor, self.pace * self.DECREASE)

    def hold(self, cancel: threading.Event | None = None) -> None:
        """Block while the key is paused: the last gate before a call is sent, so a call
        that took its slot before a ``Retry-After`` came does not leave before it ends.

        Raises
        ------
        Cancelled
            ``cancel`` was set while holding.
        """
        while True:
            with self._lock:
                delay = self._paused_until - time.monotonic()
            if delay <= 0:
                return
            if cancel is None:
                time.sleep(delay)
            elif cancel.wait(delay):
                raise Cancelled("stopped while the key was paused (Retry-After)")

    def __repr__(self) -> str:
        return (
            f"RateLimiter(rate={self.rate:g}/s, interval={self.interval * 1000:.1f} ms, "
            f"{self.refusals} refusals met)"
        )
