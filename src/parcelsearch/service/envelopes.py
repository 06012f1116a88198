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

__all__ = ["error_body", "envelope", "JSON"]

JSON = "application/json"


def error_body(*messages: str) -> bytes:
    """The envelope's bytes for ``messages``."""
    return json.dumps(
        {"status": "ERROR", "messages": list(messages)}, separators=(",", ":")
    ).encode()


def envelope(status: int, *messages: str, headers: dict[str, str] | None = None) -> Response:
    """An error response in the envelope."""
    return Response(error_body(*messages), status_code=status, media_type=JSON, headers=headers)
