"""Portal accounts: users and their passwords (scrypt hashes only), and each account's
recent successful sign-ins, shown on its Account page."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg.errors

from parcelsearch.errors import ConfigurationError
from parcelsearch_service.portal.passwords import (
    check_new_password,
    dummy_hash,
    hash_password,
    verify_password,
)
from parcelsearch_service.portal.tables import StorePart

__all__ = ["Accounts", "User", "SignIn", "normalise_email", "SIGNINS_KEPT", "MAX_AGENT"]

#: Sign-ins remembered per account.
SIGNINS_KEPT = 20
#: Longest browser description (``User-Agent``) remembered with a sign-in.
MAX_AGENT = 200

_EMAIL = re.compile(r"^[^@\s<>\"']+@[^@\s<>\"']+\.[^@\s<>\"']+$")


def normalise_email(email: str) -> str:
    """``email`` trimmed and lower-cased.

    Parameters
    ----------
    email
        An e-mail address as typed.

    Returns
    -------
    str
        The address as the portal stores it.

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
class SignIn:
    """A successful sign-in: when, from which client address, with which browser."""

    time: datetime
    address: str
    agent: str


class Accounts(StorePart):
    """The portal's users (table ``portal_users``) and their sign-ins (``portal_signins``)."""

    def add(self, email: str, password: str, admin: bool = False) -> User:
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
        if self.keys.query("SELECT 1 FROM portal_users WHERE email = ?", (address,)).fetchone():
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
        rows = self.keys.query(
            "SELECT id, email, is_admin FROM portal_users ORDER BY id"
        ).fetchall()
        return [User(r["id"], r["email"], bool(r["is_admin"])) for r in rows]

    def user(self, user_id: int) -> User | None:
        """The user with id ``user_id``, or ``None``."""
        row = self.keys.query(
            "SELECT id, email, is_admin FROM portal_users WHERE id = ?", (user_id,)
        ).fetchone()
        return None if row is None else User(row["id"], row["email"], bool(row["is_admin"]))

    def authenticate(self, email: str, password: str) -> User | None:
        """The user whose e-mail and password these are, or ``None``."""
        try:
            address = normalise_email(email)
        except ConfigurationError:
            address = ""
        row = self.keys.query(
            "SELECT id, email, password_hash, is_admin FROM portal_users WHERE email = ?",
            (address,),
        ).fetchone()
        if row is None:
            verify_password(password, dummy_hash())  # same time as a known address
            return None
        if not verify_password(password, row["password_hash"]):
            return None
        return User(row["id"], row["email"], bool(row["is_admin"]))

    def change_password(self, user: User, current_password: str, new_password: str) -> None:
        """Change ``user``'s password (their sessions are the caller's to end).

        Raises
        ------
        ConfigurationError
            ``current_password`` is not the account's password (nothing changes), the new one
            is the same, or it breaks the password rules (the message says which).
        """
        if self.authenticate(user.email, current_password) is None:
            raise ConfigurationError(
                "the current password is wrong; type the password you signed in with"
            )
        if new_password == current_password:
            raise ConfigurationError("the new password is the current one; choose a new one")
        check_new_password(new_password)
        stored = hash_password(new_password)
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn, "UPDATE portal_users SET password_hash = ? WHERE id = ?", (stored, user.id)
            )

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
        rows = self.keys.query(
            "SELECT time, address, agent FROM portal_signins WHERE user_id = ?"
            " ORDER BY time DESC, id DESC LIMIT ?",
            (user.id, limit),
        ).fetchall()
        return [
            SignIn(datetime.fromtimestamp(r["time"], UTC), r["address"], r["agent"]) for r in rows
        ]
