"""The Starlette application: routes, the gateway checks, the error envelope.

Every answer is JSON. Successes are the vendor's bodies; every error is
``{"status":"ERROR","messages":[...]}`` — for unknown paths (404), other methods (405),
over-long request lines (414, checked before anything else), keys (401), limits (429),
bad parameters (400), a key store locked past its busy timeout (503 with ``Retry-After``)
and even unexpected failures (500, traceback logged server-side).

A ``GET`` of the service's own paths is answered without Starlette's routing, middleware
and request objects (:class:`GatedRoutes`); every other request goes through Starlette.

The loop never waits on a lock or a long search (``/openapi.json`` answers while a key
store lock is held elsewhere): with both stores in this process, the requests of one turn of
the loop are admitted and handled on the loop in one transaction when the key store's locks
are free at once and their searches are brief (:mod:`parcelsearch_service.loop_gate`), else
on one thread that admits the requests queued meanwhile in one transaction and answers them
with one loop wake-up (:mod:`parcelsearch_service.batching`); with both in PostgreSQL, the
loop sends them on asynchronous connections and awaits the answers
(:mod:`parcelsearch_service.postgres_gate`); with one of each, they run on a pool of
threads.

Examples
--------
>>> envelope(401, MISSING_KEY).body
b'{"status":"ERROR","messages":["Failed to resolve API Key variable request.header.x-api-key"]}'
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import geopandas as gpd
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Scope

from parcelsearch.settings import (
    MARKETS_PATH,
    PAGE_SIZE,
    SEARCH_PATH,
    STAGE_PREFIX,
)
from parcelsearch_service import limits
from parcelsearch_service.asgi_layers import (
    INTERNAL_UNCOUNTED,
    GatedRoutes,
    Handler,
    RequestLineGuard,
)
from parcelsearch_service.batching import Batcher
from parcelsearch_service.envelopes import (
    JSON,
    envelope,
    error_body,
    printable,
)
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys import KeyStore, PostgresKeyStore, SqliteKeyStore
from parcelsearch_service.limits import INVALID_KEY
from parcelsearch_service.loop_gate import LoopGate
from parcelsearch_service.openapi import openapi_document
from parcelsearch_service.polygon import ParsedPolygon, bad_request
from parcelsearch_service.portal.routes import create_portal
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.postgis import PostgisParcelStore, open_parcel_store
from parcelsearch_service.postgres_gate import PostgresGate
from parcelsearch_service.search_query import json_strings, parse_search
from parcelsearch_service.store import ParcelStore, load_markets

__all__ = [
    "create_app",
    "envelope",
    "MISSING_KEY",
    "BUSY",
]

log = logging.getLogger("parcelsearch.service")

MISSING_KEY = "Failed to resolve API Key variable request.header.x-api-key"
#: A 500 after admission: the call was counted (and logged with status 500).
INTERNAL = (
    "internal error: the service failed while handling this request (the call was counted); "
    "try again, and report it if it persists"
)
BUSY = (
    "the service's key or parcel store is busy or unreachable; retry after the seconds in "
    "Retry-After"
)
#: Threads that admit and handle requests when one store (not both) is in PostgreSQL (each
#: waits on the network), per worker process: enough to keep a worker busy while queries are
#: out (a worker tops out near 1,500 req/s; at 1.5 ms a request in PostgreSQL that is 2–3 in
#: flight), and no more, since idle ones only fight over the GIL. Measured at PostGIS 1 M
#: (then on threads too), one worker, half load: p99 10–14 ms with 8 threads; with 2 and
#: with 4, 5–8 ms in one run and the same within the run-to-run spread in another.
#: With both stores in this process (SQLite keys, parcels in memory) one thread does it, in
#: batches (:class:`~parcelsearch_service.batching.Batcher`): requests then wait on nothing
#: but each other; with both in PostgreSQL, the loop itself
#: (:class:`~parcelsearch_service.postgres_gate.PostgresGate`).
THREADS_NETWORKED = 4
#: Reads a request's parameters and key header, on the loop: its gateway call, or the
#: answer that needs no admission (a 401 for a missing key).
_MakeCall = Callable[[], "limits.Call[bytes] | Response"]
#: Admits and handles a gateway call: its response.
_Gate = Callable[["limits.Call[bytes]"], Awaitable[Response]]
#: Seconds a client should wait after a 503.
BUSY_RETRY_AFTER = 1


class _Service:
    """The handlers, bound to one parcel store, markets list and key store."""

    def __init__(
        self,
        store: ParcelStore | PostgisParcelStore,
        markets: list[str],
        keys: KeyStore,
        portal: PortalStore,
    ) -> None:
        self.store = store
        self.keys = keys
        self.portal = portal
        self.postgres: PostgresGate | None = None
        self.loop_gate: LoopGate | None = None
        self._gate: _Gate
        # Threads and pools start on first use, so a service forked into workers starts its own.
        if isinstance(keys, PostgresKeyStore) and isinstance(store, PostgisParcelStore):
            self.postgres = PostgresGate(keys, store, portal, self._failed)
            self._gate = self._on_loop(self.postgres)
        elif isinstance(keys, PostgresKeyStore) or isinstance(store, PostgisParcelStore):
            self._gate = self._pooled(
                ThreadPoolExecutor(THREADS_NETWORKED, thread_name_prefix="parcelsearch"))
        elif (isinstance(keys, SqliteKeyStore) and isinstance(store, ParcelStore)
              and portal.keys is keys):
            self.loop_gate = LoopGate(keys, store, portal)
            self._gate = self._on_loop_or_thread(
                self.loop_gate, Batcher(self._answer_made, name="parcelsearch-gate"))
        else:
            self._gate = self._threaded(Batcher(self._answer_made, name="parcelsearch-gate"))
        self._markets_answer = limits.Outcome(200, json.dumps(
            {"status": "OK", "dataRows": len(markets), "data": markets},
            separators=(",", ":"), ensure_ascii=False,
        ).encode())

    def _call(
        self,
        scope: Scope,
        service: str,
        handle: Callable[[], limits.Outcome[bytes]],
        presumed: limits.Outcome[bytes] | None = None,
        search: ParsedPolygon | None = None,
    ) -> limits.Call[bytes] | Response:
        """The gateway's call for this request, or the 401 that answers it (no key, or the
        header given twice)."""
        given = [value.decode("latin-1") for name, value in scope["headers"]
                 if name == b"x-api-key"]
        if len(given) > 1:  # which one counts would depend on the proxy in front: neither
            return envelope(401, f"{INVALID_KEY}: x-api-key is given {len(given)} times; "
                                 "send it once")
        if not given or not given[0]:
            return envelope(401, MISSING_KEY)
        path = scope["path"]
        return limits.Call(given[0], service, path, self._safe(path, handle), presumed, search)

    def _safe(
        self, path: str, handle: Callable[[], limits.Outcome[bytes]]
    ) -> Callable[[], limits.Outcome[bytes]]:
        """``handle``, its failures answered by :meth:`_failed`."""
        def safe() -> limits.Outcome[bytes]:
            try:
                return handle()
            except Exception as exc:
                return self._failed(path, exc)
        return safe

    @staticmethod
    def _failed(path: str, exc: Exception) -> limits.Outcome[bytes]:
        """The outcome of an admitted request whose handling raised ``exc``: 503 when the
        parcel store is unreachable, else 500 (the call is counted either way; a 503 is
        given back)."""
        if isinstance(exc, StoreBusyError):
            log.warning("parcels database unavailable on %s: answered 503", printable(path))
            return limits.Outcome(503, error_body(BUSY))
        log.error("error handling %s", printable(path), exc_info=exc)
        return limits.Outcome(500, error_body(INTERNAL))

    async def _gated(self, make: _MakeCall) -> Response:
        """Make the gateway's call (``make``: parameters and key header checked, here on the
        loop: pure work, bounded by the request line), admit and handle it. The loop, which
        reads and writes every connection, is the one thread the whole process waits on:
        admission and search run on it only where they cannot wait on a lock or work for
        long (:class:`~parcelsearch_service.loop_gate.LoopGate`, or sent and awaited, with
        both stores in PostgreSQL), else on threads."""
        made = self._made(make)
        if isinstance(made, Response):
            return made
        return await self._gate(made)

    def _threaded(self, batcher: Batcher[limits.Call[bytes], Response]) -> _Gate:
        """The gate on the batcher's thread: the calls queued meanwhile admitted in one
        transaction, handled, answered with one loop wake-up."""
        return batcher.run

    def _on_loop_or_thread(self, gate: LoopGate,
                           batcher: Batcher[limits.Call[bytes], Response]) -> _Gate:
        """The gate with both stores in this process: on the loop when that needs no wait
        (``gate``), else on the batcher's thread."""
        async def answer(call: limits.Call[bytes]) -> Response:
            result = await gate.answer(call)
            if result is None:
                return await batcher.run(call)
            return self._answer(call, result)
        return answer

    def _pooled(self, threads: ThreadPoolExecutor) -> _Gate:
        """The gate with one store in PostgreSQL: admitted and handled on one of ``threads``
        (which wait on the network)."""
        async def gate(call: limits.Call[bytes]) -> Response:
            answers = await asyncio.get_running_loop().run_in_executor(
                threads, self._answer_made, [call])
            return answers[0]
        return gate

    def _on_loop(self, postgres: PostgresGate) -> _Gate:
        """The gate with both stores in PostgreSQL: admitted and handled here, on the loop;
        the loop waits on the database as on any socket."""
        async def gate(call: limits.Call[bytes]) -> Response:
            return self._answer(call, await postgres.answer(call))
        return gate

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Serve, then close what was opened on this loop (the PostgreSQL pools, the loop
        gate's connection)."""
        try:
            yield
        finally:
            if self.postgres is not None:
                await self.postgres.close()
            if self.loop_gate is not None:
                self.loop_gate.close()

    def _answer_made(self, calls: Sequence[limits.Call[bytes]]) -> list[Response]:
        """Admit ``calls`` together, handle the admitted ones, answer each."""
        results = limits.admit_all(self.keys, calls)
        return [self._tallied(call, result) for call, result in zip(calls, results, strict=True)]

    def _tallied(
        self, call: limits.Call[bytes], result: limits.Refusal | limits.Outcome[bytes] | Exception
    ) -> Response:
        """:meth:`_answer`, a spike-arrest refusal counted first for the portal's page."""
        if isinstance(result, limits.Refusal) and result.retry_after is not None:
            self._count_spike_refusal(call.api_key)
        return self._answer(call, result)

    @staticmethod
    def _made(make: _MakeCall) -> limits.Call[bytes] | Response:
        try:
            return make()
        except Exception:
            log.exception("error reading a request")
            return envelope(500, INTERNAL_UNCOUNTED)

    def _answer(
        self,
        call: limits.Call[bytes],
        result: limits.Refusal | limits.Outcome[bytes] | Exception,
    ) -> Response:
        if isinstance(result, StoreBusyError):
            log.warning("key store busy on %s: answered 503", printable(call.path))
            return envelope(503, BUSY, headers={"Retry-After": str(BUSY_RETRY_AFTER)})
        if isinstance(result, Exception):  # the admission failed: nothing was counted
            log.error("error admitting %s", printable(call.path), exc_info=result)
            return envelope(500, INTERNAL_UNCOUNTED)
        if isinstance(result, limits.Refusal):
            headers = None if result.retry_after is None else {
                "Retry-After": str(result.retry_after)
            }
            return envelope(result.status, result.message, headers=headers)
        headers = {"Retry-After": str(BUSY_RETRY_AFTER)} if result.status == 503 else None
        return Response(result.body, status_code=result.status, media_type=JSON, headers=headers)

    def _count_spike_refusal(self, api_key: str) -> None:
        try:
            self.portal.count_spike_refusal(api_key)
        except StoreBusyError:  # the refusal is answered; only the portal's tally misses it
            log.warning("spike-arrest refusal not tallied: the key store stayed busy")

    async def markets(self, scope: Scope) -> Response:
        answer = self._markets_answer
        return await self._gated(lambda: self._call(scope, "markets", lambda: answer, answer))

    async def search(self, scope: Scope) -> Response:
        return await self._gated(lambda: self._search_call(scope))

    def _search_call(self, scope: Scope) -> limits.Call[bytes] | Response:
        # Parsing before admission means the log row is written with its final status,
        # polygon and page in the admission's one statement; only an outcome that differs
        # (page beyond the last, a failure) updates it afterwards.
        parsed = parse_search(scope["query_string"])
        if isinstance(parsed, limits.Outcome):
            bad = parsed
            return self._call(scope, "search", lambda: bad, bad)
        polygon, page = parsed
        return self._call(scope, "search", lambda: self._search(polygon, page),
                          limits.Outcome(200, b"", polygon.sha256, page), polygon)

    def _search(self, parsed: ParsedPolygon, page: int) -> limits.Outcome[bytes]:
        sha = parsed.sha256
        hits = self.store.hits(parsed)
        rows = len(hits)
        pages = math.ceil(rows / PAGE_SIZE)
        if page > max(pages, 1):
            what = "has no results (rows 0, pages 0); ask for page 1" if rows == 0 else (
                f"has {pages} page{'s' if pages != 1 else ''} ({rows} rows); ask for a page "
                f"from 1 to {pages}"
            )
            message = bad_request(f"page {page} is beyond the last page: this search {what}")
            return limits.Outcome(400, error_body(*message.messages), sha, page)
        data = self.store.page(hits, page)
        body = (f'{{"status":"OK","rows":{rows},"dataRows":{len(data)},"pages":{pages},'
                f'"page":{page},"data":{json_strings(data)}}}')
        return limits.Outcome(200, body.encode(), sha, page)

    async def openapi(self, request: Request) -> Response:
        # The server is this document's own origin (a relative URL), never one built from the
        # request's Host or X-Forwarded-Proto, which a client or a proxy chooses.
        return Response(json.dumps(openapi_document("/")), media_type=JSON)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = (
            f"no such resource: {request.url.path}; the service answers GET {SEARCH_PATH} and "
            f"GET {MARKETS_PATH} (also under {STAGE_PREFIX})"
        )
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}; use GET"
    else:
        message = str(exc.detail)
    return envelope(exc.status_code, message, headers=dict(exc.headers or {}))


async def _to_portal(request: Request) -> Response:
    return RedirectResponse("/portal/", 308)


async def _server_error(request: Request, exc: Exception) -> Response:
    return envelope(500, INTERNAL_UNCOUNTED)


def _from_request(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` as a Starlette endpoint (a ``GET`` that :class:`GatedRoutes` passed on,
    under a root path)."""
    async def endpoint(request: Request) -> Response:
        return await handler(request.scope)
    return endpoint


def _get_only(path: str, endpoint: Callable[[Request], Awaitable[Response]]) -> Route:
    """A GET route without Starlette's implied HEAD: a HEAD would be admitted and counted
    like the GET for an answer with no body, so it is answered 405 (``Allow: GET``) and
    spends nothing."""
    route = Route(path, endpoint, methods=["GET"])
    assert route.methods is not None
    route.methods.discard("HEAD")
    return route


def create_app(
    parcels: str | Path | gpd.GeoDataFrame | ParcelStore | PostgisParcelStore | None = None,
    markets: str | Path | Sequence[str] | None = None,
    keys: KeyStore | str | Path | None = None,
    match: str = "representative-point",
    portal: PortalStore | bool = False,
    portal_ca: Path | None = None,
) -> ASGIApp:
    """The service as an ASGI application.

    Parameters
    ----------
    parcels
        A parcel store, a parcels file or frame, a ``postgresql://`` URL (PostGIS table
        ``parcelsearch.parcels``), or ``None`` for the bundled demo.
    markets
        A markets file, a list of names, or ``None`` for the bundled list.
    keys
        The key store, or its location (a SQLite path or a ``postgresql://`` URL). Required.
    match
        ``"representative-point"`` or ``"intersects"`` (ignored when ``parcels`` is a store).
    portal
        Serve the developer portal at ``/portal/`` (``True``, or a :class:`PortalStore` on
        ``keys`` with its own session and sign-in settings).
    portal_ca
        The service's CA certificate, offered by the portal (``/portal/ca.pem``) and named
        in the snippets it shows with a new key.
    """
    if keys is None:
        raise TypeError("create_app needs a key store (keys=KeyStore(path) or a path)")
    key_store = keys if isinstance(keys, KeyStore) else KeyStore(keys)
    store = open_parcel_store(parcels, match=match)
    portal_store = portal if isinstance(portal, PortalStore) else PortalStore(key_store)
    service = _Service(store, load_markets(markets), key_store, portal_store)
    routes: list[BaseRoute] = [
        Route("/openapi.json", service.openapi, methods=["GET"]),
    ]
    if portal:
        routes.append(Route("/portal", _to_portal))
        routes.append(Mount("/portal", app=create_portal(portal_store, portal_ca)))
    gated: dict[str, Handler] = {}
    for prefix in ("", STAGE_PREFIX):
        gated[prefix + SEARCH_PATH] = service.search
        gated[prefix + MARKETS_PATH] = service.markets
    routes.extend(_get_only(path, _from_request(handler)) for path, handler in gated.items())
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        lifespan=service.lifespan,
    )
    app.router.redirect_slashes = False
    app.state.service = service
    return RequestLineGuard(GatedRoutes(app, gated))
