"""The HTTP mechanism: one session, one shared pacer, one bounded retry loop, a stop switch.

Nothing here knows what a search or a market is. :class:`Transport` sends ``GET``\\ s and
runs every attempt through the same short sequence::

    gate (wait for the pacer → stop if cancelled → reserve the call) → send → judge
        → accepted: return   │ transient: back off (wakes at once on cancel), retry
                             │ final: raise

The caller's ``judge`` decides what a response means (accept it, call it transient, or
raise). How often to retry and how long to wait is a plain
:class:`~parcelsearch._fetch.retries.RetryPolicy` value (attempts, exponential back-off with
jitter, ``Retry-After`` honoured and capped); the pacer is
:class:`~parcelsearch._fetch.pacing.RateLimiter`, the hold while the vendor is down
:class:`~parcelsearch._fetch.outages.Breaker`, the session and the response deadline's
watchdog :mod:`~parcelsearch._fetch.session`; the loop, its sleeps and its cancellation are
here. Requests go through ``requests`` with urllib3's own retries off.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Protocol, TypeVar

import requests

from parcelsearch._fetch.failures import (
    NotSent,
    RequestFailure,
    cut_body,
    failure_name,
    never_connected,
    no_response,
    overdue,
    proxy_dropped,
    proxy_failed,
    strip_query,
    tls_failed,
)
from parcelsearch._fetch.network import proxies_for
from parcelsearch._fetch.outages import Breaker
from parcelsearch._fetch.pacing import Cancelled, RateLimiter
from parcelsearch._fetch.retries import RetryPolicy, retry_after
from parcelsearch._fetch.session import Overdue, Watchdog
from parcelsearch.errors import TransportError

__all__ = [
    "Transient",
    "Redirected",
    "MAX_REDIRECTS",
    "Spend",
    "RETRY_STATUSES",
    "Transport",
]

T = TypeVar("T")

#: Statuses that may heal if asked again (spike arrest, server failures): the only ones retried.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Redirects followed for one request before it is refused.
MAX_REDIRECTS = 3


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
            except NotSent:
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
        watchdog = Watchdog(self.deadline)
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
        except Overdue:
            raise Transient("deadline", overdue(self.deadline, describe, url)) from None
        except requests.exceptions.ProxyError as exc:
            failed = proxy_failed(exc, proxies, describe, url)
            if proxy_dropped(exc):  # a tunnel the proxy dropped: asked again, as unsent
                raise Transient("proxy dropped", failed, unsent=True) from None
            raise failed from None
        except requests.exceptions.SSLError as exc:
            raise tls_failed(exc, proxies, describe, url, self.trust) from None
        except (
            requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError,
        ) as exc:
            raise Transient("cut body", cut_body(exc, describe, url)) from None
        except requests.exceptions.RequestException as exc:
            raise Transient(
                failure_name(exc), no_response(exc, url, describe), unsent=never_connected(exc)
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


def _given_up(error: RequestFailure, attempts: int) -> RequestFailure:
    """``error``, now telling how many attempts were made."""
    error.attempts = attempts
    return error
