"""A small fault-injecting HTTPS proxy on 127.0.0.1, in front of the real reference service.

The toolkit talks to the proxy exactly as it talks to the service (same CA, same certificate:
the proxy serves the service's own ``server.pem``), so every retry, timeout and reset goes
through the client's real machinery (``requests`` → urllib3 → ``PacedRetry``). Each request
is numbered on arrival; ``proxy.rule(arrival)`` decides its fate:

==================  =========================================================================
fault               what the client sees (forwarded: whether the service saw, and counted, it)
==================  =========================================================================
``None``            the service's own answer, byte for byte                       (forwarded)
``429-seconds``     429 spike arrest, ``Retry-After: 1``                          (not)
``429-date``        429 spike arrest, ``Retry-After`` as an HTTP-date ~2 s ahead   (not)
``429-none``        429 spike arrest, no ``Retry-After``                          (not)
``500`` … ``504``   that status (504/502 with an HTML body, as gateways send)      (not)
``timeout``         nothing for longer than the client's read timeout, then close (not)
``reset``           TCP RST before any byte of the response                      (not)
``cut-length``      ``Content-Length`` of the whole body, half the body, close     (forwarded)
``cut-close``       no ``Content-Length``, half the body, close                   (forwarded)
``datarows``        the answer with ``dataRows`` one higher than ``len(data)``     (forwarded)
``pages``           the answer with ``pages`` one higher than ``ceil(rows/100)``   (forwarded)
``redirect``        302 to the same target over ``http://``                        (not)
``503-after``       503, though the service answered (the answer is lost)       (forwarded)
``reset-after``     TCP RST, though the service answered (the answer is lost)   (forwarded)
==================  =========================================================================
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

RETRYABLE = ("429-seconds", "429-date", "429-none", "500", "502", "503", "504", "timeout", "reset")
FATAL = ("cut-length", "cut-close", "datarows", "pages")
FORWARDED = (None, "cut-length", "cut-close", "datarows", "pages", "503-after", "reset-after")

_REASONS = {
    200: "OK",
    302: "Found",
    400: "Bad Request",
    401: "Unauthorized",
    414: "URI Too Long",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass
class Arrival:
    """One request as the proxy received it."""

    number: int  # 1-based, in arrival order
    path: str
    polygon: str | None
    page: int | None
    attempt: int  # 1-based: how many times this (path, polygon, page) has arrived
    at: float = field(default_factory=time.monotonic)
    fault: str | None = None
    status: int | None = None  # what the client was sent (None: nothing)
    intact: bool = False  # the service's 200 answer was delivered whole and unchanged


Rule = Callable[[Arrival], "str | None"]


def at_arrivals(faults: dict[int, str]) -> Rule:
    """A rule: fault ``faults[n]`` on the n-th arrival."""
    return lambda arrival: faults.get(arrival.number)


class FaultProxy:
    """HTTPS on ``127.0.0.1:<free port>`` forwarding to ``upstream`` unless told otherwise.

    Parameters
    ----------
    upstream
        The real service's base URL (``https://127.0.0.1:PORT``).
    cert_dir
        The service's certificate folder (``ca.pem``, ``server.pem``, ``server-key.pem``).
    read_timeout
        How long a ``timeout`` fault stays silent (longer than the client's timeout).
    """

    def __init__(self, upstream: str, cert_dir: Path, read_timeout: float = 1.5) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 443)
        self._client_ctx = ssl.create_default_context(cafile=str(cert_dir / "ca.pem"))
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(cert_dir / "server.pem", cert_dir / "server-key.pem")
        self.read_timeout = read_timeout
        self.rule: Rule | None = None
        self.arrivals: list[Arrival] = []
        self.injected: Counter[str] = Counter()
        self._attempts: Counter[tuple[str, str | None, int | None]] = Counter()
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self.base_url = f"https://127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._acceptor.start()

    def __repr__(self) -> str:
        return f"FaultProxy({self.base_url!r}, {len(self.arrivals)} arrivals)"

    # -- control ------------------------------------------------------------------------

    def reset_log(self) -> None:
        """Forget arrivals (not injected-fault counts) and stop injecting."""
        with self._lock:
            self.rule = None
            self.arrivals.clear()
            self._attempts.clear()

    def intact(self) -> list[Arrival]:
        """Arrivals whose 200 answer reached the client whole and unchanged."""
        with self._lock:
            return [a for a in self.arrivals if a.intact]

    def close(self) -> None:
        self._stop.set()
        self._acceptor.join(5)
        for thread in list(self._threads):
            thread.join(5)
        self._sock.close()

    # -- serving ------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _serve(self, raw: socket.socket) -> None:
        raw.settimeout(10)
        try:
            conn = self._server_ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        try:
            self._handle(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    def _handle(self, conn: ssl.SSLSocket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = conn.recv(65536)
            if not chunk:
                return
            head += chunk
            if len(head) > 1 << 20:
                return
        lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        polygon = query.get("searchPolygon", [None])[0]
        page_text = query.get("page", [None])[0]
        page = int(page_text) if page_text and page_text.isdigit() else None
        with self._lock:
            ident = (parts.path, polygon, page)
            self._attempts[ident] += 1
            arrival = Arrival(
                len(self.arrivals) + 1, parts.path, polygon, page, self._attempts[ident]
            )
            self.arrivals.append(arrival)
            fault = self.rule(arrival) if self.rule is not None else None
            arrival.fault = fault
            if fault is not None:
                self.injected[fault] += 1
        if fault not in FORWARDED:
            self._fault(conn, arrival, fault, target)
            return
        status, reply_headers, body = self._forward(method, target, headers)
        if fault is None:
            self._send(conn, arrival, status, body, reply_headers)
            arrival.intact = status == 200
        elif fault in ("503-after", "reset-after"):
            self._fault(conn, arrival, fault.removesuffix("-after"), target)
        elif fault in ("datarows", "pages"):
            payload = json.loads(body)
            payload["dataRows" if fault == "datarows" else "pages"] += 1
            self._send(conn, arrival, status, json.dumps(payload).encode(), reply_headers)
        else:  # cut-length / cut-close
            half = body[: len(body) // 2]
            head_lines = [
                f"HTTP/1.1 {status} {_REASONS.get(status, 'X')}",
                "Content-Type: application/json",
                "Connection: close",
            ]
            if fault == "cut-length":
                head_lines.append(f"Content-Length: {len(body)}")
            conn.sendall(("\r\n".join(head_lines) + "\r\n\r\n").encode() + half)
            arrival.status = status

    def _forward(
        self, method: str, target: str, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        upstream = http.client.HTTPSConnection(
            *self._upstream, context=self._client_ctx, timeout=30
        )
        try:
            sent = {k: v for k, v in headers.items() if k in ("x-api-key", "accept")}
            upstream.request(method, target, headers=sent)
            response = upstream.getresponse()
            body = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() == "retry-after"}
            return response.status, kept, body
        finally:
            upstream.close()

    def _send(
        self,
        conn: ssl.SSLSocket,
        arrival: Arrival,
        status: int,
        body: bytes,
        extra: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'X')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            "Connection: close",
        ]
        lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        arrival.status = status

    def _fault(self, conn: ssl.SSLSocket, arrival: Arrival, fault: str | None, target: str) -> None:
        spike = json.dumps(
            {"status": "ERROR", "messages": ["Spike arrest violation. Allowed rate : 10ps"]}
        ).encode()
        if fault == "429-seconds":
            self._send(conn, arrival, 429, spike, {"Retry-After": "1"})
        elif fault == "429-date":
            self._send(
                conn, arrival, 429, spike, {"Retry-After": formatdate(time.time() + 2, usegmt=True)}
            )
        elif fault == "429-none":
            self._send(conn, arrival, 429, spike)
        elif fault in ("500", "503"):
            body = json.dumps({"status": "ERROR", "messages": ["injected failure"]}).encode()
            self._send(conn, arrival, int(fault), body)
        elif fault in ("502", "504"):
            body = f"<html><body><h1>{fault} {_REASONS[int(fault)]}</h1></body></html>".encode()
            self._send(conn, arrival, int(fault), body, content_type="text/html")
        elif fault == "timeout":
            self._stop.wait(self.read_timeout)
        elif fault == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif fault == "redirect":
            location = f"http://127.0.0.1:{self.port}{target}"
            self._send(conn, arrival, 302, b"", {"Location": location})
        else:
            raise ValueError(f"unknown fault {fault!r}")
