"""The service's outermost ASGI layers: what every request meets before a route.

:class:`RequestLineGuard` (the 414 check, HTTP versions, percent-escaped paths, framing,
security headers, the access log, a last-resort 500) wraps :class:`GatedRoutes` (a ``GET``
of the gated paths answered without Starlette's routing and middleware).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from parcelsearch.settings import MAX_REQUEST_LINE_BYTES
from parcelsearch_service.envelopes import SECURITY_HEADERS, envelope, printable

__all__ = [
    "RequestLineGuard",
    "GatedRoutes",
    "request_line_length",
    "REQUEST_LINE_TOO_LONG",
    "AMBIGUOUS_FRAMING",
    "INTERNAL_UNCOUNTED",
    "HTTP_VERSION",
]

log = logging.getLogger("parcelsearch.service")
access_log = logging.getLogger("parcelsearch.service.access")

REQUEST_LINE_TOO_LONG = f"request line size exceeding {MAX_REQUEST_LINE_BYTES:,}"
AMBIGUOUS_FRAMING = (
    "malformed HTTP request: both Content-Length and Transfer-Encoding are given; send one"
)
#: A 500 before or during admission: nothing was counted.
INTERNAL_UNCOUNTED = (
    "internal error: the service failed before admitting this request (the call was not "
    "counted); try again, and report it if it persists"
)
HTTP_VERSION = "HTTP version {version} is not supported; send HTTP/1.1 (or HTTP/1.0)"


def request_line_length(scope: Scope) -> int:
    """Bytes of ``METHOD <raw target> HTTP/x`` as the client sent it."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8")
    query = scope.get("query_string", b"")
    target = len(raw) + (1 + len(query) if query else 0)
    method = scope.get("method", "GET")
    return len(method) + 1 + target + len(" HTTP/") + len(scope.get("http_version", "1.1"))


class RequestLineGuard:
    """Outermost ASGI layer: the 414 check, HTTP/1.0 and 1.1 only (505 otherwise), a path
    with percent-escapes routed as written (``/v1%2Fsearch`` is no route: 404), HSTS and
    ``nosniff`` on every response, an access log without queries or headers (the path and
    address escaped: one request, one line), and a last-resort 500 envelope."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_REQUEST_LINE_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
        self._names = {k for k, _ in self.headers}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                names = self._names
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": kept + self.headers}
            await send(message)

        version = scope.get("http_version", "1.1")
        try:
            if request_line_length(scope) > self.max_bytes:
                await envelope(414, REQUEST_LINE_TOO_LONG)(scope, receive, tracked)
            elif version not in ("1.0", "1.1"):
                await envelope(505, HTTP_VERSION.format(version=printable(version, 10)))(
                    scope, receive, tracked
                )
            elif _ambiguous_framing(scope):  # request smuggling: refuse, as nginx does
                await envelope(400, AMBIGUOUS_FRAMING)(scope, receive, tracked)
            else:
                await self.app(_as_written(scope), receive, tracked)
        except Exception:
            log.exception(
                "unhandled error on %s %s",
                printable(scope.get("method")),
                printable(scope.get("path")),
            )
            if status == 0:
                await envelope(500, INTERNAL_UNCOUNTED)(scope, receive, tracked)
        finally:
            if access_log.isEnabledFor(logging.INFO):
                client = scope.get("client") or ("-", 0)
                access_log.info(
                    '%s "%s %s" %s %.1fms',
                    printable(client[0]),
                    printable(scope.get("method")),
                    printable(scope.get("path")),
                    status,
                    (time.perf_counter() - started) * 1000,
                )


def _as_written(scope: Scope) -> Scope:
    """``scope`` routed by its path as the client wrote it when that has percent-escapes: the
    service's paths need none, and one that spells ``/`` or a letter escaped (``/v1%2Fsearch``,
    ``/v1/%73earch``) is not the same resource to every proxy and log in front of it."""
    raw = scope.get("raw_path")
    if not raw or b"%" not in raw:
        return scope
    return {**scope, "path": raw.decode("latin-1")}


def _ambiguous_framing(scope: Scope) -> bool:
    length = encoding = False
    for name, _ in scope.get("headers", ()):
        lowered = name.lower()
        length = length or lowered == b"content-length"
        encoding = encoding or lowered == b"transfer-encoding"
    return length and encoding


#: A handler of :class:`GatedRoutes`: the response to a request (its ASGI scope).
Handler = Callable[[Scope], Awaitable[Response]]


class GatedRoutes:
    """ASGI: a ``GET`` of one of ``handlers``' paths answered by its handler directly, with
    none of Starlette's routing, middleware and request objects on the way (they cost more
    than admitting the request); every other request, and any path under a root path, to
    ``app``. Failures are the outer :class:`RequestLineGuard`'s (a 500 in the envelope)."""

    def __init__(self, app: ASGIApp, handlers: dict[str, Handler]) -> None:
        self.app = app
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and not scope.get("root_path"):
            handler = self.handlers.get(scope["path"])
            if handler is not None:
                response = await handler(scope)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
