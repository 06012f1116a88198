"""The HTTP/1.1 protocol the service's uvicorn speaks: h11 with request heads capped as the
bytes arrive (414/431 before buffering more, the rest dropped unbuffered), each request
timed (408), obsolete line folding refused, and every such answer in the service's JSON
envelope with its security headers.
"""

from __future__ import annotations

from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from parcelsearch.settings import MAX_REQUEST_LINE_BYTES
from parcelsearch_service.envelopes import JSON, SECURITY_HEADERS, error_body

__all__ = [
    "EnvelopeH11Protocol",
    "MAX_REQUEST_HEAD",
    "DISCARD_LIMIT",
    "REQUEST_TIMEOUT",
    "KEEP_ALIVE_TIMEOUT",
]

#: Largest request head (request line and headers) a connection may send: checked as the
#: bytes arrive, so no more than this (plus one read) is ever buffered for a head. A head
#: longer than this is answered at once (414 while its request line is incomplete, else 431)
#: and the rest dropped unbuffered; a request line longer than the vendor's limit but within
#: this reaches the 414 guard of the app.
MAX_REQUEST_HEAD = MAX_REQUEST_LINE_BYTES + 32 * 1024
#: Bytes of an over-long request head read (and dropped, never buffered) after its 414/431 is
#: written, so that a client that sends its whole request before reading (most do) gets the
#: answer rather than a reset; past this the connection is closed (a 100,000-point polygon,
#: the longest a client might plausibly try, is about 3 MB).
DISCARD_LIMIT = 4 * 1024 * 1024
#: Seconds a connection has to send a whole request (head and any body): from when it opens,
#: and from the first byte of each later request on it (idle keep-alive has its own timeout).
REQUEST_TIMEOUT = 10.0
#: Seconds an idle keep-alive connection is kept open between requests.
KEEP_ALIVE_TIMEOUT = 30

_OBSOLETE_FOLD = (
    b"malformed HTTP request: a header line continues on the next line "
    b"(obsolete line folding); send each header on one line"
)


def _raw_error(status: int, reason: bytes, message: str) -> bytes:
    """A whole ``Connection: close`` error response in the envelope, as bytes."""
    body = error_body(message)
    head = [
        b"HTTP/1.1 %d %s" % (status, reason),
        b"content-type: " + JSON.encode(),
        b"content-length: %d" % len(body),
        b"connection: close",
    ]
    head += [(k.lower() + ": " + v).encode() for k, v in SECURITY_HEADERS.items()]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class EnvelopeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, answering unparseable requests in the JSON envelope, with a
    deadline for each request, head and body (:data:`REQUEST_TIMEOUT`: 408 while the head is
    incomplete, else closed), a cap on the head's size (:data:`MAX_REQUEST_HEAD`: 414 while
    the request line is not complete, 431 after) and obsolete line folding refused (400)."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._head_bytes = 0
        self._line_done = False
        self._tail = b""
        self._head_timer: Any = None
        self._discarded: int | None = None  # bytes dropped after a 414/431, once refused
        self._start_clock()

    def _start_clock(self) -> None:
        self._head_bytes = 0
        self._line_done = False
        self._tail = b""
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(REQUEST_TIMEOUT, self._too_slow)

    def _stop_clock(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._head_bytes and self._discarded is None and self._reading_head():
            self.transport.write(
                _raw_error(
                    408,
                    b"Request Timeout",
                    (
                        f"the request did not arrive within {REQUEST_TIMEOUT:g} seconds; send the "
                        "request line, headers and body at once"
                    ),
                )
            )
        self.transport.close()

    def _reading_head(self) -> bool:
        return self.conn.their_state is h11.IDLE and (
            self.cycle is None or self.cycle.response_complete
        )

    def _awaiting_request(self) -> bool:
        """Whether the client still owes this request's head or body."""
        return self.conn.their_state is h11.SEND_BODY or self._reading_head()

    def data_received(self, data: bytes) -> None:
        if self._discarded is not None:
            self._discard(data)
            return
        if self._reading_head():
            if self._head_timer is None:  # the first byte of a later request on this connection
                self._start_clock()
            seen = self._tail + data
            end = seen.find(b"\r\n\r\n")
            head = seen if end < 0 else seen[:end]
            self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._tail))
            self._line_done = self._line_done or b"\n" in head
            if b"\n " in head or b"\n\t" in head:
                self._refuse(400, b"Bad Request", _OBSOLETE_FOLD.decode())
                return
            self._tail = seen[-3:]
            if self._head_bytes > MAX_REQUEST_HEAD:  # h11 checks incomplete heads only
                self._too_large(data)
                return
        super().data_received(data)
        if not self._awaiting_request() or self.transport.is_closing():
            self._stop_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._reading_head() and not self.transport.is_closing():
            self._head_bytes = 0
            self._line_done = False
            self._tail = b""
            if self.conn.trailing_data[0]:  # a pipelined request, not complete yet
                self._start_clock()

    def send_400_response(self, msg: str) -> None:
        if self._head_bytes > MAX_REQUEST_HEAD:
            self._too_large(b"")
            return
        self._refuse(
            400, b"Bad Request", f"malformed HTTP request ({msg}); send a valid HTTP/1.1 request"
        )

    def _too_large(self, data: bytes) -> None:
        """Answer a head over :data:`MAX_REQUEST_HEAD` (414 while its request line is not
        complete, else 431), then drop what else comes of it (:meth:`_discard`)."""
        if self._line_done:
            status, reason = 431, b"Request Header Fields Too Large"
            message = (
                f"the request head is over {MAX_REQUEST_HEAD:,} bytes; send fewer or "
                "shorter headers"
            )
        else:
            status, reason = 414, b"URI Too Long"
            message = f"request line size exceeding {MAX_REQUEST_LINE_BYTES:,}"
        self.transport.write(_raw_error(status, reason, message))
        self._discarded = 0
        self._discard(data)

    def _discard(self, data: bytes) -> None:
        """Drop ``data`` of a refused head; close once the head ends or
        :data:`DISCARD_LIMIT` bytes were dropped."""
        assert self._discarded is not None
        self._discarded += len(data)
        seen = self._tail + data
        if b"\r\n\r\n" in seen or self._discarded > DISCARD_LIMIT:
            self._stop_clock()
            self.transport.close()
        self._tail = seen[-3:]

    def _refuse(self, status: int, reason: bytes, message: str) -> None:
        """Answer in the envelope and close, whatever state h11 is in."""
        self._stop_clock()
        self.transport.write(_raw_error(status, reason, message))
        self.transport.close()

    def shutdown(self) -> None:
        """Server shutdown: drop idle keep-alive connections at once (a TLS close would wait
        for the client's close_notify); let a request in flight finish."""
        self._stop_clock()
        if self.cycle is None or self.cycle.response_complete:
            self.transport.abort()
        else:
            self.cycle.keep_alive = False
