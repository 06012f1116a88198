"""Portal sessions: a cookie (stored as its sha256 only) with its user and CSRF token, ended
after a while idle and in any case some hours after sign-in."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from parcelsearch_service.keys.store import KeyStore, hash_key
from parcelsearch_service.portal.accounts import Accounts, User
from parcelsearch_service.portal.tables import StorePart

__all__ = ["Sessions", "Session", "ActiveSession"]


@dataclass(frozen=True)
class Session:
    """A live session: its user (``None`` before sign-in) and its CSRF token."""

    token_hash: str
    user: User | None
    csrf: str

    def __repr__(self) -> str:
        return f"Session(user={self.user!r})"


@dataclass(frozen=True)
class ActiveSession:
    """A signed-in session of an account (never its cookie): when it started and was last
    used, and whether it is the one asking."""

    started: datetime
    last_seen: datetime
    current: bool


class Sessions(StorePart):
    """The portal's sessions (table ``portal_sessions``).

    Parameters
    ----------
    keys, clock
        As :class:`~parcelsearch_service.portal.tables.StorePart` takes them.
    accounts
        The users sessions belong to.
    idle_timeout, max_age
        A session ends after ``idle_timeout`` seconds without a request, and in any case
        ``max_age`` seconds after sign-in.
    """

    def __init__(
        self,
        keys: KeyStore,
        accounts: Accounts,
        idle_timeout: float,
        max_age: float,
        clock: Callable[[], float],
    ) -> None:
        super().__init__(keys, clock)
        self.accounts = accounts
        self.idle_timeout = idle_timeout
        self.max_age = max_age

    def new(self, user: User | None) -> tuple[str, Session]:
        """Start a session; returns the cookie value (stored as its sha256 only)."""
        token = secrets.token_urlsafe(32)
        session = Session(hash_key(token), user, secrets.token_urlsafe(32))
        now = self.clock()
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "DELETE FROM portal_sessions WHERE last_seen <= ? OR created <= ?",
                (now - self.idle_timeout, now - self.max_age),
            )
            self.keys.execute(
                conn,
                "INSERT INTO portal_sessions (token_hash, user_id, csrf, created, last_seen)"
                " VALUES (?, ?, ?, ?, ?)",
                (session.token_hash, None if user is None else user.id, session.csrf, now, now),
            )
        return token, session

    def find(self, token: str | None) -> Session | None:
        """The live session of cookie value ``token`` (its idle clock restarted), or ``None``."""
        if not token or len(token) > 100:
            return None
        now = self.clock()
        digest = hash_key(token)
        row = self.keys.query(
            "SELECT token_hash, user_id, csrf, created, last_seen FROM portal_sessions"
            " WHERE token_hash = ?",
            (digest,),
        ).fetchone()
        if row is None or not hmac.compare_digest(row["token_hash"], digest):
            return None
        if row["last_seen"] <= now - self.idle_timeout or row["created"] <= now - self.max_age:
            self.end(token)
            return None
        user = None if row["user_id"] is None else self.accounts.user(row["user_id"])
        if row["user_id"] is not None and user is None:
            return None
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn, "UPDATE portal_sessions SET last_seen = ? WHERE token_hash = ?", (now, digest)
            )
        return Session(digest, user, row["csrf"])

    def end(self, token: str) -> None:
        """End the session of cookie value ``token`` (no error if there is none)."""
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn, "DELETE FROM portal_sessions WHERE token_hash = ?", (hash_key(token),)
            )

    def active(self, user: User, current: Session) -> list[ActiveSession]:
        """``user``'s live sessions, the one asking (``current``) first."""
        now = self.clock()
        rows = self.keys.query(
            "SELECT token_hash, created, last_seen FROM portal_sessions WHERE user_id = ?"
            " AND last_seen > ? AND created > ? ORDER BY last_seen DESC",
            (user.id, now - self.idle_timeout, now - self.max_age),
        ).fetchall()
        found = [
            ActiveSession(
                datetime.fromtimestamp(r["created"], UTC),
                datetime.fromtimestamp(r["last_seen"], UTC),
                hmac.compare_digest(r["token_hash"], current.token_hash),
            )
            for r in rows
        ]
        return sorted(found, key=lambda s: not s.current)

    def end_others(self, user: User, current: Session) -> int:
        """End every session of ``user`` but ``current``; how many were ended."""
        with self.keys.transaction() as conn:
            cur = self.keys.execute(
                conn,
                "DELETE FROM portal_sessions WHERE user_id = ? AND token_hash <> ?",
                (user.id, current.token_hash),
            )
        return int(cur.rowcount)
