"""The ``requests`` session requests go through, and the response deadline's watchdog.

:func:`new_session` makes an HTTPS session with urllib3's retries off, our SSL context, bodies
read within bounds and pools that record the connection each thread sends on, so a
:class:`Watchdog` can end a read that blocks on a trickle.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connectionpool import HTTPSConnectionPool

from parcelsearch._fetch.bodies import check_size, read_capped

__all__ = ["Overdue", "Watchdog", "new_session"]


def new_session(context: ssl.SSLContext | None = None) -> requests.Session:
    """A ``requests`` session for HTTPS with urllib3's own retries off (the loop is ours).

    ``trust_env`` is off: no ``.netrc`` password, proxy or CA bundle is taken from the
    environment behind our back; :mod:`parcelsearch._fetch.network` reads the proxy and CA
    settings the user meant, and :class:`Transport` passes them with each request.
    ``context``: the SSL context to verify with (the operating system's trust store), when
    no CA bundle is given.
    """
    session = requests.Session()
    session.trust_env = False
    adapter = _Adapter(context, max_retries=0, pool_connections=4, pool_maxsize=32)
    session.mount("https://", adapter)
    session.hooks["response"].append(read_capped)  # every body read within bounds
    return session


class _Adapter(HTTPAdapter):
    """``requests``' adapter with an SSL context of our choosing (direct and through a
    proxy) and the response deadline's tracked pools."""

    def __init__(self, context: ssl.SSLContext | None, **kwargs: Any) -> None:
        self._context = context  # before the base class makes its pool manager
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self._context is not None:
            kwargs["ssl_context"] = self._context
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {  # the response deadline's watchdog
            **self.poolmanager.pool_classes_by_scheme,
            "https": _TrackedPool,
        }

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        if self._context is not None:
            kwargs["ssl_context"] = self._context
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = {**manager.pool_classes_by_scheme, "https": _TrackedPool}
        return manager


class Overdue(Exception):  # noqa: N818 - a signal, not an error
    """The response deadline passed while its body was being read."""


#: Bytes read from a body at a time when a deadline applies.
_CHUNK = 65536
#: The connection each thread sends on now (sessions made by :func:`new_session` record it),
#: so a watchdog can end a read that blocks on it.
_IN_USE: dict[int, object] = {}


class _TrackedPool(HTTPSConnectionPool):
    """urllib3's HTTPS pool, recording the connection a thread takes in :data:`_IN_USE`."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _IN_USE[threading.get_ident()] = conn
        return conn


class Watchdog:
    """The response deadline of one attempt, connect, head and body: at the deadline the
    socket of the connection this thread sends on is shut, which ends a read that blocks on
    a trickle (a read timeout alone restarts with every byte); the attempt then raises
    :class:`Overdue`. ``seconds=None``: no deadline."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + (seconds or 0.0)
        self.cut = threading.Event()
        self._thread = threading.get_ident()
        self._timer: threading.Timer | None = None
        self._response: requests.Response | None = None

    def __enter__(self) -> Watchdog:
        if self.seconds is not None:
            _IN_USE.pop(self._thread, None)
            self._timer = threading.Timer(self.seconds, self._expire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        _IN_USE.pop(self._thread, None)
        if error is None or not self.cut.is_set():
            return  # an answer read whole is kept, however close to the deadline
        if self._response is not None:
            self._response.close()
        if isinstance(error, requests.exceptions.RequestException | OSError):
            raise Overdue() from None  # the read the watchdog ended

    def _expire(self) -> None:
        self.cut.set()
        sock = _socket_of(self._response) or getattr(_IN_USE.get(self._thread), "sock", None)
        if isinstance(sock, socket.socket):
            try:  # the plain socket's shutdown: wakes the blocked read, leaves TLS state alone
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def read(self, response: requests.Response) -> None:
        """Read ``response``'s body whole within the deadline (else :class:`Overdue`)."""
        if getattr(response, "_content", False) is not False:  # read already (an adapter
            return  # that builds its answers, as tests do)
        self._response = response
        chunks = []
        for chunk in response.iter_content(_CHUNK):
            chunks.append(chunk)
            check_size(response, sum(map(len, chunks)))
            if self.cut.is_set() or time.monotonic() > self.deadline:
                self.cut.set()
                raise Overdue()
        if self.cut.is_set():  # the head or body was ended by the watchdog, not the server
            raise Overdue()
        response._content = b"".join(chunks)  # what response.content returns from now on


def _socket_of(response: requests.Response | None) -> socket.socket | None:
    """The socket a streamed response is read from (``None`` when the adapter has none)."""
    connection = getattr(getattr(response, "raw", None), "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None
