"""Admission on a PostgreSQL key store: one call of ``parcelsearch.admit`` a request.

The checks (:mod:`parcelsearch_service.limits`) run in the PL/pgSQL function
``parcelsearch.admit``: one round trip, which locks the key's row with ``FOR UPDATE``
first, then counts the log in a separate statement, so limits stay exact across workers and
hosts. On a thread (:meth:`PostgresAdmission.decide`) each call is one such call on the
thread's connection.

With keys and parcels in PostgreSQL a request waits on the network for its admission and,
unless its hit list is cached, for its search, and on little else. Waiting is what an event
loop does well: :meth:`PostgresAdmission.answer` sends both from the loop on pooled asynchronous
connections (``psycopg_pool.AsyncConnectionPool``, one per database and worker process,
opened on first use), so no request is handed to a thread and back. When keys and parcels
share one database, a request whose hit list is not cached is admitted and searched in one
statement — one round trip — and the search runs only for an admitted request::

    SELECT a.verdict, …, CASE WHEN a.verdict = 'admitted' THEN ARRAY(<search>) END
    FROM parcelsearch.admit(…) AS a

The admission is the same function call as on a thread. A lock held past the
key store's busy timeout, a database that is unreachable, or no pooled connection free
within that timeout: the request is answered 503 and nothing is counted (a search that
fails after its admission gives the call back).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from parcelsearch._shared import month_of
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys import PostgresKeyStore, hash_key
from parcelsearch_service.limits import (
    INVALID_FOR_RESOURCE,
    INVALID_KEY,
    SETTLE_LAGS,
    Admitted,
    Call,
    Handled,
    Outcome,
    Refusal,
    Result,
    admission_failed,
    failed_outcome,
    loggable,
    quota_message,
    settling,
    spike_refusal,
)
from parcelsearch_service.polygon import ParsedPolygon
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.postgis import SESSION, PostgisParcelStore
from parcelsearch_service.store import ParcelStore

__all__ = [
    "PostgresAdmission",
    "CONNECTIONS",
    "APPLICATION_NAME",
    "postgres_statement",
    "postgres_parameters",
    "postgres_verdict",
]

log = logging.getLogger("parcelsearch.service")

#: Pooled connections per database and worker process: the requests whose queries are out
#: at once (others wait for a connection, up to the busy timeout). As many as the request
#: threads of the thread pool path; every one is a PostgreSQL backend, busy or not.
CONNECTIONS = 4

#: The pooled connections' ``application_name`` (as PostgreSQL's ``pg_stat_activity`` shows).
APPLICATION_NAME = "parcelsearch"


class PostgresAdmission:
    """Admits calls on a PostgreSQL key store: on a thread's connection, or from the event
    loop on pooled asynchronous connections (with the parcels in PostgreSQL too).

    Parameters
    ----------
    keys
        The key store (PostgreSQL).
    parcels
        The parcel store; calls are admitted from the loop only when it is PostGIS (when it
        is in the key store's database, admission and search share one statement);
        otherwise every call goes to a thread.
    portal
        Counts spike-arrest refusals for the portal's usage pages (from the loop).
    connections
        Connections per database pool.
    """

    #: Handed to a thread, every call waits on the network (the key store's).
    waits = True

    def __init__(
        self,
        keys: PostgresKeyStore,
        parcels: ParcelStore | PostgisParcelStore | None = None,
        portal: PortalStore | None = None,
        connections: int = CONNECTIONS,
    ) -> None:
        self.keys = keys
        self.parcels = parcels if isinstance(parcels, PostgisParcelStore) else None
        self.portal = portal
        self._size = connections
        self._together = self.parcels is not None and keys.url == self.parcels.url
        self._pools: dict[str, asyncio.Future[AsyncConnectionPool]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        parcels = "parcels elsewhere" if self.parcels is None else f"{len(self.parcels):,} parcels"
        return (
            f"PostgresAdmission(keys={self.keys.location!r}, {parcels}, together={self._together})"
        )

    # ------------------------------------------------------------------ on a thread

    def decide(
        self, calls: Sequence[Call[Any]], now: Callable[[], float] = time.time
    ) -> list[Refusal | Admitted | Exception]:
        """Each call's admission: one function call each, on this thread's connection."""
        return [self._alone(call, now()) for call in calls]

    def _alone(self, call: Call[Any], t: float) -> Refusal | Admitted | Exception:
        params = postgres_parameters(call, t)
        try:
            row = self.keys.execute(self.keys.connection(), postgres_statement(), params).fetchone()
        except Exception as exc:  # busy, or the store failed: this call's answer
            return admission_failed(call, exc)
        return postgres_verdict(row, params)

    # ------------------------------------------------------------------ on the loop

    async def answer(
        self, call: Call[bytes], now: Callable[[], float] = time.time
    ) -> Result[bytes] | None:
        """Admit ``call`` and, if admitted, handle it: the hit list of its ``search``, if
        any, is fetched first and cached, so that its handler pages through it without a
        query. ``None`` when the parcels are not in PostgreSQL (a thread admits it)."""
        if self.parcels is None or self.portal is None:
            return None
        params = postgres_parameters(call, now())
        search = call.search
        hits = None if search is None else self.parcels.cached(search)
        try:
            row, together = await self._admit(params, search if hits is None else None)
        except Exception as exc:  # busy, or the store failed: nothing was counted
            return admission_failed(call, exc)
        decision = postgres_verdict(row, params)
        if isinstance(decision, Refusal):
            if decision.retry_after is not None:
                await self._tally_spike(self.portal, call.api_key)
            return decision
        guess = call.presumed or Outcome(0, None)
        outcome = await self._handle(call, search, row.get("hits") if together else hits)
        await self._settle([(decision, guess, outcome)])
        return outcome

    async def _admit(
        self, params: dict[str, Any], search: ParsedPolygon | None
    ) -> tuple[dict[str, Any], bool]:
        """The admission's row, and whether it carries the hit list of ``search`` (searched
        in the same statement when keys and parcels share a database)."""
        if search is None or not self._together:
            return await self._fetch_admission(params), False
        assert self.parcels is not None
        query, search_params = self.parcels.search_statement(search.polygon)
        try:
            return await self._fetch_admission(params | search_params, query), True
        except psycopg.Error:
            # The search failed, and took the admission with it: admit alone, so that the
            # call counts and its search fails on its own (a 500, as on threads).
            return await self._fetch_admission(params), False

    async def _fetch_admission(
        self, params: dict[str, Any], search: str | None = None
    ) -> dict[str, Any]:
        async with self._connection(self.keys.url) as conn:
            cursor = await conn.execute(postgres_statement(search), params)
            row: dict[str, Any] | None = await cursor.fetchone()
        assert row is not None  # the function always returns one row
        return row

    async def _handle(
        self, call: Call[bytes], search: ParsedPolygon | None, hits: Any
    ) -> Outcome[bytes]:
        """``call``'s outcome, its hit list fetched (or ``hits``, fetched already) and cached
        first; the handler then pages through the cache without a query."""
        if search is not None and hits is None:
            try:
                hits = await self._search(search)
            except Exception as exc:  # the call counted: answered 503 (given back) or 500
                return failed_outcome(call.path, exc)
        if search is not None:
            assert self.parcels is not None
            self.parcels.remember(search, hits)
        return call.handle()

    async def _search(self, search: ParsedPolygon) -> list[str]:
        assert self.parcels is not None
        query, params = self.parcels.search_statement(search.polygon)
        async with self._connection(self.parcels.url) as conn:
            cursor = await conn.execute(query, params)
            return [row["group_id"] for row in await cursor.fetchall()]

    async def _settle(self, handled: Handled) -> None:
        statements = settling(handled)
        if not statements:
            return
        try:
            async with self._connection(self.keys.url) as conn, conn.transaction():
                for statement, params in statements:
                    await conn.execute(self.keys.sql(statement), params)
        except StoreBusyError:  # the calls are counted and answered; only their rows lag
            log.warning(SETTLE_LAGS, len(statements))

    async def _tally_spike(self, portal: PortalStore, api_key: str) -> None:
        statement, params = portal.spike_refusal(api_key)
        try:
            async with self._connection(self.keys.url) as conn:
                await conn.execute(self.keys.sql(statement), params)
        except StoreBusyError:  # the refusal is answered; only the portal's tally misses it
            log.warning("spike-arrest refusal not tallied: the key store stayed busy")

    @asynccontextmanager
    async def _connection(self, url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection to ``url``; lock timeouts, lost servers and a pool with no
        connection free within the busy timeout raise :class:`StoreBusyError`."""
        try:
            pool = await self._pool(url)
            async with pool.connection() as conn:
                yield conn
        except psycopg.OperationalError as exc:  # lock_timeout, connection lost, PoolTimeout
            raise StoreBusyError(
                f"{self.keys.location if url == self.keys.url else 'the parcels database'}"
                f" stayed busy or unreachable for {self.keys.busy_timeout:g}s"
            ) from exc

    async def _pool(self, url: str) -> AsyncConnectionPool:
        """The pool of ``url`` in this process, opened by the first request that asks (the
        others wait for the same opening)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # pools serve the loop they were opened on
            self._pools, self._loop = {}, loop
        opening = self._pools.get(url)
        if opening is None or (opening.done() and opening.exception() is not None):
            opening = self._pools[url] = loop.create_task(self._open(url))
        return await asyncio.shield(opening)

    async def _open(self, url: str) -> AsyncConnectionPool:
        statements = (*SESSION, *self.keys.session())

        async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
            for statement in statements:
                await conn.execute(statement)

        pool = AsyncConnectionPool(
            url,
            min_size=self._size,
            max_size=self._size,
            open=False,
            configure=configure,
            timeout=self.keys.busy_timeout,
            name="parcelsearch",
            kwargs={**self.keys.connect_options(), "application_name": APPLICATION_NAME},
        )
        await pool.open()
        return pool

    async def close(self) -> None:
        """Close this process's pools (they reopen on the next request)."""
        pools, self._pools = self._pools, {}
        for opening in pools.values():
            try:
                pool = await opening
            except Exception:  # noqa: BLE001 - it never opened: nothing to close
                continue
            await pool.close()


def postgres_statement(search: str | None = None) -> str:
    """The admission as one call of ``parcelsearch.admit`` (named parameters: see
    :func:`postgres_parameters`; columns: see :func:`postgres_verdict`) and, given a
    ``search`` query (one ``group_id`` column, in order; its own named parameters), the hit
    list as column ``hits`` for an admitted request — ``NULL`` otherwise: a refused request
    never searches."""
    hits = (
        ""
        if search is None
        else (f", CASE WHEN a.verdict = 'admitted' THEN ARRAY({search}) END AS hits")
    )
    return (
        f"SELECT a.verdict, a.key_id, a.name, a.per_second, a.oldest, a.request_id{hits}"
        " FROM parcelsearch.admit(%(key_hash)s, %(service)s, %(path)s, %(time)s, %(month)s,"
        " %(status)s, %(polygon_sha256)s, %(page)s) AS a"
    )


def postgres_parameters(call: Call[Any], t: float) -> dict[str, Any]:
    """The parameters of :func:`postgres_statement` for ``call`` at time ``t``."""
    guess = call.presumed or Outcome(0, None)
    return {
        "key_hash": hash_key(call.api_key),
        "service": call.service,
        "path": call.path,
        "time": t,
        "month": month_of(t),
        "status": guess.status,
        "polygon_sha256": guess.polygon_sha256,
        "page": loggable(guess.page),
    }


def postgres_verdict(row: Mapping[str, Any], params: Mapping[str, Any]) -> Refusal | Admitted:
    """The refusal or admission that a row of :func:`postgres_statement` run with ``params``
    (:func:`postgres_parameters`) says."""
    t = params["time"]
    verdict = row["verdict"]
    if verdict == "invalid":
        return Refusal(401, INVALID_KEY)
    if verdict == "resource":
        return Refusal(401, INVALID_FOR_RESOURCE)
    if verdict == "spike":
        return spike_refusal(row["oldest"], row["per_second"], t)
    if verdict == "quota":
        return Refusal(429, quota_message(row["name"]))
    return int(row["key_id"]), params["month"], int(row["request_id"])
