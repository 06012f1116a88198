"""The HTTP mechanism: one session, one shared pacer, one bounded retry loop, a stop switch.

Nothing here knows what a search or a market is. :class:`Transport` sends ``GET``\\ s and
runs every attempt through the same short sequence::

    gate (wait for the pacer → stop if cancelled → reserve the call) → send → judge
        → accepted: return   │ transient: back off (wakes at once on cancel), retry
                             │ final: raise

The caller's ``judge`` decides what a response means (accept it, call it transient, or
raise). How often to retry and how long to wait is a plain :class:`RetryPolicy` value
(attempts, exponential back-off with jitter, ``Retry-After`` honoured and capped); the loop,
its sleeps and its cancellation are here. Requests go through ``requests`` with urllib3's own
retries off.
"""

from __future__ import annotations

import copy
import heapq
import http.client
import math
import random
import re
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import mktime_tz, parsedate_tz
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError

from parcelsearch._fetch.bodies import check_size, read_capped
from parcelsearch._fetch.network import CA_WAYS, proxies_for, shown_proxy
from parcelsearch.errors import (
    ConfigurationError,
    CutBodyError,
    Hint,
    MalformedResponseError,
    ServiceError,
    TransportError,
)
from parcelsearch.settings import without_userinfo

__all__ = [
    "Cancelled",
    "Transient",
    "Redirected",
    "MAX_REDIRECTS",
    "Spend",
    "RateLimiter",
    "RetryPolicy",
    "RETRY_STATUSES",
    "Breaker",
    "Transport",
    "new_session",
    "retry_after",
    "remaining_calls",
    "REMAINING_HEADERS",
    "strip_query",
]

T = TypeVar("T")
#: What a request raises once its retries are used up.
RequestFailure = TransportError | MalformedResponseError | ServiceError

#: Share of the allowed rate kept in reserve, so network jitter never puts N + 1 calls in
#: one second of the server's sliding window (10/s → one call every 103 ms, 9.7 calls/s).
DEFAULT_MARGIN = 0.03
#: Statuses that may heal if asked again (spike arrest, server failures): the only ones retried.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Redirects followed for one request before it is refused.
MAX_REDIRECTS = 3
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


class Transient(Exception):  # noqa: N818 - a verdict, not an error
    """A judge's verdict: this answer may heal if asked again (5xx, spike arrest, cut body).

    Parameters
    ----------
    reason
        Short text for messages and statistics (e.g. ``"503"``, ``"body not JSON"``).
    error
        The error to raise when the retries are used up.
    response
        The response it came from, if any (its ``Retry-After`` is honoured); the transport
        fills it in for a judge's verdict.
    unsent
        ``True`` when no connection was made (refused, or timed out connecting): the service
        never saw the request, and such failures have their own, smaller allowance.
    once
        ``True`` for an answer that was delivered whole but cannot be read (not JSON, counts
        that disagree): asked once more, identically, then final — a server that answers in
        a shape we do not read will not heal, and every try is a counted call.
    outage
        ``True`` for an answer saying the vendor is down as a whole (a maintenance page,
        502/503/504): the transport's :class:`Breaker` holds every request, and one probe at
        a time asks again.
    """

    def __init__(
        self,
        reason: str,
        error: RequestFailure,
        response: requests.Response | None = None,
        *,
        unsent: bool = False,
        once: bool = False,
        outage: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error = error
        self.response = response
        self.unsent = unsent
        self.once = once
        self.outage = outage


class Redirected(Exception):  # noqa: N818 - a verdict, not an error
    """A judge's verdict: the answer is a redirect the caller accepts; send the same GET to
    ``url`` (a new attempt, reserved and paced like any other)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class Spend(Protocol):
    """What the caller does around each attempt: pace → reserve → send → settle | refund.

    The one hook of a request's spending (the toolkit's ledgers implement it through
    :class:`parcelsearch.stores.spending.Spending`): a call waits for its turn at the key's pacer,
    is reserved just before it is sent, and is settled once sent (its fate may be unknown: it
    counts as spent) or refunded when the service certainly did not count it.
    """

    def reserve(self) -> None:
        """Before every attempt (retries included); may raise to stop."""

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> None:
        """Wait for this attempt's turn (``limiter``: the transport's own pacer); may raise
        :class:`Cancelled`."""

    def settle(self) -> None:
        """After an attempt was sent (answered or not): the reservation is spent."""

    def refund(self) -> None:
        """After an attempt the service certainly did not count (e.g. spike arrest)."""

    def pause(self, seconds: float) -> None:
        """The service asked the key to wait ``seconds`` (a 429 with ``Retry-After``)."""


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


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait in between.

    A request gets ``total + 1`` attempts; of them, attempts that never connect (nothing is
    listening, or connecting timed out) are retried at most ``connect`` times, since waiting
    rarely helps there. Before retry *n* the loop waits ``backoff_factor × 2ⁿ⁻¹`` seconds
    plus up to ``backoff_jitter`` (none before the first retry: 0, 1, 2, 4 … with the
    defaults), at most ``backoff_max``; an answer's ``Retry-After`` (seconds or HTTP-date)
    wins, capped at ``retry_after_max``.
    """

    total: int = 5
    connect: int = 1
    backoff_factor: float = 0.5
    backoff_max: float = 30.0
    backoff_jitter: float = 0.25
    retry_after_max: float = 120.0

    def __post_init__(self) -> None:
        if isinstance(self.total, bool) or not isinstance(self.total, int) or self.total < 0:
            raise ConfigurationError(f"retries must be an integer >= 0, got {self.total!r}")

    def exhausted(self, failures: int, unsent: int) -> bool:
        """Whether ``failures`` failed attempts, ``unsent`` of them never connected, are all."""
        return failures > self.total or unsent > min(self.connect, self.total)

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``failures``-th failed attempt, before the next one."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        if failures <= 1:
            return 0.0
        wait = self.backoff_factor * 2.0 ** (failures - 1) + random.random() * self.backoff_jitter
        return max(0.0, min(self.backoff_max, wait))


_SECONDS = re.compile(r"\s*[0-9]+\s*")


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or HTTP-date), or ``None``.

    A date in the past is 0 seconds; a missing or unreadable header is ``None`` (it is only
    advice).
    """
    value = headers.get("Retry-After")
    if not value:
        return None
    if _SECONDS.fullmatch(value):
        return float(int(value))
    date = parsedate_tz(value)
    if date is None:
        return None
    if date[9] is None:  # no zone given: HTTP-dates are GMT
        date = (*date[:9], 0)
    return max(0.0, mktime_tz(date) - time.time())


#: The headers a gateway tells the calls left in the key's quota with, as read: Apigee's and
#: Kong's ``X-RateLimit-Remaining``, the IETF draft's ``RateLimit-Remaining`` and its
#: structured ``RateLimit: …, remaining=N, …``.
REMAINING_HEADERS = ("X-RateLimit-Remaining", "RateLimit-Remaining", "RateLimit")
_REMAINING_FIELD = re.compile(r"(?:^|[;,\s])r(?:emaining)?=\s*([0-9]+)")


def remaining_calls(headers: Mapping[str, str]) -> tuple[int, str] | None:
    """The calls left in the key's quota that an answer's headers state, and the header
    that said it (``None``: none said, or unreadable — a header is only advice). Of several
    values (a header per window, comma-separated), the smallest."""
    for name in REMAINING_HEADERS:
        value = headers.get(name)
        if not value:
            continue
        if name == "RateLimit":
            found = [int(n) for n in _REMAINING_FIELD.findall(value)]
        else:
            found = [int(part) for part in value.split(",") if _SECONDS.fullmatch(part)]
        if found:
            return min(found), name
    return None


def new_session(context: ssl.SSLContext | None = None) -> requests.Session:
    """A ``requests`` session for HTTPS with urllib3's own retries off (the loop is ours).

    ``trust_env`` is off: no ``.netrc`` password, proxy or CA bundle is taken from the
    environment behind our back; :mod:`parcelsearch._fetch.network` reads the proxy and CA
    settings the user meant, and :class:`Transport` passes them with each request.
    ``context``: the SSL context to verify with (the operating system's trust store), when
    no CA bundle is given.
    """
    session = requests.Session()
    session.trust_env = False
    adapter = _Adapter(context, max_retries=0, pool_connections=4, pool_maxsize=32)
    session.mount("https://", adapter)
    session.hooks["response"].append(read_capped)  # every body read within bounds
    return session


class _Adapter(HTTPAdapter):
    """``requests``' adapter with an SSL context of our choosing (direct and through a
    proxy) and the response deadline's tracked pools."""

    def __init__(self, context: ssl.SSLContext | None, **kwargs: Any) -> None:
        self._context = context  # before the base class makes its pool manager
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self._context is not None:
            kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {  # the response deadline's watchdog
            **self.poolmanager.pool_classes_by_scheme,
            "https": _TrackedPool,
        }

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        if self._context is not None:
            kwargs["ssl_context"] = self._context
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = {**manager.pool_classes_by_scheme, "https": _TrackedPool}
        return manager


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


class Transport:
    """Sends GETs through one session, paced by one limiter, retried by one policy.

    Parameters
    ----------
    session
        The ``requests`` session (inject one to put a fault-making adapter underneath).
    limiter
        The pacer shared by every thread using this transport.
    policy
        The retry policy.
    timeout
        Seconds to connect and between bytes of a response.
    verify
        ``True`` or the path of a CA bundle (TLS is always verified).
    deadline
        Seconds one response may take as a whole, head and body, however slowly its bytes
        come (default: no more than ``timeout`` allows between bytes); a response past it is
        abandoned and retried like a timeout.
    proxy
        The proxy given (with any credentials), else ``None``: the environment's
        (:func:`parcelsearch._fetch.network.proxies_for`).
    trust
        What certificates are trusted, said when verification fails.
    """

    def __init__(
        self,
        session: requests.Session,
        limiter: RateLimiter,
        policy: RetryPolicy,
        *,
        timeout: float,
        verify: str | bool = True,
        deadline: float | None = None,
        proxy: str | None = None,
        trust: str = "the system's CAs",
    ) -> None:
        self.session = session
        self.proxy = proxy
        self.trust = trust
        self.limiter = limiter
        self.policy = policy
        self.timeout = timeout
        self.verify = verify
        self.deadline = float(deadline) if deadline is not None else None
        #: Holds every request while the vendor is down; one probe at a time asks again.
        self.breaker = Breaker(policy)
        #: Requests answered and retries made, by status or error (e.g. ``"retried 429"``).
        self.stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()

    def get(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        judge: Callable[[requests.Response], T],
        describe: str,
        spend: Spend | None = None,
        cancel: threading.Event | None = None,
    ) -> T:
        """One request: attempts until ``judge`` accepts an answer, raises, or retries run out.

        Parameters
        ----------
        url
            The full URL.
        headers
            Request headers (the secret travels here and nowhere else).
        judge
            Turns a response into the result, raises :class:`Transient` to retry, or raises
            any other error to stop.
        describe
            A short, key-free description of the request for messages.
        spend
            Reserve before every attempt, refund when the service did not count it.
        cancel
            Once set: no further attempt, and back-off sleeps wake at once
            (:class:`Cancelled` is raised).

        Raises
        ------
        Cancelled
            ``cancel`` was set before an attempt was sent.
        TransportError
            No response after the retries, or TLS verification failed.
        """
        failures = unsent = unreadable = hops = 0
        while True:
            probe = self.breaker.admit(cancel)  # the vendor is down: hold, or be the probe
            heard = [False]
            try:
                return self._send(url, headers, judge, describe, spend, cancel, heard)
            except Transient as verdict:
                if verdict.outage and heard[0] and not self._asks_long(verdict):
                    failures += 1
                    self._count(f"retried {verdict.reason}")
                    heard[0] = False  # not an answer that closes the breaker
                    self.breaker.down(
                        probe, _given_up(verdict.error, failures), self._asked(verdict), failures
                    )
                    continue
                failures, unsent, unreadable = self._retry(
                    verdict, failures, unsent, unreadable, spend, cancel
                )
            except Redirected as hop:
                hops += 1
                if hops > MAX_REDIRECTS:
                    raise TransportError(
                        f"more than {MAX_REDIRECTS} redirects ({describe}), "
                        f"the last to {strip_query(hop.url)}",
                        url=strip_query(url),
                    ) from None
                self._count("redirected")
                url = hop.url
            finally:
                if heard[0]:
                    self.breaker.answered(probe)
                else:
                    self.breaker.release(probe)

    @staticmethod
    def _asked(verdict: Transient) -> float | None:
        return None if verdict.response is None else retry_after(verdict.response.headers)

    def _asks_long(self, verdict: Transient) -> bool:
        asked = self._asked(verdict)
        return asked is not None and asked > self.policy.retry_after_max

    def _send(
        self,
        url: str,
        headers: Mapping[str, str],
        judge: Callable[[requests.Response], T],
        describe: str,
        spend: Spend | None,
        cancel: threading.Event | None,
        heard: list[bool],
    ) -> T:
        """One attempt through the gate; ``heard[0]`` is set once an answer came. The
        pacer's permit taken at the gate is handed back when the answer came (in
        :meth:`_attempt`), else here: at once if the request never reached the service."""
        sent = False
        try:
            self._gate(spend, cancel)
            sent = True
            try:
                try:
                    return self._attempt(url, headers, judge, describe, heard)
                finally:
                    if spend is not None:
                        spend.settle()  # sent: spent, whatever came back (refunds come after)
            except _NotSent:
                sent = False
                if spend is not None:
                    spend.refund()  # the TLS handshake failed: no request reached the service
                raise
        except Transient as verdict:
            sent = sent and not verdict.unsent
            raise
        finally:
            self.limiter.done(sent=sent)

    def _retry(
        self,
        verdict: Transient,
        failures: int,
        unsent: int,
        unreadable: int,
        spend: Spend | None,
        cancel: threading.Event | None,
    ) -> tuple[int, int, int]:
        """A transient verdict that is not an outage: back off (or raise, retries used up);
        the counts of failures, of attempts never sent and of unreadable answers after it."""
        failures += 1
        unreadable += verdict.once
        if verdict.unsent:
            unsent += 1
            if spend is not None:
                spend.refund()  # no connection was made: the service never saw it
        if self.policy.exhausted(failures, unsent) or unreadable > 1:
            raise _given_up(verdict.error, failures) from None
        asked = self._asked(verdict)
        if asked is not None:
            self.limiter.pause(asked)  # every thread of this key, not just this one
            if asked > self.policy.retry_after_max:
                if spend is not None:
                    spend.pause(asked)
                raise _asked_too_long(verdict.error, asked, self.policy) from None
        self._count(f"retried {verdict.reason}")
        delay = self.policy.delay(failures, asked)
        if (
            spend is not None
            and asked is not None
            and verdict.response is not None
            and verdict.response.status_code == 429
        ):
            spend.pause(delay)  # the key is told to wait: every caller of it, not just us
        self._sleep(delay, cancel)
        return failures, unsent, unreadable

    def _attempt(
        self,
        url: str,
        headers: Mapping[str, str],
        judge: Callable[[requests.Response], T],
        describe: str,
        heard: list[bool] | None = None,
    ) -> T:
        """Send once: the judged result, or raise the :class:`Transient` verdict to retry on."""
        watchdog = _Watchdog(self.deadline)
        proxies = proxies_for(url, self.proxy)
        try:
            with watchdog:
                response = self.session.get(
                    url,
                    headers=dict(headers),
                    timeout=self._timeouts(),
                    verify=self.verify,
                    allow_redirects=False,
                    stream=self.deadline is not None,
                    proxies=proxies,
                )
                if self.deadline is not None:
                    watchdog.read(response)
            self.limiter.done()  # answered now: the pacer's permit is free a window after
        except _Overdue:
            raise Transient(
                "deadline",
                TransportError(
                    f"no whole response within the {self.deadline:g} s response deadline "
                    f"({describe}): its bytes came too slowly, so it was abandoned",
                    url=strip_query(url),
                    hints=[Hint("response_deadline", phrase="allow longer with {knob}")],
                ),
            ) from None
        except requests.exceptions.ProxyError as exc:
            failed = _proxy_failed(exc, proxies, describe, url)
            if _proxy_dropped(exc):  # a tunnel the proxy dropped: asked again, as unsent
                raise Transient("proxy dropped", failed, unsent=True) from None
            raise failed from None
        except requests.exceptions.SSLError as exc:
            through = f" through the proxy {shown_proxy(_chosen(proxies))}" if proxies else ""
            raise _NotSent(
                f"TLS verification failed ({describe}{through}): {_reason(exc)}. The "
                f"certificate was checked against {self.trust}. If your organisation "
                "inspects TLS (a proxy that re-signs what it forwards), its CA must be "
                f"trusted: {CA_WAYS}. For a local service, its CA is the ca.pem in its "
                "certificate folder.",
                url=strip_query(url),
                hints=[Hint("ca_bundle", phrase="point {knob} at the CA's PEM file")],
            ) from None
        except (
            requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError,
        ) as exc:
            raise Transient(
                "cut body",
                CutBodyError(
                    f"response body cut short or undecodable ({describe}): {_reason(exc)}",
                    url=strip_query(url),
                ),
            ) from None
        except requests.exceptions.RequestException as exc:
            raise Transient(
                _failure_name(exc), _no_response(exc, url, describe), unsent=_never_connected(exc)
            ) from None
        self._count("requests")
        if heard is not None:
            heard[0] = True
        try:
            return judge(response)
        except Transient as verdict:
            if verdict.response is None:
                verdict.response = response
            raise

    def _timeouts(self) -> tuple[float, float]:
        """(connect, between bytes): neither longer than the deadline."""
        if self.deadline is None:
            return self.timeout, self.timeout
        return min(self.timeout, self.deadline), min(self.timeout, self.deadline)

    def _gate(self, spend: Spend | None, cancel: threading.Event | None) -> None:
        # Pace, then reserve, then send at once: a call waiting for its turn holds no
        # reservation, so a process killed while waiting leaves only what it had on the wire
        # charged (the pacer's margin absorbs the reservation's round trip).
        if cancel is not None and cancel.is_set():
            raise Cancelled("the run stopped before this request was sent")
        if spend is not None:
            spend.pace(self.limiter, cancel)
        else:
            self.limiter.wait(cancel)
        if cancel is not None and cancel.is_set():
            raise Cancelled("the run stopped before this request was sent")
        self.limiter.hold(cancel)  # a Retry-After that came while this call waited its turn
        if spend is not None:
            spend.reserve()
        try:
            self.limiter.hold(cancel)  # … or while it was being reserved
            if cancel is not None and cancel.is_set():
                raise Cancelled("the run stopped before this request was sent")
        except Cancelled:
            if spend is not None:
                spend.refund()  # never sent
            raise

    def _sleep(self, delay: float, cancel: threading.Event | None) -> None:
        if cancel is None:
            time.sleep(delay)
        elif cancel.wait(delay):
            raise Cancelled("stopped during back-off")

    def _count(self, what: str) -> None:
        with self._stats_lock:
            self.stats[what] += 1


class _Overdue(Exception):  # noqa: N818 - a signal, not an error
    """The response deadline passed while its body was being read."""


#: Bytes read from a body at a time when a deadline applies.
_CHUNK = 65536
#: The connection each thread sends on now (sessions made by :func:`new_session` record it),
#: so a watchdog can end a read that blocks on it.
_IN_USE: dict[int, object] = {}


class _TrackedPool(HTTPSConnectionPool):
    """urllib3's HTTPS pool, recording the connection a thread takes in :data:`_IN_USE`."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _IN_USE[threading.get_ident()] = conn
        return conn


class _Watchdog:
    """The response deadline of one attempt, connect, head and body: at the deadline the
    socket of the connection this thread sends on is shut, which ends a read that blocks on
    a trickle (a read timeout alone restarts with every byte); the attempt then raises
    :class:`_Overdue`. ``seconds=None``: no deadline."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + (seconds or 0.0)
        self.cut = threading.Event()
        self._thread = threading.get_ident()
        self._timer: threading.Timer | None = None
        self._response: requests.Response | None = None

    def __enter__(self) -> _Watchdog:
        if self.seconds is not None:
            _IN_USE.pop(self._thread, None)
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        _IN_USE.pop(self._thread, None)
        if error is None or not self.cut.is_set():
            return  # an answer read whole is kept, however close to the deadline
        if self._response is not None:
            self._response.close()
        if isinstance(error, requests.exceptions.RequestException | OSError):
            raise _Overdue() from None  # the read the watchdog ended

    def _expire(self) -> None:
        self.cut.set()
        sock = _socket_of(self._response) or getattr(_IN_USE.get(self._thread), "sock", None)
        if isinstance(sock, socket.socket):
            try:  # the plain socket's shutdown: wakes the blocked read, leaves TLS state alone
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def read(self, response: requests.Response) -> None:
        """Read ``response``'s body whole within the deadline (else :class:`_Overdue`)."""
        if getattr(response, "_content", False) is not False:  # read already (an adapter
            return  # that builds its answers, as tests do)
        self._response = response
        chunks = []
        for chunk in response.iter_content(_CHUNK):
            chunks.append(chunk)
            check_size(response, sum(map(len, chunks)))
            if self.cut.is_set() or time.monotonic() > self.deadline:
                self.cut.set()
                raise _Overdue()
        if self.cut.is_set():  # the head or body was ended by the watchdog, not the server
            raise _Overdue()
        response._content = b"".join(chunks)  # what response.content returns from now on


def _socket_of(response: requests.Response | None) -> socket.socket | None:
    """The socket a streamed response is read from (``None`` when the adapter has none)."""
    connection = getattr(getattr(response, "raw", None), "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _innermost(exc: BaseException) -> BaseException:
    inner: BaseException = exc
    for _ in range(8):
        nxt = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    return inner


def _reason(exc: BaseException) -> str:
    """The innermost cause of a requests/urllib3 error, briefly (never headers)."""
    inner = _innermost(exc)
    return f"{type(inner).__name__}: {inner}"[:300]


def _never_connected(exc: requests.exceptions.RequestException) -> bool:
    """Whether no connection was made: refused, or timed out while connecting."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    return isinstance(exc, requests.exceptions.ConnectionError) and _refused(exc)


def _refused(exc: BaseException) -> bool:
    return isinstance(_innermost(exc), ConnectionRefusedError | NewConnectionError)


def _failure_name(exc: requests.exceptions.RequestException) -> str:
    """A short name of a failure to send for the statistics (``"retried ReadTimeoutError"``)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "ConnectTimeoutError"
    if _never_connected(exc):
        return "NewConnectionError"
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return "ReadTimeoutError"
    return "ProtocolError"


def _asked_too_long(error: RequestFailure, asked: float, policy: RetryPolicy) -> RequestFailure:
    """``error``, now saying the vendor asked for a longer wait than a run makes (no call of
    the key leaves before it ends)."""
    until = datetime.now(UTC) + timedelta(seconds=asked)
    said = error.message.replace(": still rate-limited after the retries", "")
    error.message = (
        f"{said.rstrip('.')}; the vendor asks this key to wait "
        f"{asked:.0f} s (Retry-After), until {until:%Y-%m-%d %H:%M:%S} UTC, longer "
        f"than the {policy.retry_after_max:.0f} s a run waits: no request was "
        "sent before that time. Search again after it."
    )
    return error


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


def _given_up(error: RequestFailure, attempts: int) -> RequestFailure:
    """``error``, now telling how many attempts were made."""
    error.attempts = attempts
    return error


class _NotSent(TransportError):
    """A failure before any request reached the service (the TLS handshake, the proxy):
    not a call."""


def _chosen(proxies: Mapping[str, str]) -> str:
    return proxies.get("https") or proxies.get("all") or next(iter(proxies.values()), "")


def _proxy_dropped(exc: requests.exceptions.ProxyError) -> bool:
    """Whether the proxy closed or reset the connection before answering its CONNECT (not a
    407, not refused): a busy proxy's hiccup, asked again within the allowance of requests
    that never reached the vendor; one that always drops ends with :func:`_proxy_failed`'s
    words."""
    reason = str(_innermost(exc))
    return (
        "407" not in reason
        and not _refused(exc)
        and "refused" not in reason.lower()
        and isinstance(_innermost(exc), ConnectionError | http.client.RemoteDisconnected)
    )


def _proxy_failed(
    exc: requests.exceptions.ProxyError, proxies: Mapping[str, str], describe: str, url: str
) -> _NotSent:
    """A proxy that would not open the way to the vendor: said as the proxy's (a 407 as
    proxy authentication), its credentials never shown; no request reached the vendor."""
    proxy = _chosen(proxies)
    shown = shown_proxy(proxy)
    reason = str(_innermost(exc))
    if "407" in reason:
        given = (
            "the user name and password in the proxy URL were refused"
            if "@" in urlsplit(proxy).netloc
            else "no user name and password were given"
        )
        return _NotSent(
            f"the proxy {shown} asks for authentication (HTTP 407 Proxy Authentication "
            f"Required, {describe}): {given}. Give them in the proxy URL, "
            "http://user:password@host:port (in HTTPS_PROXY, or --proxy / "
            "PARCELSEARCH_PROXY); they are sent to the proxy only and never shown. Nothing "
            "reached the vendor.",
            url=strip_query(url),
            hints=[Hint("proxy", phrase="check {knob}")],
        )
    if _refused(exc) or "refused" in reason.lower():
        return _NotSent(
            f"nothing is listening at the proxy {shown} (connection refused, {describe}). "
            "Is the proxy address right (HTTPS_PROXY, ALL_PROXY, --proxy)? Hosts the proxy "
            "must not be used for go in NO_PROXY. Nothing reached the vendor.",
            url=strip_query(url),
            hints=[Hint("proxy", phrase="check {knob}")],
        )
    return _NotSent(
        f"the proxy {shown} did not open the way to the vendor ({describe}): "
        f"{without_userinfo(reason)[:300]}. Nothing reached the vendor.",
        url=strip_query(url),
        hints=[Hint("proxy", phrase="check {knob}")],
    )


def _no_response(exc: BaseException, url: str, describe: str) -> TransportError:
    base = strip_query(url)
    if _refused(exc):
        root = base.split("/v1/")[0] if "/v1/" in base else base
        return TransportError(
            f"nothing is listening at {root} (connection refused, {describe}). Is the service "
            "running and the base URL right? A local reference service starts with "
            "`parcelsearch serve`.",
            url=base,
        )
    return TransportError(f"no usable response ({describe}): {_reason(exc)}", url=base)


def strip_query(url: str) -> str:
    """``url`` without its query (where a search's polygon travels) nor its userinfo (a
    password): for messages."""
    return without_userinfo(url.partition("?")[0])
