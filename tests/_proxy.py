"""A small real forward proxy on 127.0.0.1, as an organisation puts in front of its network.

It takes ``CONNECT host:port`` (what a client sends for an ``https://`` URL through an
``http://`` proxy), optionally asks for Basic credentials (a wrong or missing password: 407
``Proxy Authentication Required``), resolves the names it is told (``hosts``: e.g.
``vendor.test`` → ``127.0.0.1``, a name the client itself cannot resolve), and then either

- relays the bytes both ways untouched (a tunnel: it sees TLS only), or
- ``inspect=True``: terminates TLS itself with a certificate it mints for the host, signed by
  its own CA (``proxy.ca_pem``: what an IT department installs on its machines), reads the
  request in clear, and opens its own TLS connection to the host (trusting ``upstream_ca``).

Everything it saw in clear is in :attr:`ForwardProxy.seen` (bytes, per connection): the
witness for what a proxy's logs would hold. :attr:`ForwardProxy.connects` lists the CONNECT
targets and the answers given.
"""

from __future__ import annotations

import base64
import select
import socket
import ssl
import threading
from pathlib import Path
from typing import Any


class ForwardProxy:
    """The proxy on ``http://127.0.0.1:<port>`` (:attr:`url`; :meth:`url_with` adds
    credentials)."""

    def __init__(
        self,
        *,
        user: str | None = None,
        password: str | None = None,
        hosts: dict[str, str] | None = None,
        inspect: bool = False,
        upstream_ca: str | Path | None = None,
        folder: Path | None = None,
        drop: int = 0,
    ) -> None:
        import trustme

        self.user, self.password = user, password
        self.hosts = dict(hosts or {})
        self.inspect = inspect
        #: CONNECTs still to close without an answer (a busy proxy's hiccup); -1: all.
        self.drop = drop
        self.seen: list[bytearray] = []
        self.connects: list[tuple[str, int]] = []  # (target, status answered)
        self._lock = threading.Lock()
        self._ca = trustme.CA(organization_name="Example County IT inspection")
        self.ca_pem: Path | None = None
        if folder is not None:
            self.ca_pem = folder / "inspection-ca.pem"
            self.ca_pem.write_bytes(self._ca.cert_pem.bytes())
        self._upstream = ssl.create_default_context(
            cafile=str(upstream_ca) if upstream_ca is not None else None
        )
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="proxy")
        self._thread.start()

    def url_with(self, user: str, password: str) -> str:
        return f"http://{user}:{password}@127.0.0.1:{self.port}"

    def clear_text(self) -> bytes:
        """Every byte the proxy saw in clear, all connections together."""
        with self._lock:
            return b"".join(bytes(chunk) for chunk in self.seen)

    def close(self) -> None:
        self._closed.set()
        self._server.close()

    def __enter__(self) -> ForwardProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving -------------------------------------------------------------------------

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        seen = bytearray()
        with self._lock:
            self.seen.append(seen)
        try:
            head = self._read_head(conn)
            seen += head
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = (lines[0].split(" ") + ["", ""])[:3]
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            if method != "CONNECT":
                return self._answer(conn, target, 405, "Method Not Allowed")
            with self._lock:
                dropping, self.drop = self.drop != 0, self.drop - (self.drop > 0)
                if dropping:
                    self.connects.append((target, 0))
            if dropping:
                return  # closed without an answer
            if self.user is not None and not self._authorised(headers):
                return self._answer(
                    conn,
                    target,
                    407,
                    "Proxy Authentication Required",
                    b'Proxy-Authenticate: Basic realm="county"\r\n',
                )
            host, _, port = target.rpartition(":")
            try:
                upstream = socket.create_connection(
                    (self.hosts.get(host, host), int(port)), timeout=10
                )
            except OSError:
                return self._answer(conn, target, 502, "Bad Gateway")
            with self._lock:
                self.connects.append((target, 200))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if self.inspect:
                leaf = self._ca.issue_cert(host)
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                leaf.configure_cert(context)
                try:
                    conn = context.wrap_socket(conn, server_side=True)
                except (ssl.SSLError, OSError):
                    upstream.close()
                    return  # the client refused our certificate: nothing is forwarded
                try:
                    upstream = self._upstream.wrap_socket(upstream, server_hostname=host)
                except (ssl.SSLError, OSError):
                    upstream.close()
                    return
            self._relay(conn, upstream, seen)
        except OSError:
            pass
        finally:
            conn.close()

    def _authorised(self, headers: dict[str, str]) -> bool:
        given = headers.get("proxy-authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(token).decode().partition(":")
        except ValueError:
            return False
        return (user, password) == (self.user, self.password)

    def _answer(
        self, conn: socket.socket, target: str, status: int, reason: str, extra: bytes = b""
    ) -> None:
        with self._lock:
            self.connects.append((target, status))
        conn.sendall(
            f"HTTP/1.1 {status} {reason}\r\n".encode()
            + extra
            + b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )

    @staticmethod
    def _read_head(conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        return data

    def _relay(self, one: Any, other: Any, seen: bytearray) -> None:
        """Bytes both ways until either side closes; what the client sends is recorded
        (in clear only when the proxy inspects: otherwise it is TLS)."""
        try:
            self._pump(one, other, seen)
        finally:
            one.close()
            other.close()

    def _pump(self, one: Any, other: Any, seen: bytearray) -> None:
        pair = {one: other, other: one}
        while not self._closed.is_set():
            ready = [s for s in pair if isinstance(s, ssl.SSLSocket) and s.pending()]
            if not ready:
                ready, _, _ = select.select(list(pair), [], [], 1.0)
            for sock in ready:
                try:
                    data = sock.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    continue
                except OSError:
                    return
                if not data:
                    return
                if sock is one:
                    with self._lock:
                        seen += data
                pair[sock].sendall(data)
