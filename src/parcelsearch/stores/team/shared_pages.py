"""Team mode's pages: any member's page is every member's, fetched once.

A member reads a page from this machine's copy, else from the team's store (kept by
``keep_page``, which never changes a page another role wrote; a page read that does not add
up is not used). Before fetching, a member claims a lease on the page (single flight): the
others wait and read it when it lands, or, after about one lease's time, fetch it themselves
(a member holding leases to stall the others is outwaited). A live member renews its leases
(every third of the lease); one killed loses them within a lease (seconds), and another
member takes the page over. :class:`~parcelsearch.stores.team.spending.TeamSpending` gives
these pages to a run, beside its ledger and pacer.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Protocol

from parcelsearch._fetch.pacing import Cancelled
from parcelsearch._fetch.page import Page, check_page
from parcelsearch.errors import MalformedResponseError, TeamStoreError
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.team.store import SCHEMA
from parcelsearch.stores.team.usage import Pace

__all__ = ["SharedPages", "Member"]

#: Seconds between looks at a page another member is fetching.
_POLL = 0.1

_log = logging.getLogger(__name__)

_PAGE_COLUMNS = (
    "request_key, base_url, path, polygon_json, page, rows, pages, data_rows, "
    "data, fetched_at, paid_by"
)


class Member(Protocol):
    """What the pages read of the member they serve (a
    :class:`~parcelsearch.stores.team.spending.TeamSpending`): who it is, its lease and the
    key's policy (set once the store is joined), and its statements on the store."""

    fingerprint: str
    user: str
    holder: str
    cache: ResponseCache | None
    policy: Pace
    lease_seconds: float

    def _sql(self, query: str, params: tuple[Any, ...] = (), *, doing: str) -> list[Any]: ...


class SharedPages:
    """The team store's pages as one member sees them (see the module's docstring).

    Parameters
    ----------
    member
        The member whose key, name, leases and statements these are.
    """

    def __init__(self, member: Member) -> None:
        self._member = member
        self._sql = member._sql
        self.fingerprint = member.fingerprint
        self.user = member.user
        self.holder = member.holder
        self.cache = member.cache

    def cached(self, key: str, max_age: float | None) -> Page | None:
        """The page from this machine's copy, else the team's store; a page another member
        is fetching now is waited for (at most its lease), so the price counts only the
        pages nobody is paying for. (A member holds no lease while it prices.)"""
        if self.cache is not None:
            hit = self.cache.get(key, max_age=max_age)
            if hit is not None:
                return hit
        until = time.monotonic() + self._longest_lease
        while True:
            hit = self._shared(key, max_age)
            if hit is not None or time.monotonic() > until or not self._leased_by_another(key):
                return hit
            time.sleep(_POLL)

    @property
    def _longest_lease(self) -> float:
        """A lease ending later than the key's stored lease (and a second) from now was not
        written by a member's renewer: it is treated as expired."""
        return self._member.policy.lease_seconds + 1.0

    def _leased_by_another(self, key: str) -> bool:
        return bool(
            self._sql(
                f"SELECT 1 FROM {SCHEMA}.leases WHERE request_key = %s AND holder <> %s "
                "AND expires > clock_timestamp() "
                "AND expires <= clock_timestamp() + make_interval(secs => %s)",
                (key, self.holder, self._longest_lease),
                doing="looking at a page",
            )
        )

    def _shared(self, key: str, max_age: float | None) -> Page | None:
        """The page in the team store (kept in the local copy; a use counted when another
        member paid for it)."""
        rows = self._sql(
            f"SELECT {_PAGE_COLUMNS} FROM {SCHEMA}.pages WHERE request_key = %s "
            "AND (%s::float8 IS NULL OR fetched_at >= clock_timestamp() "
            "- make_interval(secs => %s))",
            (key, max_age, max_age),
            doing="reading a page",
        )
        if not rows:
            return None
        page = _page(rows[0])
        try:
            check_page(page)
        except MalformedResponseError as exc:
            _log.warning(
                "the team store's page %s… does not add up (%s): fetching it again, not using it",
                key[:12],
                exc,
            )
            return None
        if rows[0][-1] != self.user:
            self._sql(
                f"INSERT INTO {SCHEMA}.page_uses (request_key, member, fingerprint, "
                f"month) VALUES (%s, %s, %s, {SCHEMA}.month_now())",
                (key, self.user, self.fingerprint),
                doing="counting a page shared",
            )
        if self.cache is not None:
            self.cache.put(page)
        return page

    def claim(self, key: str, max_age: float | None, cancel: threading.Event) -> Page | None:
        """The page from the store, else ``None`` for the caller to fetch: with the page's
        lease, or without it once another member has held it about one lease's time
        (:attr:`_longest_lease`: a member fetching renews a lease, one holding it to stall
        the others is outwaited, and the page fetched twice at most)."""
        until = time.monotonic() + self._longest_lease
        while True:
            hit = self._shared(key, max_age)
            if hit is not None:
                return hit
            if time.monotonic() > until:
                _log.warning(
                    "another member has held the lease on page %s… for %.0f s: fetching it here",
                    key[:12],
                    self._longest_lease,
                )
                return None
            if self._lease(key):
                hit = self._shared(key, max_age)  # landed between the look and the lease
                if hit is None:
                    return None
                self.abandon(key)
                return hit
            if cancel.wait(_POLL):
                raise Cancelled("stopped while waiting for a page another member fetches")

    def _lease(self, key: str) -> bool:
        rows = self._sql(
            f"SELECT {SCHEMA}.take_lease(%s, %s, %s)",
            (key, self.holder, self._member.lease_seconds),
            doing="claiming a page",
        )
        return bool(rows and rows[0][0])

    def keep(self, page: Page) -> None:
        if self.cache is not None:
            self.cache.put(page)
        self._sql(
            f"SELECT {SCHEMA}.keep_page(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (
                page.request_key,
                page.base_url,
                page.path,
                page.polygon_json,
                page.page,
                page.rows,
                page.pages,
                page.data_rows,
                list(page.data),
                page.fetched_at,
                self.user,
                self.fingerprint,
                self.holder,
            ),
            doing="keeping a page",
        )

    def abandon(self, key: str) -> None:
        self._sql(
            f"SELECT {SCHEMA}.drop_lease(%s, %s)", (key, self.holder), doing="giving up a page"
        )

    def renew(self, closing: threading.Event) -> None:
        """Renew this member's leases every third of a lease until ``closing`` is set."""
        while not closing.wait(self._member.lease_seconds / 3):
            try:
                self._sql(
                    f"SELECT {SCHEMA}.renew_leases(%s, %s)",
                    (self.holder, self._member.lease_seconds),
                    doing="renewing leases",
                )
            except TeamStoreError:
                return  # the store is lost: the statement of a page says so, once


def _page(row: tuple[Any, ...]) -> Page:
    (
        key,
        base_url,
        path,
        polygon_json,
        page,
        rows,
        pages,
        data_rows,
        data,
        fetched_at,
        _paid_by,
    ) = row
    return Page(
        request_key=key,
        polygon_json=polygon_json,
        page=int(page),
        rows=int(rows),
        pages=int(pages),
        data_rows=int(data_rows),
        data=tuple(data),
        base_url=base_url,
        path=path,
        from_cache=True,
        fetched_at=fetched_at,
    )
