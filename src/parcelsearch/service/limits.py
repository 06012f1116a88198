"""The gateway's checks for one request: key, resource, spike arrest, quota, count.

The checks run in one write transaction on the key store (SQLite: statements after ``BEGIN
IMMEDIATE``; PostgreSQL: one call of the function ``parcelsearch.admit``, one round trip, which
locks the key's row with ``FOR UPDATE`` first, then counts the log in a separate statement),
in the vendor gateway's order:

1. key unknown or revoked → 401 ``Invalid ApiKey``;
2. key not enabled for the service → 401 ``Invalid ApiKey for given resource``;
3. spike arrest: at most ``per_second`` admitted requests of a key in *any* one-second
   window (a sliding window over the request log) → 429 with ``Retry-After``, not counted;
4. quota spent (for life, or this calendar month UTC) → 429, logged but not counted;
5. otherwise the call counts and is logged; the transaction commits (a call answered 503
   because a store was unreachable is given back).

The request is then handled *outside* the transaction (a search never holds a lock) and its
log row gets the status (400s included). Admissions are serialised per key store (SQLite) or
per key (PostgreSQL), which is what makes counts exact across threads, processes and hosts.
A lock held past the store's busy timeout raises
:class:`~parcelsearch.service.keys.StoreBusyError` (the service answers 503).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from parcelsearch._shared import month_of
from parcelsearch.service.keys import KeyStore, StoreBusyError, hash_key

__all__ = [
    "Outcome",
    "Refusal",
    "admit",
    "spike_window",
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
    """The vendor's spike-arrest message, e.g. ``Spike arrest violation. Allowed rate : 10ps``."""
    return f"Spike arrest violation. Allowed rate : {_rate_text(per_second)}ps"


def quota_message(name: str) -> str:
    """The vendor's quota message naming the key."""
    return f"Rate limit quota violation. Quota limit exceeded. Identifier : {name}"


def spike_window(per_second: float) -> tuple[int, float]:
    """``(n, seconds)``: at most ``n`` admissions in any window of ``seconds``.

    A rate of 10 allows 10 in any second; a rate below 1 (say 0.5) allows 1 in any 2 s.
    """
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
    # The row marks the admission (the spike window counts it), with the presumed outcome.
    guess = presumed or Outcome(0, None)
    digest = hash_key(api_key)
    admission = _admit_in_postgres if store.dialect == "postgresql" else _admit_here
    decided = admission(store, digest, service, path, now, guess)
    if isinstance(decided, Refusal):
        return decided
    key_id, month, request_id = decided
    try:
        outcome = handle()
    except BaseException:
        _finish(store, request_id, 500, None, None)
        raise
    if outcome.status == 503:  # a store was unreachable: the call did not happen
        _refund(store, key_id, month, request_id)
    elif (outcome.status, outcome.polygon_sha256, outcome.page) != (
        guess.status, guess.polygon_sha256, guess.page
    ):
        _finish(store, request_id, outcome.status, outcome.polygon_sha256, outcome.page)
    return outcome


#: What an admission leaves for the rest of the request: key id, month counted, log row id.
Admitted = tuple[int, str, int]


def _admit_here(store: KeyStore, digest: str, service: str, path: str,
                now: Callable[[], float], guess: Outcome[Any]) -> Refusal | Admitted:
    """The checks as statements of one write transaction (SQLite: the whole store locked)."""
    with store.transaction() as conn:
        row = store.execute(
            conn,
            "SELECT id, name, per_second, quota, quota_period, services, revoked,"
            " used_lifetime, used_month, month FROM keys WHERE key_hash = ?",
            (digest,),
        ).fetchone()
        if row is None or row["revoked"] is not None:
            return Refusal(401, INVALID_KEY)
        if service not in row["services"].split(","):
            return Refusal(401, INVALID_FOR_RESOURCE)
        t = now()
        allowed, window = spike_window(row["per_second"])
        oldest = store.execute(
            conn,
            "SELECT time FROM requests WHERE key_id = ? AND time > ? ORDER BY time DESC"
            " LIMIT 1 OFFSET ?",
            (row["id"], t - window, allowed - 1),
        ).fetchone()
        if oldest is not None:
            return _spike(oldest["time"], row["per_second"], t)
        month = month_of(t)
        used = row["used_lifetime"] if row["quota_period"] == "lifetime" else (
            row["used_month"] if row["month"] == month else 0
        )
        if row["quota"] is not None and used >= row["quota"]:
            _log(store, conn, row["id"], t, path, 429, counted=False)
            return Refusal(429, quota_message(row["name"]))
        store.execute(
            conn,
            "UPDATE keys SET used_lifetime = used_lifetime + 1, used_month = CASE WHEN month = ?"
            " THEN used_month + 1 ELSE 1 END, month = ? WHERE id = ?",
            (month, month, row["id"]),
        )
        request_id = _log(store, conn, row["id"], t, path, guess.status, counted=True,
                          polygon_sha256=guess.polygon_sha256, page=guess.page)
    return row["id"], month, request_id


def _admit_in_postgres(store: KeyStore, digest: str, service: str, path: str,
                       now: Callable[[], float], guess: Outcome[Any]) -> Refusal | Admitted:
    """The same checks in one call of ``parcelsearch.admit`` (one round trip; the key's row
    locked, then the log counted in a separate statement, as the SQLite path does)."""
    t = now()
    month = month_of(t)
    conn = store.connection()
    row = store.execute(
        conn,
        "SELECT verdict, key_id, name, per_second, oldest, request_id"
        " FROM parcelsearch.admit(?, ?, ?, ?, ?, ?, ?, ?)",
        (digest, service, path, t, month, guess.status, guess.polygon_sha256,
         _loggable(guess.page)),
    ).fetchone()
    verdict = row["verdict"]
    if verdict == "invalid":
        return Refusal(401, INVALID_KEY)
    if verdict == "resource":
        return Refusal(401, INVALID_FOR_RESOURCE)
    if verdict == "spike":
        return _spike(row["oldest"], row["per_second"], t)
    if verdict == "quota":
        return Refusal(429, quota_message(row["name"]))
    return int(row["key_id"]), month, int(row["request_id"])


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


def _refund(store: KeyStore, key_id: int, month: str, request_id: int) -> None:
    """Give back a counted call that was answered 503 (logged as such, not counted)."""
    try:
        with store.transaction() as conn:
            store.execute(
                conn,
                "UPDATE keys SET used_lifetime = used_lifetime - 1, used_month = CASE WHEN"
                " month = ? THEN used_month - 1 ELSE used_month END WHERE id = ?",
                (month, key_id),
            )
            store.execute(conn, "UPDATE requests SET status = 503, counted = ? WHERE id = ?",
                          (False, request_id))
    except StoreBusyError:
        log.warning("request %d answered 503 but could not be given back (store busy)",
                    request_id)


def _finish(
    store: KeyStore, request_id: int, status: int, polygon_sha256: str | None, page: int | None
) -> None:
    """Record the handled request's status, polygon and page on its log row."""
    try:
        store.execute(
            store.connection(),
            "UPDATE requests SET status = ?, polygon_sha256 = ?, page = ? WHERE id = ?",
            (status, polygon_sha256, _loggable(page), request_id),
        )
    except StoreBusyError:  # the call is counted and answered; only its status is missing
        log.warning("request %d handled (status %d) but its log row stayed locked",
                    request_id, status)
