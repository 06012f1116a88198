"""The portal's guards at the web's edge: the security headers on every response
(:class:`SecurityHeaders`), the browser's word on where a request came from
(:func:`_same_origin`), and a POSTed form read within bounds (:func:`_form`); the routes
(:mod:`parcelsearch_service.portal.routes`) use them."""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.datastructures import FormData, UploadFile
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "SecurityHeaders", "MAX_FORM_BYTES"]

MAX_FORM_BYTES = 64 * 1024

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "Strict-Transport-Security": "max-age=31536000",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class SecurityHeaders:
    """ASGI layer adding :data:`SECURITY_HEADERS` to every response of ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.raw = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k for k, _ in self.raw}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": kept + self.raw}
            await send(message)

        await self.app(scope, receive, with_headers)


def _same_origin(request: Request) -> bool:
    """False when the browser says the request came from elsewhere: ``Sec-Fetch-Site`` other
    than ``same-origin``/``none``, or an ``Origin`` that is not this one. (``Origin: null`` is
    what a page with ``Referrer-Policy: no-referrer`` sends: no information either way.)"""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    own = f"{request.url.scheme}://{request.url.netloc}"
    return origin is None or origin in ("null", own)


async def _form(request: Request) -> FormData | None:
    """The POSTed form (``None`` for other methods, other encodings than
    ``application/x-www-form-urlencoded`` — the portal's forms send no files — or a body
    over 64 KiB, all of which the CSRF check then refuses)."""
    if request.method != "POST":
        return None
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    size = request.headers.get("content-length", "")
    if kind != "application/x-www-form-urlencoded" or not size.isdigit():
        return None
    if int(size) > MAX_FORM_BYTES:
        return None
    try:
        body = await request.body()
    except ClientDisconnect:  # gone, or cut off by the request deadline
        return None
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=100)
    except ValueError:  # not UTF-8, or too many fields
        return None
    fields: list[tuple[str, str | UploadFile]] = list(pairs)
    return FormData(fields)
