"""Team mode's :class:`~parcelsearch.stores.spending.Spending`: one ledger, pacer and page store
for a key, in the team's PostgreSQL store, shared by every member on every machine.

- **Policy**: the key's row holds its quota, its pace (calls per second and the pacer's
  margin) and a page lease's length, set by ``parcelsearch team quota|pace``. A member's own
  settings can only be stricter: its own quota is checked *besides* the stored one, its own
  rate paces only its own calls, and its own lease can only be shorter.
- **Ledger**: every call is reserved, just before it is sent (after its turn at the pacer),
  by one call of ``parcelsearch_team.reserve`` (the stored quota, the member's own quota and
  budget checked and the row inserted under row locks), settled once sent, refunded
  (deleted) when the service did not count it, both by the token ``reserve`` returned (kept
  in this process only; the store has its sha256). A reservation whose fate is unknown
  stays: it counts as spent (a member killed leaves at most its calls on the wire so).
- **Pacer**: one row per key holds the next free send slot; a member claims a slot with one
  call of ``parcelsearch_team.pace_turn`` (spaced by the key's stored pace, whatever the
  member's settings; never further than the policy's bound, said in a warning when a
  stored value was beyond it) and sleeps outside any transaction until it comes. A 429 with
  ``Retry-After`` stores a pause in the same row (``pause_key``: at most 120 s, with who
  paused), so every member waits.
- **Pages**: any member's page is every member's, fetched once under a lease (single
  flight), kept by :class:`~parcelsearch.stores.team.shared_pages.SharedPages`. The local
  parquet cache stays this machine's copy.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

from parcelsearch import settings
from parcelsearch._fetch.pacing import Cancelled, RateLimiter
from parcelsearch._fetch.page import Page
from parcelsearch.errors import Hint, QuotaWouldExceedError, TeamStoreError
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.quotas import Quota, no_calls_left
from parcelsearch.stores.spending import RESERVE_LEAD, Limit
from parcelsearch.stores.team.shared_pages import SharedPages
from parcelsearch.stores.team.store import (
    DEFAULT_LEASE,
    LEASE_RANGE,
    SCHEMA,
    check_schema,
    connect,
    shown,
)
from parcelsearch.stores.team.usage import Pace, check_in_range

__all__ = ["TeamSpending", "LEASE_SECONDS", "ENV_LEASE", "RESERVE_LEAD", "member_lease"]

#: Seconds a page's lease lasts unless the key's stored policy says otherwise: a member
#: killed while fetching holds it no longer (a live one renews it).
LEASE_SECONDS = DEFAULT_LEASE
#: Environment variable shortening the lease for this member (never lengthening it).
ENV_LEASE = "PARCELSEARCH_TEAM_LEASE"
#: Seconds a statement waits for a pooled connection (a lost store is said this soon).
_POOL_WAIT = 3.0
#: Most threads of one member that get a connection each (more wait their turn for one).
_MOST_THREADS = 16
#: Reservations whose tokens are kept (a refund follows its settle within one attempt;
#: an older one's refund is dropped and the call stays spent).
_TOKENS_KEPT = 4096

_log = logging.getLogger(__name__)


def member_lease() -> float | None:
    """This member's own lease length (``$PARCELSEARCH_TEAM_LEASE``), ``None`` when unset.

    Raises
    ------
    ConfigurationError
        Not a number from 0.5 to 3600 (seconds).
    """
    text = os.environ.get(ENV_LEASE, "").strip()
    return check_in_range(text, LEASE_RANGE, ENV_LEASE) if text else None


class TeamSpending:
    """A key's calls, pace and pages in a team store (see the module's docstring).

    Parameters
    ----------
    url
        The store (``postgresql://…``), made with ``parcelsearch team init``.
    fingerprint
        The key's fingerprint (never the key).
    user
        The member running the search.
    cache
        This machine's copy (``None``: none).
    pool
        An open ``psycopg_pool.ConnectionPool`` on ``url``.
    """

    def __init__(
        self, url: str, fingerprint: str, user: str, cache: ResponseCache | None, pool: Any
    ) -> None:
        self.url = url
        self.fingerprint = fingerprint
        self.user = user
        self.cache = cache
        self.pool = pool
        self.holder = f"{user}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: The key's pace as stored (its lease: the stored one, or the member's if shorter).
        self.policy = Pace()
        self.lease_seconds = self.policy.lease_seconds
        self._quota: Quota | None = None
        self._closing = threading.Event()
        self._renewer: threading.Thread | None = None
        self._paced = itertools.count()  # calls paced by this member (0: its first)
        self._lock = threading.Lock()
        #: Each reservation's token (settle and refund take it; the store has its sha256).
        self._tokens: OrderedDict[int, str] = OrderedDict()
        #: The team's pages as this member sees them (any member's page is every member's).
        self.pages = SharedPages(self)

    @classmethod
    def open(
        cls,
        url: str,
        fingerprint: str,
        *,
        user: str,
        cache: ResponseCache | None,
        threads: int = settings.DEFAULT_WORKERS,
    ) -> TeamSpending:
        """Join the team store at ``url`` for the key ``fingerprint`` names.

        ``threads`` is how many threads spend through it at once (a run's workers): the pool
        holds a connection for each (at most 16) and two more (the run's own and the lease
        renewer's), all made before anything is paced, so that a call reserved in the
        moment before its turn never waits for the pool to grow. (Measured with a pool
        grown on demand, a reservation waited 45 ms, its call went late and the next on
        time: 11 calls in 0.99 s of a key allowing 10 a second, a spike arrest in 6 of 13
        runs of a 16-worker search; none in 10 with the pool made first.)

        Raises
        ------
        TeamStoreError
            The store cannot be reached (exit 1; the message names the URL without its
            password) or has no schema (``parcelsearch team init URL`` makes it).
        """
        from psycopg_pool import ConnectionPool, PoolTimeout

        own_lease = member_lease()  # a bad value is a usage error, before anything else
        with connect(url) as conn:
            check_schema(url, conn)
            conn.execute(
                f"INSERT INTO {SCHEMA}.keys (fingerprint) VALUES (%s) ON CONFLICT DO NOTHING",
                (fingerprint,),
            )
            conn.execute(
                f"INSERT INTO {SCHEMA}.pacers (fingerprint) VALUES (%s) ON CONFLICT DO NOTHING",
                (fingerprint,),
            )
            row = conn.execute(
                f"SELECT quota, period, rate, margin, lease_seconds "
                f"FROM {SCHEMA}.keys WHERE fingerprint = %s",
                (fingerprint,),
            ).fetchone()
        # The pool's reconnection attempts are its own business: a lost store is said once,
        # by the statement that finds it lost (TeamStoreError), not in a warning a retry.
        logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
        size = min(max(1, threads), _MOST_THREADS) + 2
        pool = ConnectionPool(
            url,
            min_size=size,
            max_size=size,
            open=False,
            timeout=_POOL_WAIT,
            reconnect_timeout=_POOL_WAIT,
            kwargs={"autocommit": True, "connect_timeout": 3},
        )
        try:
            pool.open(wait=True, timeout=10)
        except PoolTimeout as exc:
            raise TeamStoreError(f"team store {shown(url)}: cannot connect: {exc}") from None
        made = cls(url, fingerprint, user, cache, pool)
        quota, period, rate, margin, lease = row
        if quota is not None:
            made._quota = Quota(int(quota), period)
        made.policy = Pace(float(rate), float(margin), float(lease))
        made.lease_seconds = min(float(lease), own_lease or float(lease))
        made._renewer = threading.Thread(
            target=made._renew, name="parcelsearch-leases", daemon=True
        )
        made._renewer.start()
        return made

    def __repr__(self) -> str:
        return f"TeamSpending({shown(self.url)!r}, user={self.user!r})"

    # -- the store --------------------------------------------------------------------

    def _sql(self, query: str, params: tuple[Any, ...] = (), *, doing: str) -> list[Any]:
        """One statement on a pooled connection; a lost store raises TeamStoreError."""
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection() as conn:
                cursor = conn.execute(query, params)
                return list(cursor.fetchall()) if cursor.description else []
        except (psycopg.Error, PoolTimeout) as exc:
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise TeamStoreError(
                f"team store {shown(self.url)} lost while {doing}: {reason}. Nothing was sent "
                "unreserved; everything fetched is cached, and running the same search again "
                "resumes from it."
            ) from None

    def close(self) -> None:
        self._closing.set()
        if self._renewer is not None:
            self._renewer.join(timeout=_POOL_WAIT + 1)
        self.pool.close()

    def _renew(self) -> None:
        """Renew this member's leases every third of a lease while it lives."""
        self.pages.renew(self._closing)

    # -- the ledger -------------------------------------------------------------------

    def stored_quota(self) -> Quota | None:
        return self._quota

    def reserve(self, run_id: str, quota: Quota | None) -> int:
        """Reserve one call (just before it is sent): refused when the stored quota, the
        member's own ``quota`` or the member's budget has no call left."""
        rows = self._sql(
            f"SELECT id, token, verdict, used, lim, sent FROM {SCHEMA}.reserve(%s, %s, %s, %s, %s)",
            (
                self.fingerprint,
                self.user,
                run_id,
                quota.limit if quota else None,
                quota.period if quota else None,
            ),
            doing="reserving a call",
        )
        ident, token, verdict, used, limit, sent = rows[0]
        if verdict == "ok":
            with self._lock:
                self._tokens[int(ident)] = str(token)
                while len(self._tokens) > _TOKENS_KEPT:
                    self._tokens.popitem(last=False)
            return int(ident)
        counts = (used, limit, sent)
        raise _refused(verdict, self.url, self.user, self.fingerprint, (self._quota, quota), counts)

    def settle(self, reservation: int) -> None:
        """Settle by the reservation's token (kept: a refund may follow, a 429 say)."""
        with self._lock:
            token = self._tokens.get(reservation)
        if token is not None:
            self._sql(f"SELECT {SCHEMA}.settle(%s)", (token,), doing="settling a call")

    def refund(self, reservation: int) -> None:
        """Refund by the reservation's token: only the member holding it can (an unknown
        reservation stays spent)."""
        with self._lock:
            token = self._tokens.pop(reservation, None)
        if token is not None:
            self._sql(f"SELECT {SCHEMA}.refund(%s)", (token,), doing="refunding a call")

    def limits(self, quota: Quota | None) -> list[Limit]:
        """What the stored quota (``"team quota"``), the member's own ``quota`` (``"quota"``)
        and the member's budget (``"user budget"``) still allow."""
        own = quota if quota is not None and quota != self._quota else None
        rows = self._sql(
            f"SELECT {SCHEMA}.spent(%s, 'month'), {SCHEMA}.spent(%s, 'lifetime'), b.calls, "
            f"{SCHEMA}.member_spent(%s, b.period) "
            f"FROM (SELECT 1) AS one LEFT JOIN {SCHEMA}.budgets AS b ON b.member = %s",
            (self.fingerprint, self.fingerprint, self.user, self.user),
            doing="reading what is left",
        )
        month, lifetime, budget, member_spent = rows[0]
        spent = {"month": int(month), "lifetime": int(lifetime)}
        limits: list[Limit] = []
        if self._quota is not None:
            limits.append(
                (
                    max(0, self._quota.limit - spent[self._quota.period]),
                    "team quota" if own is not None else "quota",
                )
            )
        if own is not None:
            limits.append((max(0, own.limit - spent[own.period]), "quota"))
        if budget is not None:
            limits.append((max(0, int(budget) - int(member_spent)), "user budget"))
        return limits

    # -- the pacer --------------------------------------------------------------------

    def pace(self, limiter: RateLimiter, cancel: threading.Event | None) -> float | None:
        """This member's own pace first (``limiter``: it can only slow this member), then
        the key's turn, spaced by the pace stored with the key. Returns :data:`RESERVE_LEAD`
        seconds before the turn, with the turn (``time.monotonic()``): the caller reserves
        the call in that time, then sends at the turn, so that the reservation's round trip
        does not make the spacing the service sees uneven.

        Two things keep a late arrival from packing more calls into a second than the key
        allows: no turn is sooner than the lead from now (a call due at once would be sent
        late by its reservation, the next one on time), and this member's first call is
        followed by :data:`~parcelsearch._fetch.pacing.FIRST_CALL_ALLOWANCE` more (a first
        call arrives late)."""
        limiter.wait(cancel)
        first = next(self._paced) == 0
        rows = self._sql(
            f"SELECT wait, bounded FROM {SCHEMA}.pace_turn(%s, %s)",
            (self.fingerprint, first),
            doing="pacing a call",
        )
        wait, bounded = rows[0]
        if bounded is not None:
            _log.warning(
                "the team's pacer for key sha256:%s held more than its policy "
                "allows: %s (the store's owner clears it with: parcelsearch team "
                "pace --clear-pause)",
                self.fingerprint,
                bounded,
            )
        turn = time.monotonic() + max(0.0, float(wait))
        delay = max(0.0, turn - RESERVE_LEAD - time.monotonic())
        if cancel is not None:
            if cancel.wait(delay):
                raise Cancelled("stopped while waiting for the team's pacer")
        elif delay:
            time.sleep(delay)
        return turn

    def pause(self, seconds: float) -> None:
        """Pause every member (at most :data:`~parcelsearch.stores.team.store.MOST_PAUSE`
        seconds; the store keeps who paused)."""
        self._sql(
            f"SELECT {SCHEMA}.pause_key(%s, %s, %s)",
            (self.fingerprint, self.user, float(seconds)),
            doing="pausing the key",
        )

    # -- the pages (any member's page is every member's: SharedPages) ------------------

    def cached(self, key: str, max_age: float | None) -> Page | None:
        """The page from this machine's copy or the team's (:meth:`SharedPages.cached`)."""
        return self.pages.cached(key, max_age)

    def claim(self, key: str, max_age: float | None, cancel: threading.Event) -> Page | None:
        """The page from the store, else ``None`` to fetch it (:meth:`SharedPages.claim`)."""
        return self.pages.claim(key, max_age, cancel)

    def keep(self, page: Page) -> None:
        """Keep a page fetched, here and in the team's store (:meth:`SharedPages.keep`)."""
        self.pages.keep(page)

    def abandon(self, key: str) -> None:
        """Give up the lease on a page not fetched (:meth:`SharedPages.abandon`)."""
        self.pages.abandon(key)


def _refused(
    verdict: str,
    url: str,
    user: str,
    fingerprint: str,
    quotas: tuple[Quota | None, Quota | None],
    counts: tuple[Any, Any, Any],
) -> TeamStoreError | QuotaWouldExceedError:
    """Why the store refused ``user`` a reservation (``verdict``): a name another role holds,
    no call left of the key's stored quota or the member's own (``quotas``: stored, own), or
    of the member's budget (``counts``: calls used, the limit, calls sent; none with a
    name refused)."""
    if verdict == "name":
        return TeamStoreError(
            f"team store {shown(url)}: the member name {user!r} belongs to "
            "another PostgreSQL role of the team (a name is its first role's): search "
            "with your own name (--user / PARCELSEARCH_USER) and your own role",
            hints=[Hint("user", "your-name", "for example {knob}")],
        )
    used, limit, sent = (int(count) for count in counts)
    if verdict in ("quota", "own quota"):
        stored, own = quotas
        chosen = stored if verdict == "quota" and stored is not None else own
        effective = chosen or Quota(limit, "month")
        return no_calls_left(fingerprint, effective, used, "the team store", sent=sent)
    return _budget_spent(user, used, limit, sent)


def _budget_spent(user: str, used: int, limit: int, sent: int) -> QuotaWouldExceedError:
    return QuotaWouldExceedError(
        f"{user} has no calls left of their team budget of {limit}: {sent} sent"
        + (f" and {used - sent} on the wire or of unknown fate" if used > sent else "")
        + ". Everything fetched so far is cached and shared with the team.",
        needed=1,
        allowed=0,
        hints=[Hint("team_budget", user, "a team member may raise it with {knob}")],
    )
