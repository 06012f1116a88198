"""The service's error envelope, built in one place.

Every error the service answers — from the HTTP parser, the gateway checks, a handler or a
last-resort guard — is ``{"status":"ERROR","messages":[...]}`` in compact JSON.

Examples
--------
>>> error_body("one", "two")
b'{"status":"ERROR","messages":["one","two"]}'
>>> envelope(503, "busy", headers={"Retry-After": "1"}).headers["retry-after"]
'1'
"""

from __future__ import annotations

import json

from starlette.responses import Response

__all__ = ["error_body", "envelope", "JSON", "SECURITY_HEADERS", "printable"]

JSON = "application/json"

#: Headers on every response of the service (the portal adds its own on top): browsers must
#: use HTTPS for this host from now on, and never guess a type other than the one given.
SECURITY_HEADERS: dict[str, str] = {
    "Strict-Transport-Security": "max-age=31536000",
    "X-Content-Type-Options": "nosniff",
}


def printable(text: object, limit: int = 2048) -> str:
    """``text`` made safe for one log line: backslashes, quotes and every character that is
    not printable (line breaks, escape sequences, …) written as ``\\xNN``/``\\uNNNN``,
    and cut to ``limit`` characters (a request line may be long).

    >>> printable('/v1/markets\\n2026 INFO "forged"')
    '/v1/markets\\\\x0a2026 INFO \\\\x22forged\\\\x22'
    """
    value = str(text)
    cut = value[:limit]
    shown = "".join(
        c
        if c.isprintable() and c not in '\\"'
        else (
            f"\\x{ord(c):02x}"
            if ord(c) < 256
            else f"\\u{ord(c):04x}"
            if ord(c) < 65536
            else f"\\U{ord(c):08x}"
        )
        for c in cut
    )
    return shown + ("…" if len(value) > limit else "")


def error_body(*messages: str) -> bytes:
    """The envelope's bytes for ``messages``."""
    return json.dumps(
        {"status": "ERROR", "messages": list(messages)}, separators=(",", ":")
    ).encode()


def envelope(status: int, *messages: str, headers: dict[str, str] | None = None) -> Response:
    """An error response in the envelope."""
    return Response(error_body(*messages), status_code=status, media_type=JSON, headers=headers)
