"""The gateway's checks for one request: key, resource, spike arrest, quota, count.

The checks run in one write transaction on the key store (SQLite: statements after ``BEGIN
IMMEDIATE``, one transaction for a whole batch of requests; PostgreSQL: one call of the
function ``parcelsearch.admit``, one round trip, which locks the key's row with ``FOR
UPDATE`` first, then counts the log in a separate statement), in the vendor gateway's order:

1. key unknown or revoked → 401 ``Invalid ApiKey``;
2. key not enabled for the service → 401 ``Invalid ApiKey for given resource``;
3. spike arrest: at most ``per_second`` admitted requests of a key in *any* one-second
   window (a sliding window over the request log) → 429 with ``Retry-After``, not counted;
4. quota spent (for life, or this calendar month UTC) → 429, logged but not counted;
5. otherwise the call counts and is logged; the transaction commits (a call answered 503
   because a store was unreachable is given back).

On SQLite an admission is usually one statement: an ``INSERT … SELECT`` that logs the
request only if every check passes (the key's rate, read before, guards that it is still
the same), and a trigger that counts it; only when that inserts nothing do the checks run
one by one, to find which refusal applies. Requests admitted together (:func:`admit_all`)
share one transaction, and see each other's rows, so a batch is as exact as one at a time.

The requests are then handled *outside* the transaction (a search never holds a lock) and
their log rows get the status (400s included) — except on the event loop
(:class:`~parcelsearch_service.loop_gate.LoopGate`), where only brief requests are admitted
and :func:`admit_in` handles each inside the transaction, its log row written final before
the one commit. Admissions are serialised per key store (SQLite) or
per key (PostgreSQL), which is what makes counts exact across threads, processes and hosts.
A lock held past the store's busy timeout raises
:class:`~parcelsearch_service.errors.StoreBusyError` (the service answers 503).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from parcelsearch._shared import month_of
from parcelsearch_service.envelopes import printable
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys import KeyStore, bounded_rate, hash_key
from parcelsearch_service.polygon import ParsedPolygon

__all__ = [
    "Outcome",
    "Refusal",
    "Call",
    "admit",
    "admit_all",
    "admit_in",
    "spike_window",
    "settling",
    "postgres_parameters",
    "postgres_verdict",
    "postgres_statement",
    "INVALID_KEY",
    "INVALID_FOR_RESOURCE",
    "spike_message",
    "quota_message",
]

log = logging.getLogger("parcelsearch.service")

INVALID_KEY = "Invalid ApiKey"
INVALID_FOR_RESOURCE = "Invalid ApiKey for given resource"

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
    """One request for :func:`admit_all`: whose key, for what, and what answers it.

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


def admit(
    store: KeyStore,
    api_key: str,
    service: str,
    path: str,
    handle: Callable[[], Outcome[T]],
    now: Callable[[], float] = time.time,
    presumed: Outcome[Any] | None = None,
) -> Refusal | Outcome[T]:
    """Check ``api_key`` for ``service``; if admitted, count, log, then call ``handle``.

    Parameters
    ----------
    store
        The key store.
    api_key
        The plaintext key from the ``x-api-key`` header.
    service
        ``"search"`` or ``"markets"``.
    path
        The request path, for the log.
    handle
        Produces the response of an admitted request, outside the admission transaction.
        If it raises, the call still counts (logged with status 500) and the exception
        propagates.
    presumed
        The outcome expected (status, polygon, page): the log row is written with it in the
        admission's commit and updated afterwards only if ``handle`` differs. ``None``: status
        0 until handled.

    Returns
    -------
    Refusal or Outcome
        The refusal (401/429) or what ``handle`` returned.

    Raises
    ------
    StoreBusyError
        The key store stayed locked past its busy timeout (nothing was counted).
    """
    (result,) = admit_all(store, [Call(api_key, service, path, handle, presumed)], now)
    if isinstance(result, Exception):
        raise result
    return result


def admit_all(
    store: KeyStore, calls: Sequence[Call[T]], now: Callable[[], float] = time.time
) -> list[Refusal | Outcome[T] | Exception]:
    """:func:`admit` for several requests, in order: admitted together, then handled.

    On SQLite the admissions share one transaction (one lock, one commit), and the log
    rows of the handled requests are settled in one more. Each request still sees the
    ones before it: the counts are exactly those of admitting them one at a time.

    Returns
    -------
    list
        Per call: its refusal, its outcome, or the exception that stopped it — a
        :class:`StoreBusyError` (the store stayed locked: nothing was counted for it) or
        an unexpected error of the store.

    Raises
    ------
    BaseException
        What a ``handle`` raised that is not an :class:`Exception` (an interrupt), once the
        calls handled so far are settled; the call that raised is logged with status 500.
    """
    decisions = _decide(store, calls, now)
    results: list[Refusal | Outcome[T] | Exception] = []
    handled: list[tuple[Admitted, Outcome[Any], Outcome[Any]]] = []
    try:
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
    finally:
        _settle(store, handled)
    return results


def admit_in(
    store: KeyStore, conn: Any, calls: Sequence[Call[T]], now: Callable[[], float] = time.time
) -> list[Refusal | Outcome[T] | Exception]:
    """:func:`admit_all` inside a write transaction already open on ``conn`` (SQLite), each
    admitted call handled at once and its log row written with its final outcome in the
    same transaction: one commit (the caller's) for the counts, the log and the answers.

    For calls whose handling is brief (the transaction holds the store's write lock
    meanwhile). Each call sees the ones before it, as in :func:`admit_all`.

    Returns
    -------
    list
        Per call: its refusal, its outcome, or the exception its ``handle`` raised (the call
        counted and logged with status 500).

    Raises
    ------
    Exception
        What the store raised: the caller rolls back, and nothing was counted.
    """
    results: list[Refusal | Outcome[T] | Exception] = []
    for call in calls:
        guess = call.presumed or Outcome(0, None)
        decision = _admit_here(store, conn, hash_key(call.api_key), call.service, call.path,
                               now(), guess)
        if isinstance(decision, Refusal):
            results.append(decision)
            continue
        result: Outcome[T] | Exception
        try:
            outcome: Outcome[Any] = call.handle()
            result = outcome
        except Exception as exc:  # counted, logged 500, answered by the caller
            outcome, result = Outcome(500, None), exc
        for statement, params in settling([(decision, guess, outcome)]):
            store.execute(conn, statement, params)
        results.append(result)
    return results


def _decide(
    store: KeyStore, calls: Sequence[Call[Any]], now: Callable[[], float]
) -> list[Refusal | Admitted | Exception]:
    """Each call's admission: on SQLite all in one transaction (if that fails for another
    reason than a lock, each alone, so that only the call at fault fails); on PostgreSQL
    one function call each."""
    if store.dialect == "postgresql" or len(calls) == 1:
        return [_decide_alone(store, call, now) for call in calls]
    try:
        with store.transaction() as conn:
            return [_admit_here(store, conn, hash_key(call.api_key), call.service, call.path,
                                now(), call.presumed or Outcome(0, None)) for call in calls]
    except StoreBusyError as exc:
        return [exc] * len(calls)
    except Exception:
        log.exception("a batch of %d admissions failed; admitting each alone", len(calls))
        return [_decide_alone(store, call, now) for call in calls]


def _decide_alone(
    store: KeyStore, call: Call[Any], now: Callable[[], float]
) -> Refusal | Admitted | Exception:
    guess = call.presumed or Outcome(0, None)
    digest = hash_key(call.api_key)
    try:
        if store.dialect == "postgresql":
            return _admit_in_postgres(store, call, now())
        with store.transaction() as conn:
            return _admit_here(store, conn, digest, call.service, call.path, now(), guess)
    except Exception as exc:  # busy, or the store failed: this call's answer
        if not isinstance(exc, StoreBusyError):
            log.exception("admission failed on %s", printable(call.path))
        return exc


#: What an admission leaves for the rest of the request: key id, month counted, log row id.
Admitted = tuple[int, str, int]


def _admit_here(store: KeyStore, conn: Any, digest: str, service: str, path: str, t: float,
                guess: Outcome[Any]) -> Refusal | Admitted:
    """The checks inside a write transaction on SQLite (the whole store locked): the one
    statement that admits, else the checks one by one."""
    month = month_of(t)
    admitted = _admit_in_one_statement(store, conn, digest, service, path, t, month, guess)
    if admitted is not None:
        return admitted
    row = store.execute(
        conn,
        "SELECT id, name, per_second, quota, quota_period, services, revoked,"
        " used_lifetime, used_month, month FROM keys WHERE key_hash = ?",
        (digest,),
    ).fetchone()
    if row is None or row["revoked"] is not None:
        return Refusal(401, INVALID_KEY)
    store.rates[digest] = row["per_second"]
    if service not in row["services"].split(","):
        return Refusal(401, INVALID_FOR_RESOURCE)
    allowed, window = spike_window(row["per_second"])
    oldest = store.execute(
        conn,
        "SELECT time FROM requests WHERE key_id = ? AND time > ? ORDER BY time DESC"
        " LIMIT 1 OFFSET ?",
        (row["id"], t - window, allowed - 1),
    ).fetchone()
    if oldest is not None:
        return _spike(oldest["time"], row["per_second"], t)
    used = row["used_lifetime"] if row["quota_period"] == "lifetime" else (
        row["used_month"] if row["month"] == month else 0
    )
    if row["quota"] is not None and used >= row["quota"]:
        _log(store, conn, row["id"], t, path, 429, counted=False)
        return Refusal(429, quota_message(row["name"]))
    # The trigger ``requests_count`` counts the call as its row is logged.
    request_id = _log(store, conn, row["id"], t, path, guess.status, counted=True,
                      polygon_sha256=guess.polygon_sha256, page=guess.page)
    return row["id"], month, request_id


#: Logs (and so, by the trigger ``requests_count``, counts) a request only if every check
#: passes; ``per_second`` must still be the rate the window and count were taken from.
_ADMIT_IN_ONE_STATEMENT = """
INSERT INTO requests (key_id, time, path, polygon_sha256, page, status, counted)
SELECT id, ?, ?, ?, ?, ?, 1 FROM keys
WHERE key_hash = ? AND revoked IS NULL AND per_second = ?
  AND instr(',' || services || ',', ?) > 0
  AND NOT EXISTS (SELECT 1 FROM requests WHERE key_id = keys.id AND time > ?
                  ORDER BY time DESC LIMIT 1 OFFSET ?)
  AND (quota IS NULL OR CASE WHEN quota_period = 'lifetime' THEN used_lifetime
                             WHEN month = ? THEN used_month ELSE 0 END < quota)
RETURNING id, key_id
"""


def _admit_in_one_statement(store: KeyStore, conn: Any, digest: str, service: str, path: str,
                            t: float, month: str, guess: Outcome[Any]) -> Admitted | None:
    """The admission as one statement, for a key whose rate is known; ``None`` if it
    inserted nothing (a refusal, or the key changed: the checks one by one decide)."""
    per_second = store.rates.get(digest)
    if per_second is None:
        return None
    allowed, window = spike_window(per_second)
    row = store.execute(conn, _ADMIT_IN_ONE_STATEMENT, (
        t, path, guess.polygon_sha256, _loggable(guess.page), guess.status, digest,
        per_second, f",{service},", t - window, allowed - 1, month,
    )).fetchone()
    return None if row is None else (int(row["key_id"]), month, int(row["id"]))


def postgres_statement(search: str | None = None) -> str:
    """The admission as one call of ``parcelsearch.admit`` (named parameters: see
    :func:`postgres_parameters`; columns: see :func:`postgres_verdict`) and, given a
    ``search`` query (one ``group_id`` column, in order; its own named parameters), the hit
    list as column ``hits`` for an admitted request — ``NULL`` otherwise: a refused request
    never searches."""
    hits = "" if search is None else (
        f", CASE WHEN a.verdict = 'admitted' THEN ARRAY({search}) END AS hits"
    )
    return (
        f"SELECT a.verdict, a.key_id, a.name, a.per_second, a.oldest, a.request_id{hits}"
        " FROM parcelsearch.admit(%(key_hash)s, %(service)s, %(path)s, %(time)s, %(month)s,"
        " %(status)s, %(polygon_sha256)s, %(page)s) AS a"
    )


def postgres_parameters(call: Call[Any], t: float) -> dict[str, Any]:
    """The parameters of :func:`postgres_statement` for ``call`` at time ``t``."""
    guess = call.presumed or Outcome(0, None)
    return {
        "key_hash": hash_key(call.api_key), "service": call.service, "path": call.path,
        "time": t, "month": month_of(t), "status": guess.status,
        "polygon_sha256": guess.polygon_sha256, "page": _loggable(guess.page),
    }


def postgres_verdict(row: Mapping[str, Any], params: Mapping[str, Any]) -> Refusal | Admitted:
    """The refusal or admission that a row of :func:`postgres_statement` run with ``params``
    (:func:`postgres_parameters`) says."""
    t = params["time"]
    verdict = row["verdict"]
    if verdict == "invalid":
        return Refusal(401, INVALID_KEY)
    if verdict == "resource":
        return Refusal(401, INVALID_FOR_RESOURCE)
    if verdict == "spike":
        return _spike(row["oldest"], row["per_second"], t)
    if verdict == "quota":
        return Refusal(429, quota_message(row["name"]))
    return int(row["key_id"]), params["month"], int(row["request_id"])


def _admit_in_postgres(store: KeyStore, call: Call[Any], t: float) -> Refusal | Admitted:
    """The same checks in one call of ``parcelsearch.admit`` (one round trip; the key's row
    locked, then the log counted in a separate statement, as the SQLite path does)."""
    params = postgres_parameters(call, t)
    row = store.execute(store.connection(), postgres_statement(), params).fetchone()
    return postgres_verdict(row, params)


def _spike(oldest: float, per_second: float, t: float) -> Refusal:
    """The 429 of a request that would put more than the allowed count in one window: the
    ``allowed``-th most recent admission in the window (at ``oldest``) must leave it before
    another request may pass."""
    _, window = spike_window(per_second)
    wait = oldest + window - t
    return Refusal(429, spike_message(per_second), retry_after=max(1, math.ceil(wait)))


def _log(
    store: KeyStore,
    conn: Any,
    key_id: int,
    t: float,
    path: str,
    status: int,
    counted: bool,
    polygon_sha256: str | None = None,
    page: int | None = None,
) -> int:
    row = store.execute(
        conn,
        "INSERT INTO requests (key_id, time, path, polygon_sha256, page, status, counted)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (key_id, t, path, polygon_sha256, _loggable(page), status, counted),
    ).fetchone()
    return int(row["id"])


def _loggable(page: int | None) -> int | None:
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
                guess.status, guess.polygon_sha256, guess.page):
            statements.append((_UPDATE_LOG, (outcome.status, outcome.polygon_sha256,
                                             _loggable(outcome.page), request_id)))
    return statements


_REFUND = ("UPDATE keys SET used_lifetime = used_lifetime - 1, used_month = CASE WHEN"
           " month = ? THEN used_month - 1 ELSE used_month END WHERE id = ?")
_UNCOUNTED = "UPDATE requests SET status = ?, counted = ? WHERE id = ?"
_UPDATE_LOG = "UPDATE requests SET status = ?, polygon_sha256 = ?, page = ? WHERE id = ?"


def _settle(store: KeyStore, handled: Handled) -> None:
    """Run :func:`settling`'s statements in one transaction (if there are any)."""
    statements = settling(handled)
    if not statements:
        return
    try:
        with store.transaction() as conn:
            for statement, params in statements:
                store.execute(conn, statement, params)
    except StoreBusyError:  # the calls are counted and answered; only their rows lag
        log.warning(SETTLE_LAGS, len(statements))


#: Logged when the log rows of handled requests could not be brought up to date.
SETTLE_LAGS = ("%d statements updating handled requests' log rows (status, or a 503 given "
               "back) not run: the key store stayed busy")
