"""The portal's storage: one :class:`PortalStore` over the key store, made of one part a
concern.

The parts, each in its module: :class:`~parcelsearch_service.portal.accounts.Accounts`
(users, passwords, sign-in history), :class:`~parcelsearch_service.portal.sessions.Sessions`,
:class:`~parcelsearch_service.portal.signin.SignInAttempts` (the sign-in throttle),
:class:`~parcelsearch_service.portal.apps.Apps` and
:class:`~parcelsearch_service.portal.usage.Usage` (calls and spike-arrest refusals per day);
their tables are made by :mod:`~parcelsearch_service.portal.tables`. The routes and the
gateway call the store by the names below; it hands each call to its part.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from parcelsearch_service.keys.store import KeyStore
from parcelsearch_service.portal.accounts import Accounts, SignIn, User
from parcelsearch_service.portal.apps import App, Apps
from parcelsearch_service.portal.sessions import ActiveSession, Session, Sessions
from parcelsearch_service.portal.signin import SignInAttempts, Throttle
from parcelsearch_service.portal.tables import create_tables
from parcelsearch_service.portal.usage import Usage

__all__ = ["PortalStore"]

#: The sign-in limits a store has unless given others.
_THROTTLE = Throttle()


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
        throttle: Throttle = _THROTTLE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = keys
        self.clock = clock
        create_tables(keys)
        now = self._now  # every part reads the store's clock: setting it sets theirs
        self.accounts = Accounts(keys, now)
        self.sessions = Sessions(keys, self.accounts, idle_timeout, max_age, now)
        self.attempts = SignInAttempts(keys, throttle, now)
        self.usage = Usage(keys, now)
        self.applications = Apps(keys, self.usage, now)

    def __repr__(self) -> str:
        return f"PortalStore({self.keys!r})"

    def _now(self) -> float:
        return self.clock()

    # ------------------------------------------------------------------ users

    def add_user(self, email: str, password: str, admin: bool = False) -> User:
        """Add a user (:meth:`Accounts.add`)."""
        return self.accounts.add(email, password, admin)

    def users(self) -> list[User]:
        """Every portal user."""
        return self.accounts.users()

    def authenticate(self, email: str, password: str) -> User | None:
        """The user whose e-mail and password these are, or ``None``."""
        return self.accounts.authenticate(email, password)

    # ------------------------------------------------------------------ sign-in throttling

    def begin_signin(
        self, email: str, address: str, device: str | None = None
    ) -> int | tuple[str, float]:
        """Check the throttles and record the attempt (:meth:`SignInAttempts.begin`)."""
        return self.attempts.begin(email, address, device)

    def signin_wait(self, email: str, address: str) -> tuple[str, float] | None:
        """How long an attempt would wait now (:meth:`SignInAttempts.wait`)."""
        return self.attempts.wait(email, address)

    def signin_failed(self, attempt: int, device: str | None = None) -> None:
        """The attempt's password was wrong (:meth:`SignInAttempts.failed`)."""
        self.attempts.failed(attempt, device)

    def signin_succeeded(
        self, attempt: int, user: User, address: str, device: str | None = None
    ) -> str:
        """The attempt signed ``user`` in; the device cookie to set
        (:meth:`SignInAttempts.succeeded`)."""
        return self.attempts.succeeded(attempt, user, address, device)

    # ------------------------------------------------------------------ sessions

    def new_session(self, user: User | None) -> tuple[str, Session]:
        """Start a session; returns the cookie value (stored as its sha256 only)."""
        return self.sessions.new(user)

    def session(self, token: str | None) -> Session | None:
        """The live session of cookie value ``token`` (its idle clock restarted), or ``None``."""
        return self.sessions.find(token)

    def end_session(self, token: str) -> None:
        """End the session of cookie value ``token`` (no error if there is none)."""
        self.sessions.end(token)

    # ------------------------------------------------------------------ the account page

    def record_signin(self, user: User, address: str, agent: str) -> None:
        """Remember a successful sign-in of ``user`` (:meth:`Accounts.record_signin`)."""
        self.accounts.record_signin(user, address, agent)

    def signins(self, user: User, limit: int = 10) -> list[SignIn]:
        """``user``'s most recent successful sign-ins, the newest first."""
        return self.accounts.signins(user, limit)

    def active_sessions(self, user: User, current: Session) -> list[ActiveSession]:
        """``user``'s live sessions, the one asking (``current``) first."""
        return self.sessions.active(user, current)

    def end_other_sessions(self, user: User, current: Session) -> int:
        """End every session of ``user`` but ``current``; how many were ended."""
        return self.sessions.end_others(user, current)

    def change_password(
        self, user: User, current_password: str, new_password: str, current: Session
    ) -> int:
        """Change ``user``'s password and end their other sessions; how many were ended.

        Raises
        ------
        ConfigurationError
            ``current_password`` is not the account's password (nothing changes), or the new
            one breaks the password rules (the message says which).
        """
        self.accounts.change_password(user, current_password, new_password)
        return self.sessions.end_others(user, current)

    # ------------------------------------------------------------------ apps

    def create_app(
        self, user: User, name: str, key_type: str, services: Iterable[str]
    ) -> tuple[int, str]:
        """Create a key owned by ``user``; its id and plaintext (:meth:`Apps.create`)."""
        return self.applications.create(user, name, key_type, services)

    def owned(self, user: User, key_id: int) -> str | None:
        """The name of key ``key_id`` if ``user`` may see it, else ``None``."""
        return self.applications.owned(user, key_id)

    def apps(self, user: User) -> list[App]:
        """The apps ``user`` may see (all of them for an admin), with usage."""
        return self.applications.visible(user)

    def app(self, user: User, key_id: int) -> App | None:
        """One app ``user`` may see, or ``None``."""
        return self.applications.one(user, key_id)

    def owner_of(self, key_id: int) -> str | None:
        """Key ``key_id``'s owner's e-mail (:meth:`Apps.owner_of`)."""
        return self.applications.owner_of(key_id)

    def record_admin_action(self, key_id: int, admin: User, action: str) -> None:
        """Remember an admin's action on another user's app (:meth:`Apps.record_admin_action`)."""
        self.applications.record_admin_action(key_id, admin, action)

    def regenerate(self, key_id: int) -> str | None:
        """A new plaintext for key ``key_id``; ``None`` if the key is revoked."""
        return self.applications.regenerate(key_id)

    def revoke(self, key_id: int) -> None:
        """Revoke key ``key_id`` (through the key store)."""
        self.applications.revoke(key_id)

    def set_limits(self, key_id: int, per_second: float, quota: int | None) -> None:
        """Set a key's per-second rate and quota (:meth:`Apps.set_limits`)."""
        self.applications.set_limits(key_id, per_second, quota)

    # ------------------------------------------------------------------ gateway

    def count_spike_refusal(self, api_key: str) -> None:
        """Count one spike-arrest refusal of ``api_key`` today (UTC)."""
        self.usage.count_spike_refusal(api_key)

    def spike_refusal(self, api_key: str) -> tuple[str, tuple[str, str]]:
        """The statement and parameters that count one spike-arrest refusal of ``api_key``
        today (:meth:`Usage.spike_refusal`)."""
        return self.usage.spike_refusal(api_key)
