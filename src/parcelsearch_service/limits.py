"""The gateway's checks for one request, what they decide, and the one protocol that
admits calls in a key store's dialect.

The checks run in one write transaction on the key store, in the vendor gateway's order:

1. key unknown or revoked → 401 ``Invalid ApiKey``;
2. key not enabled for the service → 401 ``Invalid ApiKey for given resource``;
3. spike arrest: at most ``per_second`` admitted requests of a key in *any* one-second
   window (a sliding window over the request log) → 429 with ``Retry-After``, not counted;
4. quota spent (for life, or this calendar month UTC) → 429, logged but not counted;
5. otherwise the call counts and is logged; the transaction commits (a call answered 503
   because a store was unreachable is given back).

How a dialect runs them is an :class:`Admission` (SQLite:
:class:`~parcelsearch_service.sqlite_admission.SqliteAdmission`; PostgreSQL:
:class:`~parcelsearch_service.postgres_admission.PostgresAdmission`), chosen by
:mod:`parcelsearch_service.gateway` from its table by the key store's dialect. This module
holds what they share: the calls and what answers them (:class:`Call`, :class:`Refusal`,
:class:`Outcome`), the vendor's messages, the spike-arrest window, the handling of admitted
calls (:func:`handle_admitted`) and the statements that settle their log rows
(:func:`settling`). Admissions are serialised per key store (SQLite) or per key
(PostgreSQL), which is what makes counts exact across threads, processes and hosts. A lock
held past the store's busy timeout raises
:class:`~parcelsearch_service.errors.StoreBusyError` (the service answers 503).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from parcelsearch_service.envelopes import error_body, printable
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys import KeyStore, bounded_rate
from parcelsearch_service.polygon import ParsedPolygon

__all__ = [
    "Outcome",
    "Refusal",
    "Call",
    "Admitted",
    "Result",
    "Admission",
    "handle_admitted",
    "failed_outcome",
    "admission_failed",
    "spike_window",
    "spike_refusal",
    "settling",
    "loggable",
    "INVALID_KEY",
    "INVALID_FOR_RESOURCE",
    "BUSY",
    "INTERNAL",
    "spike_message",
    "quota_message",
]

log = logging.getLogger("parcelsearch.service")

INVALID_KEY = "Invalid ApiKey"
INVALID_FOR_RESOURCE = "Invalid ApiKey for given resource"
#: A 500 after admission: the call was counted (and logged with status 500).
INTERNAL = (
    "internal error: the service failed while handling this request (the call was counted); "
    "try again, and report it if it persists"
)
BUSY = (
    "the service's key or parcel store is busy or unreachable; retry after the seconds in "
    "Retry-After"
)

T = TypeVar("T")


def _rate_text(per_second: float) -> str:
    return str(int(per_second)) if float(per_second).is_integer() else f"{per_second}"


def spike_message(per_second: float) -> str:
    """The vendor's spike-arrest message, e.g. ``Spike arrest violation. Allowed rate : 10ps``
    (the rate as applied: :func:`~parcelsearch_service.keys.bounded_rate`)."""
    return f"Spike arrest violation. Allowed rate : {_rate_text(bounded_rate(per_second))}ps"


def quota_message(name: str) -> str:
    """The vendor's quota message naming the key."""
    return f"Rate limit quota violation. Quota limit exceeded. Identifier : {name}"


def spike_window(per_second: float) -> tuple[int, float]:
    """``(n, seconds)``: at most ``n`` admissions in any window of ``seconds``.

    A rate of 10 allows 10 in any second; a rate below 1 (say 0.5) allows 1 in any 2 s. The
    rate is first brought within the allowed range
    (:func:`~parcelsearch_service.keys.bounded_rate`), so a rate stored out of it cannot
    overflow the window's arithmetic (``OFFSET``, ``Retry-After``).
    """
    per_second = bounded_rate(per_second)
    if per_second >= 1:
        return int(math.floor(per_second)), 1.0
    return 1, 1.0 / per_second


@dataclass(frozen=True)
class Refusal:
    """A request the gateway refused: status, message, and ``Retry-After`` seconds for 429s."""

    status: int
    message: str
    retry_after: int | None = None


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What handling an admitted request produced, as logged."""

    status: int
    body: T
    polygon_sha256: str | None = None
    page: int | None = None


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request for the gateway: whose key, for what, and what answers it.

    ``handle`` produces the response of the admitted request, outside the admission
    transaction; ``presumed`` is the outcome expected (status, polygon, page), logged with
    the admission and updated afterwards only if ``handle`` differs (``None``: status 0
    until handled); ``search`` is the polygon whose hit list ``handle`` pages through, for
    a gate that fetches it first.
    """

    api_key: str = field(repr=False)  # a secret: never in a repr
    service: str
    path: str
    handle: Callable[[], Outcome[T]]
    presumed: Outcome[Any] | None = None
    search: ParsedPolygon | None = None


#: What an admission leaves for the rest of the request: key id, month counted, log row id.
Admitted = tuple[int, str, int]

#: A call's answer from the gateway: its refusal, its outcome, or the exception that stopped
#: it (a :class:`StoreBusyError`, or an unexpected error of the store: nothing counted).
Result = Refusal | Outcome[T] | Exception


class Admission(Protocol):
    """How a key store of one dialect admits calls: the gateway's one protocol.

    An implementation (one per dialect, chosen by
    :func:`~parcelsearch_service.gateway.admission_for` from its table) is made with the
    key store, the parcel store and the portal, and admits calls two ways that count and
    log exactly alike: on a thread, and from the event loop when that needs no wait.
    """

    @property
    def keys(self) -> KeyStore:
        """The key store whose counters and log the admissions write."""

    @property
    def waits(self) -> bool:
        """Whether the calls it leaves to a thread wait on the network (a pool of threads
        serves them) rather than only on the CPU (one thread serves them in batches)."""

    def decide(
        self, calls: Sequence[Call[Any]], now: Callable[[], float]
    ) -> list[Refusal | Admitted | Exception]:
        """On a thread: each call's refusal, admission (counted and logged with its
        presumed outcome) or failure, in order, each seeing the ones before it."""

    async def answer(self, call: Call[bytes]) -> Result[bytes] | None:
        """From the event loop: ``call`` admitted and, if admitted, handled and settled;
        ``None`` if that cannot be done without waiting (then nothing was counted and a
        thread admits it with :meth:`decide`)."""

    async def close(self) -> None:
        """Close what this process opened for :meth:`answer` (connections, pools)."""


def failed_outcome(path: str, exc: Exception) -> Outcome[bytes]:
    """The outcome of an admitted request whose handling raised ``exc``: 503 when the
    parcel store is unreachable, else 500 (the call is counted either way; a 503 is given
    back by :func:`settling`)."""
    if isinstance(exc, StoreBusyError):
        log.warning("parcels database unavailable on %s: answered 503", printable(path))
        return Outcome(503, error_body(BUSY))
    log.error("error handling %s", printable(path), exc_info=exc)
    return Outcome(500, error_body(INTERNAL))


def admission_failed(call: Call[Any], exc: Exception) -> Exception:
    """``exc``, which stopped ``call``'s admission (nothing counted), logged unless the
    store was only busy."""
    if not isinstance(exc, StoreBusyError):
        log.exception("admission failed on %s", printable(call.path), exc_info=exc)
    return exc


def handle_admitted(
    calls: Sequence[Call[T]],
    decisions: Sequence[Refusal | Admitted | Exception],
    handled: list[tuple[Admitted, Outcome[Any], Outcome[Any]]],
) -> list[Result[T]]:
    """Each call's result: its refusal or failure as decided, else what its ``handle``
    returned (an :class:`Exception` it raised is its result, the call logged 500). Each
    handled call is appended to ``handled`` as it is handled (for :func:`settling`, even
    when a ``handle`` raises a :class:`BaseException`, which propagates)."""
    results: list[Result[T]] = []
    for call, decision in zip(calls, decisions, strict=True):
        if not isinstance(decision, tuple):
            results.append(decision)
            continue
        guess = call.presumed or Outcome(0, None)
        try:
            outcome = call.handle()
        except Exception as exc:  # counted, logged 500, answered by the caller
            handled.append((decision, guess, Outcome(500, None)))
            results.append(exc)
            continue
        except BaseException:
            handled.append((decision, guess, Outcome(500, None)))
            raise
        handled.append((decision, guess, outcome))
        results.append(outcome)
    return results


def spike_refusal(oldest: float, per_second: float, t: float) -> Refusal:
    """The 429 of a request that would put more than the allowed count in one window: the
    ``allowed``-th most recent admission in the window (at ``oldest``) must leave it before
    another request may pass."""
    _, window = spike_window(per_second)
    wait = oldest + window - t
    return Refusal(429, spike_message(per_second), retry_after=max(1, math.ceil(wait)))


def loggable(page: int | None) -> int | None:
    """A page number as logged: one too large for a 64-bit column is logged as unknown."""
    return page if page is not None and 0 <= page < 2**63 else None


#: Handled requests: their admission, the outcome presumed when it was logged, and the
#: outcome they had (what :func:`settling` compares).
Handled = Sequence[tuple[Admitted, Outcome[Any], Outcome[Any]]]


def settling(handled: Handled) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements (``?`` placeholders) that bring the log rows of ``handled`` requests up
    to date, to run in one transaction: a call answered 503 (a store was unreachable) is
    given back, logged as such and not counted; one whose status, polygon or page differs
    from the presumed one gets them. Empty when every outcome was as presumed."""
    statements: list[tuple[str, tuple[Any, ...]]] = []
    for (key_id, month, request_id), guess, outcome in handled:
        if outcome.status == 503:
            statements.append((_REFUND, (month, key_id)))
            statements.append((_UNCOUNTED, (503, False, request_id)))
        elif (outcome.status, outcome.polygon_sha256, outcome.page) != (
            guess.status,
            guess.polygon_sha256,
            guess.page,
        ):
            statements.append(
                (
                    _UPDATE_LOG,
                    (outcome.status, outcome.polygon_sha256, loggable(outcome.page), request_id),
                )
            )
    return statements


_REFUND = (
    "UPDATE keys SET used_lifetime = used_lifetime - 1, used_month = CASE WHEN"
    " month = ? THEN used_month - 1 ELSE used_month END WHERE id = ?"
)
_UNCOUNTED = "UPDATE requests SET status = ?, counted = ? WHERE id = ?"
_UPDATE_LOG = "UPDATE requests SET status = ?, polygon_sha256 = ?, page = ? WHERE id = ?"


#: Logged when the log rows of handled requests could not be brought up to date.
SETTLE_LAGS = (
    "%d statements updating handled requests' log rows (status, or a 503 given "
    "back) not run: the key store stayed busy"
)
