"""Admission and search sent from the event loop, when both stores are in PostgreSQL.

With keys and parcels in PostgreSQL a request waits on the network for its admission and,
unless its hit list is cached, for its search, and on little else. Waiting is what an event
loop does well: :class:`PostgresGate` sends both from the loop on pooled asynchronous
connections (``psycopg_pool.AsyncConnectionPool``, one per database and worker process,
opened on first use), so no request is handed to a thread and back. When keys and parcels
share one database, a request whose hit list is not cached is admitted and searched in one
statement — one round trip — and the search runs only for an admitted request::

    SELECT a.verdict, …, CASE WHEN a.verdict = 'admitted' THEN ARRAY(<search>) END
    FROM parcelsearch.admit(…) AS a

The admission is the same function call as on a pool thread
(:mod:`parcelsearch_service.limits`): the key's row locked, then the log counted in a
separate statement, so limits stay exact across workers and hosts. A lock held past the
key store's busy timeout, a database that is unreachable, or no pooled connection free
within that timeout: the request is answered 503 and nothing is counted (a search that
fails after its admission gives the call back).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from parcelsearch_service import limits
from parcelsearch_service.envelopes import printable
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys.postgres import PostgresKeyStore
from parcelsearch_service.polygon import ParsedPolygon
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.postgis import SESSION, PostgisParcelStore

__all__ = ["PostgresGate", "CONNECTIONS", "APPLICATION_NAME"]

log = logging.getLogger("parcelsearch.service")

#: Pooled connections per database and worker process: the requests whose queries are out
#: at once (others wait for a connection, up to the busy timeout). As many as the request
#: threads of the thread pool path; every one is a PostgreSQL backend, busy or not.
CONNECTIONS = 4

#: The pooled connections' ``application_name`` (as PostgreSQL's ``pg_stat_activity`` shows).
APPLICATION_NAME = "parcelsearch"

#: What handling an admitted request produced, or the exception that stopped it.
Result = limits.Refusal | limits.Outcome[bytes] | Exception


class PostgresGate:
    """Admits and searches from the event loop on pooled asynchronous connections.

    Parameters
    ----------
    keys
        The key store (PostgreSQL).
    store
        The parcel store (PostGIS); when it is in the key store's database, admission and
        search share one statement.
    portal
        Counts spike-arrest refusals for the portal's usage pages.
    failed
        The outcome of an admitted request whose search raised (a 503 for a
        :class:`StoreBusyError`, else a 500); the call is settled accordingly.
    connections
        Connections per database pool.
    """

    def __init__(
        self,
        keys: PostgresKeyStore,
        store: PostgisParcelStore,
        portal: PortalStore,
        failed: Callable[[str, Exception], limits.Outcome[bytes]],
        connections: int = CONNECTIONS,
    ) -> None:
        self.keys = keys
        self.store = store
        self.portal = portal
        self._failed = failed
        self._size = connections
        self._together = keys.url == store.url
        self._pools: dict[str, asyncio.Future[AsyncConnectionPool]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return (f"PostgresGate(keys={self.keys.location!r}, {len(self.store):,} parcels, "
                f"together={self._together})")

    async def answer(self, call: limits.Call[bytes], now: Callable[[], float] = time.time
                     ) -> Result:
        """Admit ``call`` and, if admitted, handle it: the hit list of its ``search``, if
        any, is fetched first and cached, so that its handler pages through it without a
        query."""
        params = limits.postgres_parameters(call, now())
        search = call.search
        hits = None if search is None else self.store.cached(search)
        try:
            row, together = await self._admit(params, search if hits is None else None)
        except Exception as exc:  # busy, or the store failed: nothing was counted
            if not isinstance(exc, StoreBusyError):
                log.exception("admission failed on %s", printable(call.path))
            return exc
        decision = limits.postgres_verdict(row, params)
        if isinstance(decision, limits.Refusal):
            if decision.retry_after is not None:
                await self._tally_spike(call.api_key)
            return decision
        guess = call.presumed or limits.Outcome(0, None)
        outcome = await self._handle(call, search, row.get("hits") if together else hits)
        await self._settle([(decision, guess, outcome)])
        return outcome

    async def _admit(self, params: dict[str, Any], search: ParsedPolygon | None
                     ) -> tuple[dict[str, Any], bool]:
        """The admission's row, and whether it carries the hit list of ``search`` (searched
        in the same statement when keys and parcels share a database)."""
        if search is None or not self._together:
            return await self._fetch_admission(params), False
        query, search_params = self.store.search_statement(search.polygon)
        try:
            return await self._fetch_admission(params | search_params, query), True
        except psycopg.Error:
            # The search failed, and took the admission with it: admit alone, so that the
            # call counts and its search fails on its own (a 500, as on threads).
            return await self._fetch_admission(params), False

    async def _fetch_admission(self, params: dict[str, Any], search: str | None = None
                               ) -> dict[str, Any]:
        async with self._connection(self.keys.url) as conn:
            cursor = await conn.execute(limits.postgres_statement(search), params)
            row: dict[str, Any] | None = await cursor.fetchone()
        assert row is not None  # the function always returns one row
        return row

    async def _handle(self, call: limits.Call[bytes], search: ParsedPolygon | None,
                      hits: Any) -> limits.Outcome[bytes]:
        """``call``'s outcome, its hit list fetched (or ``hits``, fetched already) and cached
        first; the handler then pages through the cache without a query."""
        if search is not None and hits is None:
            try:
                hits = await self._search(search)
            except Exception as exc:  # the call counted: answered 503 (given back) or 500
                return self._failed(call.path, exc)
        if search is not None:
            self.store.remember(search, hits)
        return call.handle()

    async def _search(self, search: ParsedPolygon) -> list[str]:
        query, params = self.store.search_statement(search.polygon)
        async with self._connection(self.store.url) as conn:
            cursor = await conn.execute(query, params)
            return [row["group_id"] for row in await cursor.fetchall()]

    async def _settle(self, handled: limits.Handled) -> None:
        statements = limits.settling(handled)
        if not statements:
            return
        try:
            async with self._connection(self.keys.url) as conn, conn.transaction():
                for statement, params in statements:
                    await conn.execute(self.keys.sql(statement), params)
        except StoreBusyError:  # the calls are counted and answered; only their rows lag
            log.warning(limits.SETTLE_LAGS, len(statements))

    async def _tally_spike(self, api_key: str) -> None:
        statement, params = self.portal.spike_refusal(api_key)
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
            url, min_size=self._size, max_size=self._size, open=False, configure=configure,
            timeout=self.keys.busy_timeout, name="parcelsearch",
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
