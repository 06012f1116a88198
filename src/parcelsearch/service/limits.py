"""The gateway's checks for one request: key, resource, spike arrest, quota, count.

Everything happens in one ``BEGIN IMMEDIATE`` transaction on the key store, in the
vendor gateway's order:

1. key unknown or revoked → 401 ``Invalid ApiKey``;
2. key not enabled for the service → 401 ``Invalid ApiKey for given resource``;
3. spike arrest: at most ``per_second`` admitted requests of a key in *any* one-second
   window (a sliding window over the request log) → 429 with ``Retry-After``, not counted;
4. quota spent (for life, or this calendar month UTC) → 429, logged but not counted;
5. otherwise the call counts, the request is handled *inside* the transaction and logged
   with its status (400s included), then committed.

Handling inside the transaction serialises admissions per key store, which is what makes
the counts exact under concurrent requests and across processes.
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from parcelsearch._shared import month_of
from parcelsearch.service.keys import KeyStore, hash_key

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
) -> Refusal | Outcome[T]:
    """Check ``api_key`` for ``service``; if admitted, count, call ``handle`` and log.

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
        Produces the response of an admitted request. If it raises, the call still counts
        (logged with status 500) and the exception propagates.

    Returns
    -------
    Refusal or Outcome
        The refusal (401/429) or what ``handle`` returned.
    """
    digest = hash_key(api_key)
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT id, name, per_second, quota, quota_period, services, revoked, used_lifetime,"
            " used_month, month FROM keys WHERE key_hash = ?",
            (digest,),
        ).fetchone()
        if row is None or row["revoked"] is not None:
            return Refusal(401, INVALID_KEY)
        if service not in row["services"].split(","):
            return Refusal(401, INVALID_FOR_RESOURCE)
        t = now()
        refusal = _spike(conn, row, t)
        if refusal is not None:
            return refusal
        month = month_of(t)
        used = row["used_lifetime"] if row["quota_period"] == "lifetime" else (
            row["used_month"] if row["month"] == month else 0
        )
        if row["quota"] is not None and used >= row["quota"]:
            _log(conn, row["id"], t, path, None, None, 429, counted=False)
            return Refusal(429, quota_message(row["name"]))
        conn.execute(
            "UPDATE keys SET used_lifetime = used_lifetime + 1, used_month = CASE WHEN month = ?"
            " THEN used_month + 1 ELSE 1 END, month = ? WHERE id = ?",
            (month, month, row["id"]),
        )
        try:
            outcome = handle()
        except BaseException:
            _log(conn, row["id"], t, path, None, None, 500, counted=True)
            conn.execute("COMMIT")  # the call counts whatever its outcome
            raise
        _log(conn, row["id"], t, path, outcome.polygon_sha256, outcome.page, outcome.status,
             counted=True)
        return outcome


def _spike(conn: sqlite3.Connection, row: sqlite3.Row, t: float) -> Refusal | None:
    """A 429 when admitting now would put more than the allowed count in one window."""
    allowed, window = spike_window(row["per_second"])
    # The `allowed`-th most recent admission inside the window, if there is one, must
    # leave the window before another request may pass.
    oldest = conn.execute(
        "SELECT time FROM requests WHERE key_id = ? AND time > ? ORDER BY time DESC"
        " LIMIT 1 OFFSET ?",
        (row["id"], t - window, allowed - 1),
    ).fetchone()
    if oldest is None:
        return None
    wait = oldest["time"] + window - t
    return Refusal(429, spike_message(row["per_second"]), retry_after=max(1, math.ceil(wait)))

def _log(
    conn: sqlite3.Connection,
    key_id: int,
    t: float,
    path: str,
    polygon_sha256: str | None,
    page: int | None,
    status: int,
    counted: bool,
) -> None:
    conn.execute(
        "INSERT INTO requests (key_id, time, path, polygon_sha256, page, status, counted)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (key_id, t, path, polygon_sha256, page, status, int(counted)),
    )
