"""A vendor's answer read within bounds: its body, once decompressed, is at most
:data:`MOST_BODY` bytes (a real page of GroupIDs is about 1 MB at most); a larger one is
refused as malformed, never read into memory whole.

:func:`read_capped` is a ``requests`` response hook (:func:`parcelsearch._fetch.session.new_session`
installs it): it runs before ``requests`` reads the body itself, so every answer of a session
is read here, in chunks, ``gzip`` and ``deflate`` decoded a chunk at a time; a streamed one
(a response deadline) is read by the deadline's watchdog, which calls :func:`check_size`.
"""

from __future__ import annotations

from typing import Any

import requests

from parcelsearch.errors import MalformedResponseError
from parcelsearch.settings import without_userinfo

__all__ = ["MOST_BODY", "read_capped", "check_size"]

#: The most bytes of one answer's body, decompressed, that are read.
MOST_BODY = 16 * 1024 * 1024
_CHUNK = 65536


def read_capped(response: requests.Response, *args: Any, **kwargs: Any) -> requests.Response:
    """Read ``response``'s body whole, refusing one past :data:`MOST_BODY` bytes.

    Raises
    ------
    MalformedResponseError
        The body (decompressed) is larger: it is not read further and the connection is
        closed.
    """
    if kwargs.get("stream") or getattr(response, "_content", False) is not False:
        return response  # streamed: read by the response deadline's watchdog, with check_size
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(_CHUNK):
        size += len(chunk)
        check_size(response, size)
        chunks.append(chunk)
    response._content = b"".join(chunks)
    response._content_consumed = True  # type: ignore[attr-defined]
    return response


def check_size(response: requests.Response, size: int) -> None:
    """Refuse ``response`` once ``size`` bytes of its body (decompressed) are past
    :data:`MOST_BODY`.

    Raises
    ------
    MalformedResponseError
        Past it: the connection is closed.
    """
    if size > MOST_BODY:
        response.close()
        raise MalformedResponseError(
            f"the answer's body is larger than {MOST_BODY // 2**20} MB once decompressed "
            f"(HTTP {response.status_code}; a page of GroupIDs is about 1 MB): not read "
            "further",
            url=without_userinfo((response.url or "").partition("?")[0]),
        )
