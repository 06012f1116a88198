"""The sign-in throttle: each attempt recorded before its password is checked; per account a
growing delay (never a lock-out), browsers that signed in before (device cookies) exempt; per
client address a window."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from parcelsearch_service.envelopes import printable
from parcelsearch_service.keys.store import KeyStore, hash_key
from parcelsearch_service.portal.accounts import User
from parcelsearch_service.portal.tables import StorePart, serialise_signins

__all__ = ["SignInAttempts", "Throttle", "DEVICE_AGE"]

#: Seconds a device cookie is trusted after the sign-in that set it.
DEVICE_AGE = 180 * 86400.0


def _account(email: str) -> str:
    """The account an attempt is counted against: the address as typed, trimmed and
    lower-cased, anything unprintable escaped (PostgreSQL text holds no NUL)."""
    return printable(email.strip().lower(), 254)


@dataclass(frozen=True)
class Throttle:
    """Sign-in throttling, per account and per client address.

    Per account (e-mail address), failures are remembered for ``memory`` seconds: the first
    ``per_account`` are free, then each further attempt waits ``first_delay`` seconds after
    the last failure, doubling with every failure, up to ``max_delay``: guessing slows down
    to one try per ``max_delay``, and the account is never locked — a browser that signed in
    to it before (its device cookie) is not slowed down at all, until it fails
    ``per_account`` times itself. Per client address, at most ``per_address`` failures in
    any ``window`` seconds (password spraying across accounts).
    """

    per_account: int = 5
    per_address: int = 20
    window: float = 15 * 60.0
    first_delay: float = 30.0
    max_delay: float = 15 * 60.0
    memory: float = 24 * 3600.0

    def account_delay(self, failures: int) -> float:
        """Seconds an attempt must wait after the last of ``failures`` recent failures."""
        if failures < self.per_account:
            return 0.0
        return min(self.max_delay, self.first_delay * 2.0 ** min(failures - self.per_account, 60))


class SignInAttempts(StorePart):
    """Sign-in attempts (tables ``portal_signin_failures``, ``portal_devices``), throttled.

    Parameters
    ----------
    keys, clock
        As :class:`~parcelsearch_service.portal.tables.StorePart` takes them.
    throttle
        Sign-in limits.
    """

    def __init__(self, keys: KeyStore, throttle: Throttle, clock: Callable[[], float]) -> None:
        super().__init__(keys, clock)
        self.throttle = throttle

    def begin(self, email: str, address: str, device: str | None = None) -> int | tuple[str, float]:
        """Check the throttles and record the attempt, in one transaction: the attempt's id
        (counted as a failure until :meth:`succeeded`), or ``("account" | "address",
        seconds)`` when it must wait. Concurrent attempts are serialised, so no more are
        checked than the throttles allow.

        Parameters
        ----------
        email
            The e-mail address as typed.
        address
            The client's address.
        device
            The browser's device cookie, if any (see :meth:`succeeded`).
        """
        now = self.clock()
        account = _account(email)
        with self.keys.transaction() as conn:
            serialise_signins(self.keys, conn)
            self.keys.execute(
                conn,
                "DELETE FROM portal_signin_failures WHERE time <= ?",
                (now - max(self.throttle.memory, self.throttle.window),),
            )
            if not self._trusted(conn, account, device, now):
                blocked = self._blocked(conn, account, address, now)
                if blocked is not None:
                    return blocked
            row = self.keys.execute(
                conn,
                "INSERT INTO portal_signin_failures (email, address, time)"
                " VALUES (?, ?, ?) RETURNING id",
                (account, address[:100], now),
            ).fetchone()
        return int(row["id"])

    def _trusted(self, conn: Any, account: str, device: str | None, now: float) -> bool:
        """Whether ``device`` is a live device cookie of the user ``account``, with fewer than
        ``per_account`` failures of its own."""
        if not device or len(device) > 100:
            return False
        row = self.keys.execute(
            conn,
            "SELECT d.failures FROM portal_devices d JOIN portal_users u ON u.id = d.user_id"
            " WHERE d.token_hash = ? AND u.email = ? AND d.created > ?",
            (hash_key(device), account, now - DEVICE_AGE),
        ).fetchone()
        return row is not None and row["failures"] < self.throttle.per_account

    def _blocked(
        self, conn: Any, account: str, address: str, now: float
    ) -> tuple[str, float] | None:
        row = self.keys.execute(
            conn,
            "SELECT count(*) AS n, max(time) AS last FROM portal_signin_failures"
            " WHERE email = ? AND time > ?",
            (account, now - self.throttle.memory),
        ).fetchone()
        wait = (row["last"] or now) + self.throttle.account_delay(int(row["n"])) - now
        if wait > 0:
            return "account", max(1.0, wait)
        row = self.keys.execute(
            conn,
            "SELECT time FROM portal_signin_failures WHERE address = ? AND time > ?"
            " ORDER BY time DESC LIMIT 1 OFFSET ?",
            (address[:100], now - self.throttle.window, self.throttle.per_address - 1),
        ).fetchone()
        if row is not None:
            return "address", max(1.0, row["time"] + self.throttle.window - now)
        return None

    def wait(self, email: str, address: str) -> tuple[str, float] | None:
        """``("account" | "address", seconds)`` if an attempt without a device cookie would
        wait now, else ``None`` (a read: nothing is recorded)."""
        with self.keys.transaction() as conn:
            return self._blocked(conn, _account(email), address, self.clock())

    def failed(self, attempt: int, device: str | None = None) -> None:
        """The attempt's password was wrong: it stays counted; a device cookie that presented
        it has one failure more (at ``per_account`` of them it is trusted no longer)."""
        if not device or len(device) > 100:
            return
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "UPDATE portal_devices SET failures = failures + 1 WHERE token_hash = ?",
                (hash_key(device),),
            )

    def succeeded(self, attempt: int, user: User, address: str, device: str | None = None) -> str:
        """The attempt signed ``user`` in: it and the account's failures from this address
        are forgotten; returns the device cookie to set (a new one, stored as its sha256;
        the browser's old one, if any, ends)."""
        token = secrets.token_urlsafe(32)
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "DELETE FROM portal_signin_failures WHERE id = ? OR (email = ? AND address = ?)",
                (attempt, user.email, address[:100]),
            )
            if device and len(device) <= 100:
                self.keys.execute(
                    conn, "DELETE FROM portal_devices WHERE token_hash = ?", (hash_key(device),)
                )
            self.keys.execute(
                conn,
                "DELETE FROM portal_devices WHERE user_id = ? AND created <= ?",
                (user.id, self.clock() - DEVICE_AGE),
            )
            self.keys.execute(
                conn,
                "INSERT INTO portal_devices (token_hash, user_id, created, failures)"
                " VALUES (?, ?, ?, 0)",
                (hash_key(token), user.id, self.clock()),
            )
        return token
