"""The portal's tables, beside the keys in the same store, and the usage it shows.

The portal keeps its own tables in the key store (one source of truth with
``parcelsearch keys …`` and the gateway):

- ``portal_users``: e-mail, scrypt hash, admin flag;
- ``portal_sessions``: the sha256 of each session cookie, its user (``NULL`` before sign-in),
  its CSRF token, when it started and was last seen;
- ``portal_signin_failures``: sign-in attempts not (yet) known to have succeeded (e-mail,
  client address, time), for throttling: each is recorded *before* its password is checked;
- ``portal_devices``: browsers a user signed in from (the sha256 of a device cookie), which
  the account's throttle does not slow down;
- ``portal_apps``: which user owns which key, under which app name (unique per user; keys
  made with ``parcelsearch keys create`` have no owner; admins see them);
- ``spike_refusals``: spike-arrest refusals per key and UTC day (the gateway records them;
  they are not in the request log, which holds admitted requests only);
- ``portal_signins``: each account's recent successful sign-ins (time, client address, the
  browser's own description), shown on its Account page.

Keys themselves are created, revoked, counted and listed through :class:`KeyStore`; only a
key's hash (regenerate) and its limits (admin) are updated here.
"""

from __future__ import annotations

import hmac
import re
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

import psycopg.errors

from parcelsearch._shared import next_month_start
from parcelsearch.errors import ConfigurationError
from parcelsearch.service.envelopes import printable
from parcelsearch.service.keys import KeyStore, PostgresKeyStore, check_limits, hash_key
from parcelsearch.service.portal.passwords import (
    check_new_password,
    dummy_hash,
    hash_password,
    verify_password,
)

__all__ = [
    "PortalStore",
    "User",
    "Session",
    "App",
    "DayUsage",
    "SignIn",
    "ActiveSession",
    "Throttle",
    "normalise_email",
    "CHART_DAYS",
    "DEVICE_AGE",
    "HISTORY_DAYS",
]

#: Days in each app's calls-per-day chart (today included).
CHART_DAYS = 30
#: Days of usage history kept on each :class:`App` (the longer chart; today included).
HISTORY_DAYS = 90
#: Sign-ins remembered per account.
SIGNINS_KEPT = 20
#: Longest browser description (``User-Agent``) remembered with a sign-in.
MAX_AGENT = 200
#: Longest app (key) name the portal accepts.
MAX_APP_NAME = 100

#: The portal's tables; ``{p}`` is the schema prefix, ``{id}``/``{ref}``/``{real}`` the
#: types (SQLite: ``INTEGER PRIMARY KEY``/``INTEGER``/``REAL``; PostgreSQL: ``BIGSERIAL
#: PRIMARY KEY``/``BIGINT``/``DOUBLE PRECISION`` in schema ``parcelsearch``).
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS {p}portal_users (
    id {id},
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created {real} NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_sessions (
    token_hash TEXT PRIMARY KEY,
    user_id {ref} REFERENCES {p}portal_users(id),
    csrf TEXT NOT NULL,
    created {real} NOT NULL,
    last_seen {real} NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_signin_failures (
    id {id},
    email TEXT NOT NULL,
    address TEXT NOT NULL,
    time {real} NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS portal_signin_failures_email"
    " ON {p}portal_signin_failures (email, time)",
    "CREATE INDEX IF NOT EXISTS portal_signin_failures_address"
    " ON {p}portal_signin_failures (address, time)",
    """CREATE TABLE IF NOT EXISTS {p}portal_devices (
    token_hash TEXT PRIMARY KEY,
    user_id {ref} NOT NULL REFERENCES {p}portal_users(id),
    created {real} NOT NULL,
    failures {ref} NOT NULL DEFAULT 0
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_apps (
    key_id {ref} PRIMARY KEY REFERENCES {p}keys(id),
    user_id {ref} NOT NULL REFERENCES {p}portal_users(id)
)""",
    """CREATE TABLE IF NOT EXISTS {p}spike_refusals (
    key_id {ref} NOT NULL REFERENCES {p}keys(id),
    day TEXT NOT NULL,
    count {ref} NOT NULL,
    PRIMARY KEY (key_id, day)
)""",
    """CREATE TABLE IF NOT EXISTS {p}portal_signins (
    id {id},
    user_id {ref} NOT NULL REFERENCES {p}portal_users(id),
    time {real} NOT NULL,
    address TEXT NOT NULL,
    agent TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS portal_signins_user ON {p}portal_signins (user_id, time)",
)
_SQLITE_TYPES = {"p": "", "id": "INTEGER PRIMARY KEY", "ref": "INTEGER", "real": "REAL"}
_POSTGRES_TYPES = {
    "p": "parcelsearch.", "id": "BIGSERIAL PRIMARY KEY", "ref": "BIGINT",
    "real": "DOUBLE PRECISION",
}
#: Advisory lock taken while creating the portal's PostgreSQL tables (workers start at once).
_SCHEMA_LOCK = 0x706F7274616C

#: App names are unique per user: the key behind an app is named ``<e-mail>/<app name>`` in the
#: key store (unique there, and what the gateway's quota message names), the app keeps its
#: own name here. Added to stores made before.
_APP_NAME_COLUMN = "ALTER TABLE {p}portal_apps ADD COLUMN name TEXT"
_APP_NAME_UNIQUE = ("CREATE UNIQUE INDEX IF NOT EXISTS portal_apps_user_name"
                    " ON {p}portal_apps (user_id, name)")
#: Seconds a device cookie is trusted after the sign-in that set it.
DEVICE_AGE = 180 * 86400.0

_EMAIL = re.compile(r"^[^@\s<>\"']+@[^@\s<>\"']+\.[^@\s<>\"']+$")


def _account(email: str) -> str:
    """The account an attempt is counted against: the address as typed, trimmed and
    lower-cased, anything unprintable escaped (PostgreSQL text holds no NUL)."""
    return printable(email.strip().lower(), 254)


def normalise_email(email: str) -> str:
    """``email`` trimmed and lower-cased.

    Raises
    ------
    ConfigurationError
        Not of the form ``name@domain.tld`` (or longer than 254 characters).
    """
    text = email.strip().lower()
    if len(text) > 254 or not _EMAIL.match(text) or not text.isprintable():
        raise ConfigurationError(
            f"not an e-mail address: {email[:80]!r}; give one like analyst@example.com"
        )
    return text


@dataclass(frozen=True)
class User:
    """A portal user (never their password or its hash)."""

    id: int
    email: str
    is_admin: bool


@dataclass(frozen=True)
class Session:
    """A live session: its user (``None`` before sign-in) and its CSRF token."""

    token_hash: str
    user: User | None
    csrf: str

    def __repr__(self) -> str:
        return f"Session(user={self.user!r})"


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
        return min(self.max_delay, self.first_delay * 2.0 ** min(failures - self.per_account,
                                                                  60))


class DayUsage(NamedTuple):
    """One UTC day of a key's usage: calls counted and spike-arrest refusals."""

    day: date
    calls: int
    refused: int


@dataclass(frozen=True)
class SignIn:
    """A successful sign-in: when, from which client address, with which browser."""

    time: datetime
    address: str
    agent: str


@dataclass(frozen=True)
class ActiveSession:
    """A signed-in session of an account (never its cookie): when it started and was last
    used, and whether it is the one asking."""

    started: datetime
    last_seen: datetime
    current: bool


@dataclass(frozen=True)
class App:
    """One app (one key) as the portal shows it: settings and the gateway's counts."""

    id: int
    name: str
    owner: str | None
    key_type: str
    services: tuple[str, ...]
    per_second: float
    quota: int | None
    quota_period: str
    used_month: int
    used_lifetime: int
    revoked: bool
    spike_refusals: int
    last_used: datetime | None
    daily: tuple[DayUsage, ...]
    now: datetime

    @property
    def remaining(self) -> int | None:
        """Calls left in the current quota period (``None``: no quota)."""
        if self.quota is None:
            return None
        used = self.used_lifetime if self.quota_period == "lifetime" else self.used_month
        return max(0, self.quota - used)

    @property
    def resets(self) -> datetime | None:
        """When the quota resets (start of next month UTC), ``None`` for a lifetime quota."""
        return next_month_start(self.now) if self.quota_period == "month" else None

    def last_days(self, days: int) -> tuple[DayUsage, ...]:
        """The last ``days`` days of :attr:`daily` (today last)."""
        return self.daily[-days:]


class PortalStore:
    """The portal's view of a key store: users, sessions, sign-in throttling, apps.

    Parameters
    ----------
    keys
        The key store the gateway uses.
    idle_timeout, max_age
        A session ends after ``idle_timeout`` seconds without a request, and in any case
        ``max_age`` seconds after sign-in.
    throttle
        Sign-in limits.
    clock
        Seconds since the epoch (tests pass their own).
    """

    def __init__(
        self,
        keys: KeyStore,
        idle_timeout: float = 30 * 60.0,
        max_age: float = 8 * 3600.0,
        throttle: Throttle = Throttle(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = keys
        self.idle_timeout = idle_timeout
        self.max_age = max_age
        self.throttle = throttle
        self.clock = clock
        self._create_tables()

    def __repr__(self) -> str:
        return f"PortalStore({self.keys!r})"

    def _create_tables(self) -> None:
        postgres = isinstance(self.keys, PostgresKeyStore)
        types = _POSTGRES_TYPES if postgres else _SQLITE_TYPES
        with self.keys.transaction() as conn:
            if postgres:
                self.keys.execute(conn, "SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
            for statement in _SCHEMA:
                self.keys.execute(conn, statement.format(**types))
            if not self._has_app_names(conn):
                self.keys.execute(conn, _APP_NAME_COLUMN.format(**types))
            self.keys.execute(conn, _APP_NAME_UNIQUE.format(**types))

    def _has_app_names(self, conn: Any) -> bool:
        if isinstance(self.keys, PostgresKeyStore):
            return self.keys.execute(conn, (
                "SELECT 1 FROM information_schema.columns WHERE table_schema = 'parcelsearch'"
                " AND table_name = 'portal_apps' AND column_name = 'name'")).fetchone() is not None
        rows = self.keys.execute(conn, "PRAGMA table_info(portal_apps)").fetchall()
        return any(row["name"] == "name" for row in rows)

    def _serialise_signins(self, conn: Any) -> None:
        """Inside a transaction: wait for other sign-ins' checks (SQLite's ``BEGIN IMMEDIATE``
        does it already; PostgreSQL takes a transaction-scoped advisory lock)."""
        if isinstance(self.keys, PostgresKeyStore):
            self.keys.execute(conn, "SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK + 1,))

    def _query(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Run one read statement (``?`` placeholders) on this thread's connection."""
        return self.keys.execute(self.keys.connection(), statement, params)

    # ------------------------------------------------------------------ users

    def add_user(self, email: str, password: str, admin: bool = False) -> User:
        """Add a user; only a scrypt hash of ``password`` is stored.

        Raises
        ------
        ConfigurationError
            A bad e-mail address or password, or a user with that address already exists.
        """
        address = normalise_email(email)
        check_new_password(password)
        stored = hash_password(password)
        taken = f"a portal user {address} already exists in {self.keys.location}"
        if self._query("SELECT 1 FROM portal_users WHERE email = ?", (address,)).fetchone():
            raise ConfigurationError(taken)
        try:
            with self.keys.transaction() as conn:
                row = self.keys.execute(
                    conn,
                    "INSERT INTO portal_users (email, password_hash, is_admin, created)"
                    " VALUES (?, ?, ?, ?) RETURNING id",
                    (address, stored, int(admin), self.clock()),
                ).fetchone()
        except (sqlite3.IntegrityError, psycopg.errors.UniqueViolation):
            raise ConfigurationError(taken) from None
        return User(int(row["id"]), address, admin)

    def users(self) -> list[User]:
        """Every portal user."""
        rows = self._query(
            "SELECT id, email, is_admin FROM portal_users ORDER BY id"
        ).fetchall()
        return [User(r["id"], r["email"], bool(r["is_admin"])) for r in rows]

    def _user(self, user_id: int) -> User | None:
        row = self._query(
            "SELECT id, email, is_admin FROM portal_users WHERE id = ?", (user_id,)
        ).fetchone()
        return None if row is None else User(row["id"], row["email"], bool(row["is_admin"]))

    def authenticate(self, email: str, password: str) -> User | None:
        """The user whose e-mail and password these are, or ``None``."""
        try:
            address = normalise_email(email)
        except ConfigurationError:
            address = ""
        row = self._query(
            "SELECT id, email, password_hash, is_admin FROM portal_users WHERE email = ?",
            (address,),
        ).fetchone()
        if row is None:
            verify_password(password, dummy_hash())  # same time as a known address
            return None
        if not verify_password(password, row["password_hash"]):
            return None
        return User(row["id"], row["email"], bool(row["is_admin"]))

    # ------------------------------------------------------------------ sign-in throttling

    def begin_signin(self, email: str, address: str,
                     device: str | None = None) -> int | tuple[str, float]:
        """Check the throttles and record the attempt, in one transaction: the attempt's id
        (counted as a failure until :meth:`signin_succeeded`), or ``("account" | "address",
        seconds)`` when it must wait. Concurrent attempts are serialised, so no more are
        checked than the throttles allow.

        Parameters
        ----------
        email
            The e-mail address as typed.
        address
            The client's address.
        device
            The browser's device cookie, if any (see :meth:`signin_succeeded`).
        """
        now = self.clock()
        account = _account(email)
        with self.keys.transaction() as conn:
            self._serialise_signins(conn)
            self.keys.execute(conn, "DELETE FROM portal_signin_failures WHERE time <= ?",
                              (now - max(self.throttle.memory, self.throttle.window),))
            if not self._trusted(conn, account, device, now):
                blocked = self._blocked(conn, account, address, now)
                if blocked is not None:
                    return blocked
            row = self.keys.execute(
                conn, "INSERT INTO portal_signin_failures (email, address, time)"
                      " VALUES (?, ?, ?) RETURNING id", (account, address[:100], now),
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

    def _blocked(self, conn: Any, account: str, address: str,
                 now: float) -> tuple[str, float] | None:
        row = self.keys.execute(
            conn, "SELECT count(*) AS n, max(time) AS last FROM portal_signin_failures"
                  " WHERE email = ? AND time > ?", (account, now - self.throttle.memory),
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

    def signin_wait(self, email: str, address: str) -> tuple[str, float] | None:
        """``("account" | "address", seconds)`` if an attempt without a device cookie would
        wait now, else ``None`` (a read: nothing is recorded)."""
        with self.keys.transaction() as conn:
            return self._blocked(conn, _account(email), address, self.clock())

    def signin_failed(self, attempt: int, device: str | None = None) -> None:
        """The attempt's password was wrong: it stays counted; a device cookie that presented
        it has one failure more (at ``per_account`` of them it is trusted no longer)."""
        if not device or len(device) > 100:
            return
        with self.keys.transaction() as conn:
            self.keys.execute(conn, "UPDATE portal_devices SET failures = failures + 1"
                                    " WHERE token_hash = ?", (hash_key(device),))

    def signin_succeeded(self, attempt: int, user: User, address: str,
                         device: str | None = None) -> str:
        """The attempt signed ``user`` in: it and the account's failures from this address
        are forgotten; returns the device cookie to set (a new one, stored as its sha256;
        the browser's old one, if any, ends)."""
        token = secrets.token_urlsafe(32)
        with self.keys.transaction() as conn:
            self.keys.execute(conn, "DELETE FROM portal_signin_failures WHERE id = ?"
                                    " OR (email = ? AND address = ?)",
                              (attempt, user.email, address[:100]))
            if device and len(device) <= 100:
                self.keys.execute(conn, "DELETE FROM portal_devices WHERE token_hash = ?",
                                  (hash_key(device),))
            self.keys.execute(
                conn, "DELETE FROM portal_devices WHERE user_id = ? AND created <= ?",
                (user.id, self.clock() - DEVICE_AGE))
            self.keys.execute(
                conn, "INSERT INTO portal_devices (token_hash, user_id, created, failures)"
                      " VALUES (?, ?, ?, 0)", (hash_key(token), user.id, self.clock()))
        return token

    # ------------------------------------------------------------------ sessions

    def new_session(self, user: User | None) -> tuple[str, Session]:
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

    def session(self, token: str | None) -> Session | None:
        """The live session of cookie value ``token`` (its idle clock restarted), or ``None``."""
        if not token or len(token) > 100:
            return None
        now = self.clock()
        digest = hash_key(token)
        row = self._query(
            "SELECT token_hash, user_id, csrf, created, last_seen FROM portal_sessions"
            " WHERE token_hash = ?",
            (digest,),
        ).fetchone()
        if row is None or not hmac.compare_digest(row["token_hash"], digest):
            return None
        if row["last_seen"] <= now - self.idle_timeout or row["created"] <= now - self.max_age:
            self.end_session(token)
            return None
        user = None if row["user_id"] is None else self._user(row["user_id"])
        if row["user_id"] is not None and user is None:
            return None
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "UPDATE portal_sessions SET last_seen = ? WHERE token_hash = ?", (now, digest)
            )
        return Session(digest, user, row["csrf"])

    def end_session(self, token: str) -> None:
        """End the session of cookie value ``token`` (no error if there is none)."""
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn, "DELETE FROM portal_sessions WHERE token_hash = ?", (hash_key(token),)
            )

    # ------------------------------------------------------------------ the account page

    def _moment(self, seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, UTC)

    def record_signin(self, user: User, address: str, agent: str) -> None:
        """Remember a successful sign-in of ``user`` (the last :data:`SIGNINS_KEPT` are kept)."""
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "INSERT INTO portal_signins (user_id, time, address, agent) VALUES (?, ?, ?, ?)",
                (user.id, self.clock(), address[:100], agent[:MAX_AGENT]),
            )
            self.keys.execute(
                conn,
                "DELETE FROM portal_signins WHERE user_id = ? AND id NOT IN (SELECT id FROM"
                " portal_signins WHERE user_id = ? ORDER BY time DESC, id DESC LIMIT ?)",
                (user.id, user.id, SIGNINS_KEPT),
            )

    def signins(self, user: User, limit: int = 10) -> list[SignIn]:
        """``user``'s most recent successful sign-ins, the newest first."""
        rows = self._query(
            "SELECT time, address, agent FROM portal_signins WHERE user_id = ?"
            " ORDER BY time DESC, id DESC LIMIT ?",
            (user.id, limit),
        ).fetchall()
        return [SignIn(self._moment(r["time"]), r["address"], r["agent"]) for r in rows]

    def active_sessions(self, user: User, current: Session) -> list[ActiveSession]:
        """``user``'s live sessions, the one asking (``current``) first."""
        now = self.clock()
        rows = self._query(
            "SELECT token_hash, created, last_seen FROM portal_sessions WHERE user_id = ?"
            " AND last_seen > ? AND created > ? ORDER BY last_seen DESC",
            (user.id, now - self.idle_timeout, now - self.max_age),
        ).fetchall()
        found = [
            ActiveSession(self._moment(r["created"]), self._moment(r["last_seen"]),
                          hmac.compare_digest(r["token_hash"], current.token_hash))
            for r in rows
        ]
        return sorted(found, key=lambda s: not s.current)

    def end_other_sessions(self, user: User, current: Session) -> int:
        """End every session of ``user`` but ``current``; how many were ended."""
        with self.keys.transaction() as conn:
            cur = self.keys.execute(
                conn,
                "DELETE FROM portal_sessions WHERE user_id = ? AND token_hash <> ?",
                (user.id, current.token_hash),
            )
        return int(cur.rowcount)

    def change_password(self, user: User, current_password: str, new_password: str,
                        current: Session) -> int:
        """Change ``user``'s password and end their other sessions; how many were ended.

        Raises
        ------
        ConfigurationError
            ``current_password`` is not the account's password (nothing changes), or the new
            one breaks the password rules (the message says which).
        """
        if self.authenticate(user.email, current_password) is None:
            raise ConfigurationError(
                "the current password is wrong; type the password you signed in with"
            )
        check_new_password(new_password)
        stored = hash_password(new_password)
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn, "UPDATE portal_users SET password_hash = ? WHERE id = ?", (stored, user.id)
            )
        return self.end_other_sessions(user, current)

    # ------------------------------------------------------------------ apps

    def create_app(
        self, user: User, name: str, key_type: str, services: Iterable[str]
    ) -> tuple[int, str]:
        """Create a key owned by ``user``; returns its id and plaintext (to show once).

        Raises
        ------
        ConfigurationError
            Bad name, type or services, or the name is taken (see :meth:`KeyStore.create`).
        """
        wanted = list(services)
        name = name.strip()
        if len(name) > MAX_APP_NAME:
            raise ConfigurationError(
                f"an app name has at most {MAX_APP_NAME} characters (this one has "
                f"{len(name)}); choose a shorter one"
            )
        if not name or not name.isprintable():
            raise ConfigurationError("an app name must be printable, non-empty text")
        if not wanted:
            raise ConfigurationError("choose at least one service (search, markets)")
        taken = f"you already have an app named {name!r}; choose another name"
        if self._query(
            "SELECT 1 FROM portal_apps a JOIN keys k ON k.id = a.key_id"
            " WHERE a.user_id = ? AND coalesce(a.name, k.name) = ?", (user.id, name),
        ).fetchone() is not None:
            raise ConfigurationError(taken)
        try:  # the key's own name: unique in the store, whatever other users call their apps
            api_key = self.keys.create(f"{user.email}/{name}", key_type=key_type,
                                       services=wanted)
        except ConfigurationError as exc:
            if "already exists" in str(exc):
                raise ConfigurationError(taken) from None
            raise
        row = self._query(
            "SELECT id FROM keys WHERE key_hash = ?", (hash_key(api_key),)
        ).fetchone()
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn, "INSERT INTO portal_apps (key_id, user_id, name) VALUES (?, ?, ?)",
                (row["id"], user.id, name),
            )
        return int(row["id"]), api_key

    def _visible(self, user: User, key_id: int | None = None) -> list[Any]:
        if key_id is not None and not 0 < key_id < 2**63:  # no 64-bit column holds it
            return []
        sql = (
            "SELECT k.id, k.name AS key_name, coalesce(a.name, k.name) AS name,"
            " u.email AS owner FROM keys k"
            " LEFT JOIN portal_apps a ON a.key_id = k.id"
            " LEFT JOIN portal_users u ON u.id = a.user_id WHERE 1 = 1"
        )
        params: list[object] = []
        if not user.is_admin:
            sql += " AND a.user_id = ?"
            params.append(user.id)
        if key_id is not None:
            sql += " AND k.id = ?"
            params.append(key_id)
        return list(self._query(sql + " ORDER BY k.id", params).fetchall())

    def owned(self, user: User, key_id: int) -> str | None:
        """The name of key ``key_id`` if ``user`` may see it (owner or admin), else ``None``
        (also for an id no 64-bit column holds)."""
        rows = self._visible(user, key_id)
        return rows[0]["name"] if rows else None

    def apps(self, user: User) -> list[App]:
        """The apps ``user`` may see (all of them for an admin), with usage."""
        return [self._app(r["id"], r["key_name"], r["name"], r["owner"])
                for r in self._visible(user)]

    def _app(self, key_id: int, key_name: str, name: str, owner: str | None) -> App:
        now = datetime.fromtimestamp(self.clock(), UTC)
        summary = self.keys.get(key_name)
        log = self.keys.requests(key_name)
        last_used = None if log.empty else log["time"].max().to_pydatetime(warn=False)
        first = now.date() - timedelta(days=HISTORY_DAYS - 1)
        counted = log.loc[log["counted"], "time"].dt.date
        per_day = counted[counted >= first].value_counts()
        refusals = {
            date.fromisoformat(r["day"]): int(r["count"])
            for r in self._query(
                "SELECT day, count FROM spike_refusals WHERE key_id = ? AND day >= ?",
                (key_id, first.isoformat()),
            ).fetchall()
        }
        daily = tuple(
            DayUsage(day, int(per_day.get(day, 0)), refusals.get(day, 0))
            for day in (first + timedelta(days=i) for i in range(HISTORY_DAYS))
        )
        refused = self._query(
            "SELECT coalesce(sum(count), 0) AS n FROM spike_refusals WHERE key_id = ?", (key_id,)
        ).fetchone()["n"]
        return App(
            id=key_id, name=name, owner=owner, key_type=summary["type"],
            services=tuple(summary["services"]), per_second=summary["per_second"],
            quota=summary["quota"], quota_period=summary["quota_period"],
            used_month=summary["used_month"], used_lifetime=summary["used_lifetime"],
            revoked=summary["revoked"], spike_refusals=int(refused), last_used=last_used,
            daily=daily, now=now,
        )

    def app(self, user: User, key_id: int) -> App | None:
        """One app ``user`` may see, or ``None``."""
        rows = self._visible(user, key_id)
        if not rows:
            return None
        return self._app(rows[0]["id"], rows[0]["key_name"], rows[0]["name"], rows[0]["owner"])

    def regenerate(self, key_id: int) -> str | None:
        """A new plaintext for key ``key_id`` (the old one stops at once); ``None`` if the
        key is revoked."""
        api_key = secrets.token_urlsafe(30)
        with self.keys.transaction() as conn:
            cur = self.keys.execute(
                conn,
                "UPDATE keys SET key_hash = ? WHERE id = ? AND revoked IS NULL",
                (hash_key(api_key), key_id),
            )
        return api_key if cur.rowcount == 1 else None

    def revoke(self, key_id: int) -> None:
        """Revoke key ``key_id`` (through the key store)."""
        row = self._query(
            "SELECT name FROM keys WHERE id = ?", (key_id,)
        ).fetchone()
        if row is not None:
            self.keys.revoke(row["name"])

    def set_limits(self, key_id: int, per_second: float, quota: int | None) -> None:
        """Set a key's per-second rate and quota; the gateway applies them on its next
        request (it reads them inside each admission transaction).

        Raises
        ------
        ConfigurationError
            A rate or quota outside its range (:func:`~parcelsearch.service.keys.check_limits`
            names the field and the range).
        """
        check_limits(per_second, quota)
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "UPDATE keys SET per_second = ?, quota = ? WHERE id = ?",
                (float(per_second), quota, key_id),
            )

    # ------------------------------------------------------------------ gateway

    def count_spike_refusal(self, api_key: str) -> None:
        """Count one spike-arrest refusal of ``api_key`` today (UTC)."""
        with self.keys.transaction() as conn:
            self.keys.execute(conn, *self.spike_refusal(api_key))

    def spike_refusal(self, api_key: str) -> tuple[str, tuple[str, str]]:
        """The statement (``?`` placeholders) and parameters that count one spike-arrest
        refusal of ``api_key`` today (UTC); it counts nothing for an unknown key."""
        day = datetime.fromtimestamp(self.clock(), UTC).date().isoformat()
        return (
            "INSERT INTO spike_refusals (key_id, day, count) SELECT id, ?, 1 FROM keys"
            " WHERE key_hash = ?"
            " ON CONFLICT (key_id, day) DO UPDATE SET count = spike_refusals.count + 1",
            (day, hash_key(api_key)),
        )
