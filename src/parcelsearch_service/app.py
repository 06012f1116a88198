"""The Starlette application: routes, the gateway checks, the error envelope.

Every answer is JSON. Successes are the vendor's bodies; every error is
``{"status":"ERROR","messages":[...]}`` — for unknown paths (404), other methods (405),
over-long request lines (414, checked before anything else), keys (401), limits (429),
bad parameters (400), a key store locked past its busy timeout (503 with ``Retry-After``)
and even unexpected failures (500, traceback logged server-side).

A ``GET`` of the service's own paths is answered without Starlette's routing, middleware
and request objects (:class:`GatedRoutes`); every other request goes through Starlette.

The loop never waits on a lock or a long search (``/openapi.json`` answers while a key
store lock is held elsewhere): each gated call goes to the
:class:`~parcelsearch_service.gateway.Gateway`, which admits it in its key store's dialect
(one :class:`~parcelsearch_service.limits.Admission` a dialect, chosen from a table) — on the
loop when that needs no wait, else on a thread.

Examples
--------
>>> envelope(401, MISSING_KEY).body
b'{"status":"ERROR","messages":["Failed to resolve API Key variable request.header.x-api-key"]}'
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
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
from parcelsearch_service.envelopes import (
    JSON,
    envelope,
    error_body,
    printable,
)
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.gateway import Gateway
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.limits import BUSY, INTERNAL, INVALID_KEY
from parcelsearch_service.openapi import openapi_document
from parcelsearch_service.polygon import ParsedPolygon, bad_request
from parcelsearch_service.portal.routes import create_portal
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.postgis import PostgisParcelStore, open_parcel_store
from parcelsearch_service.search_query import json_strings, parse_search
from parcelsearch_service.store import ParcelStore, load_markets

__all__ = [
    "create_app",
    "envelope",
    "MISSING_KEY",
    "BUSY",
    "INTERNAL",
]

log = logging.getLogger("parcelsearch.service")

MISSING_KEY = "Failed to resolve API Key variable request.header.x-api-key"
#: Reads a request's parameters and key header, on the loop: its gateway call, or the
#: answer that needs no admission (a 401 for a missing key).
_MakeCall = Callable[[], "limits.Call[bytes] | Response"]
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
        self.gateway = Gateway(keys, store, portal)
        self._markets_answer = limits.Outcome(
            200,
            json.dumps(
                {"status": "OK", "dataRows": len(markets), "data": markets},
                separators=(",", ":"),
                ensure_ascii=False,
            ).encode(),
        )

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
        given = [
            value.decode("latin-1") for name, value in scope["headers"] if name == b"x-api-key"
        ]
        if len(given) > 1:  # which one counts would depend on the proxy in front: neither
            return envelope(
                401, f"{INVALID_KEY}: x-api-key is given {len(given)} times; send it once"
            )
        if not given or not given[0]:
            return envelope(401, MISSING_KEY)
        path = scope["path"]
        return limits.Call(given[0], service, path, _safe(path, handle), presumed, search)

    async def _gated(self, make: _MakeCall) -> Response:
        """Make the gateway's call (``make``: parameters and key header checked, here on the
        loop: pure work, bounded by the request line), admit and handle it
        (:class:`~parcelsearch_service.gateway.Gateway`: on the loop only where that cannot
        wait on a lock or work for long, else on threads)."""
        made = self._made(make)
        if isinstance(made, Response):
            return made
        return self._answer(made, await self.gateway.answer(made))

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Serve, then close what was opened on this loop (the PostgreSQL pools, the loop's
        connection to the key store)."""
        try:
            yield
        finally:
            await self.gateway.close()

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
            headers = (
                None if result.retry_after is None else {"Retry-After": str(result.retry_after)}
            )
            return envelope(result.status, result.message, headers=headers)
        headers = {"Retry-After": str(BUSY_RETRY_AFTER)} if result.status == 503 else None
        return Response(result.body, status_code=result.status, media_type=JSON, headers=headers)

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
        return self._call(
            scope,
            "search",
            lambda: self._search(polygon, page),
            limits.Outcome(200, b"", polygon.sha256, page),
            polygon,
        )

    def _search(self, parsed: ParsedPolygon, page: int) -> limits.Outcome[bytes]:
        sha = parsed.sha256
        hits = self.store.hits(parsed)
        rows = len(hits)
        pages = math.ceil(rows / PAGE_SIZE)
        if page > max(pages, 1):
            what = (
                "has no results (rows 0, pages 0); ask for page 1"
                if rows == 0
                else (
                    f"has {pages} page{'s' if pages != 1 else ''} ({rows} rows); ask for a page "
                    f"from 1 to {pages}"
                )
            )
            message = bad_request(f"page {page} is beyond the last page: this search {what}")
            return limits.Outcome(400, error_body(*message.messages), sha, page)
        data = self.store.page(hits, page)
        body = (
            f'{{"status":"OK","rows":{rows},"dataRows":{len(data)},"pages":{pages},'
            f'"page":{page},"data":{json_strings(data)}}}'
        )
        return limits.Outcome(200, body.encode(), sha, page)

    async def openapi(self, request: Request) -> Response:
        # The server is this document's own origin (a relative URL), never one built from the
        # request's Host or X-Forwarded-Proto, which a client or a proxy chooses.
        return Response(json.dumps(openapi_document("/")), media_type=JSON)


def _safe(
    path: str, handle: Callable[[], limits.Outcome[bytes]]
) -> Callable[[], limits.Outcome[bytes]]:
    """``handle``, its failures answered by :func:`~parcelsearch_service.limits.failed_outcome`."""

    def safe() -> limits.Outcome[bytes]:
        try:
            return handle()
        except Exception as exc:
            return limits.failed_outcome(path, exc)

    return safe


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
