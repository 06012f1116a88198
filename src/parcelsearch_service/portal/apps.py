"""Portal apps: a key owned by a user under an app name (unique per user), shown with its
settings and the gateway's counts; created, regenerated, revoked and (by admins) limited."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from parcelsearch._shared import next_month_start
from parcelsearch.errors import ConfigurationError
from parcelsearch_service.keys.rules import check_limits
from parcelsearch_service.keys.store import KeyStore, hash_key
from parcelsearch_service.portal.accounts import User
from parcelsearch_service.portal.tables import StorePart
from parcelsearch_service.portal.usage import DayUsage, Usage

__all__ = ["Apps", "App", "MAX_APP_NAME"]

#: Longest app (key) name the portal accepts.
MAX_APP_NAME = 100


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
    #: What admins other than the owner did to it: (when, admin's e-mail, what), newest first.
    admin_actions: tuple[tuple[datetime, str, str], ...] = ()

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


class Apps(StorePart):
    """The portal's apps (table ``portal_apps``) over the keys of the key store.

    Parameters
    ----------
    keys, clock
        As :class:`~parcelsearch_service.portal.tables.StorePart` takes them.
    usage
        Where each app's usage per day is read.
    """

    def __init__(self, keys: KeyStore, usage: Usage, clock: Callable[[], float]) -> None:
        super().__init__(keys, clock)
        self.usage = usage

    def create(
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
        if (
            self.keys.query(
                "SELECT 1 FROM portal_apps a JOIN keys k ON k.id = a.key_id"
                " WHERE a.user_id = ? AND coalesce(a.name, k.name) = ?",
                (user.id, name),
            ).fetchone()
            is not None
        ):
            raise ConfigurationError(taken)
        try:  # the key's own name: unique in the store, whatever other users call their apps
            api_key = self.keys.create(f"{user.email}/{name}", key_type=key_type, services=wanted)
        except ConfigurationError as exc:
            if "already exists" in str(exc):
                raise ConfigurationError(taken) from None
            raise
        row = self.keys.query(
            "SELECT id FROM keys WHERE key_hash = ?", (hash_key(api_key),)
        ).fetchone()
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "INSERT INTO portal_apps (key_id, user_id, name) VALUES (?, ?, ?)",
                (row["id"], user.id, name),
            )
        return int(row["id"]), api_key

    def _rows(self, user: User, key_id: int | None = None) -> list[Any]:
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
        return list(self.keys.query(sql + " ORDER BY k.id", params).fetchall())

    def owned(self, user: User, key_id: int) -> str | None:
        """The name of key ``key_id`` if ``user`` may see it (owner or admin), else ``None``
        (also for an id no 64-bit column holds)."""
        rows = self._rows(user, key_id)
        return rows[0]["name"] if rows else None

    def visible(self, user: User) -> list[App]:
        """The apps ``user`` may see (all of them for an admin), with usage."""
        return [self._app(r["id"], r["key_name"], r["name"], r["owner"]) for r in self._rows(user)]

    def _app(self, key_id: int, key_name: str, name: str, owner: str | None) -> App:
        now = datetime.fromtimestamp(self.clock(), UTC)
        summary = self.keys.get(key_name)
        log = self.keys.requests(key_name)
        last_used = None if log.empty else log["time"].max().to_pydatetime(warn=False)
        return App(
            id=key_id,
            name=name,
            owner=owner,
            key_type=summary["type"],
            services=tuple(summary["services"]),
            per_second=summary["per_second"],
            quota=summary["quota"],
            quota_period=summary["quota_period"],
            used_month=summary["used_month"],
            used_lifetime=summary["used_lifetime"],
            revoked=summary["revoked"],
            spike_refusals=self.usage.refused(key_id),
            last_used=last_used,
            daily=self.usage.daily(key_id, log, now.date()),
            now=now,
            admin_actions=self.admin_actions(key_id),
        )

    def owner_of(self, key_id: int) -> str | None:
        """The e-mail of key ``key_id``'s owner (``None``: a key made on the command line)."""
        row = self.keys.query(
            "SELECT u.email FROM portal_apps a JOIN portal_users u ON u.id = a.user_id"
            " WHERE a.key_id = ?",
            (key_id,),
        ).fetchone()
        return None if row is None else str(row["email"])

    def record_admin_action(self, key_id: int, admin: User, action: str) -> None:
        """Remember that ``admin`` did ``action`` to key ``key_id`` (shown to its owner)."""
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "INSERT INTO portal_admin_actions (key_id, time, admin, action)"
                " VALUES (?, ?, ?, ?)",
                (key_id, self.clock(), admin.email, action[:200]),
            )

    def admin_actions(self, key_id: int) -> tuple[tuple[datetime, str, str], ...]:
        """What admins did to key ``key_id``: (when, admin, what), newest first."""
        rows = self.keys.query(
            "SELECT time, admin, action FROM portal_admin_actions WHERE key_id = ?"
            " ORDER BY time DESC, id DESC",
            (key_id,),
        ).fetchall()
        return tuple(
            (datetime.fromtimestamp(float(r["time"]), UTC), r["admin"], r["action"]) for r in rows
        )

    def one(self, user: User, key_id: int) -> App | None:
        """One app ``user`` may see, or ``None``."""
        rows = self._rows(user, key_id)
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
        row = self.keys.query("SELECT name FROM keys WHERE id = ?", (key_id,)).fetchone()
        if row is not None:
            self.keys.revoke(row["name"])

    def set_limits(self, key_id: int, per_second: float, quota: int | None) -> None:
        """Set a key's per-second rate and quota; the gateway applies them on its next
        request (it reads them inside each admission transaction).

        Raises
        ------
        ConfigurationError
            A rate or quota outside its range (:func:`~parcelsearch_service.keys.check_limits`
            names the field and the range).
        """
        check_limits(per_second, quota)
        with self.keys.transaction() as conn:
            self.keys.execute(
                conn,
                "UPDATE keys SET per_second = ?, quota = ? WHERE id = ?",
                (float(per_second), quota, key_id),
            )
