"""Run the service under uvicorn over HTTPS: in a background thread (:func:`start_service`),
or in the foreground with one or more worker processes on one socket (:func:`run_workers`,
used by ``parcelsearch serve --workers N``).

Examples
--------
>>> import tempfile, pathlib, requests
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> with start_service(keys=tmp / "keys.sqlite", cert_dir=tmp / "certs") as svc:  # doctest: +SKIP
...     key = svc.keys.create("me")
...     requests.get(svc.base_url + "/v1/markets", headers={"x-api-key": key},
...                  verify=svc.ca_path).json()["status"]
'OK'
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import geopandas as gpd
import uvicorn

from parcelsearch.errors import ConfigurationError
from parcelsearch_service.app import create_app
from parcelsearch_service.http_protocol import (
    KEEP_ALIVE_TIMEOUT,
    MAX_REQUEST_HEAD,
    EnvelopeH11Protocol,
)
from parcelsearch_service.keys import BUSY_TIMEOUT, KeyStore, default_keys_location
from parcelsearch_service.postgis import PostgisParcelStore, open_parcel_store
from parcelsearch_service.store import ParcelStore, fabric_markets
from parcelsearch_service.tls import default_cert_dir, ensure_certificates

__all__ = ["start_service", "RunningService", "build_server", "bind_socket", "run_workers"]

#: Seconds a worker process checks that its supervisor is still alive (a fallback for
#: ``PR_SET_PDEATHSIG``, which stops it at once on Linux).
ORPHAN_CHECK = 1.0


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (``port=0``: a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: without it a response written in two TLS records
    # waits for the client's delayed ACK (~40 ms a request).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server, calling back once it listens."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._on_ready is not None and self.started:
            self._on_ready()


def build_server(
    app: Any,
    cert: Path,
    key: Path,
    on_ready: Callable[[], None] | None = None,
    access_log: bool = False,
    forwarded_allow_ips: Sequence[str] = (),
) -> uvicorn.Server:
    """A uvicorn server for ``app`` over TLS (h11, request heads capped and timed, no header
    logging).

    ``forwarded_allow_ips``: the addresses (or networks, or ``*``) of the proxies whose
    ``X-Forwarded-For``/``X-Forwarded-Proto`` are believed; by default none, so a client
    cannot choose the address its sign-in attempts are counted against.
    """
    trusted = [ip.strip() for ip in forwarded_allow_ips if ip.strip()]
    config = uvicorn.Config(
        app,
        http=EnvelopeH11Protocol,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or [],
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        lifespan="on",
        log_config=None,
        access_log=access_log,
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
        loop="asyncio",
        ws="none",  # the service speaks no WebSocket: no websockets implementation is loaded
    )
    return _Server(config, on_ready)


def run_workers(
    build: Callable[[], uvicorn.Server],
    sock: socket.socket,
    workers: int = 1,
    before_fork: Callable[[], None] | None = None,
) -> int:
    """Serve on ``sock`` with ``workers`` processes until interrupted; the exit status.

    With one worker the server runs in this process. With more, this process forks that
    many children after ``before_fork`` (which must close database connections: they cannot
    cross a fork); each builds its server with ``build`` and accepts on the shared socket, so
    the kernel spreads connections over them. SIGTERM or SIGINT to this process stops them
    all; if one worker dies the others are stopped too and the status is non-zero. A worker
    whose supervisor dies (even by SIGKILL) stops too (:func:`_die_with_parent`), so no
    orphan keeps the port.
    """
    if workers < 1:
        raise ConfigurationError(f"--workers must be at least 1, got {workers}")
    if workers == 1:
        server = build()
        server.run(sockets=[sock])
        return 0 if server.started else 1
    if before_fork is not None:
        before_fork()
    sys.stdout.flush()
    sys.stderr.flush()
    children: list[int] = []
    supervisor = os.getpid()
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # the worker: serve, then leave without running the parent's cleanup
            status = 1
            try:
                _die_with_parent(supervisor)
                server = build()
                server.run(sockets=[sock])
                status = 0 if server.started else 1
            finally:
                os._exit(status)
        children.append(pid)
    return _supervise(children)


#: ``prctl`` option: the signal a process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Make this (forked) process stop when ``parent`` dies: SIGTERM from the kernel on Linux
    (``prctl(PR_SET_PDEATHSIG)``), and a watchdog thread checking the parent's pid every
    :data:`ORPHAN_CHECK` seconds anywhere (it also covers a parent gone before the ``prctl``)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watchdog alone
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_CHECK)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parcelsearch-orphan-watch", daemon=True).start()


def _supervise(children: list[int]) -> int:
    """Wait for the workers; forward SIGTERM/SIGINT; stop all when one exits."""
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    worst = 0
    try:
        alive = set(children)
        while alive:
            pid, status = os.wait()
            alive.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            if not stopping:
                worst = worst or (code or 1)
                stop(signal.SIGTERM, None)
            elif code not in (0, -signal.SIGTERM, -signal.SIGINT):
                worst = worst or code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0 if worst == 0 else 1


class RunningService:
    """A service running under uvicorn in a background thread.

    Attributes
    ----------
    base_url
        ``https://HOST:PORT`` (no trailing slash).
    ca_path
        The CA certificate to verify the server against.
    keys
        The :class:`KeyStore` the service uses.
    store
        The :class:`ParcelStore` it searches.
    """

    def __init__(
        self,
        server: uvicorn.Server,
        sock: socket.socket,
        host: str,
        ca_path: Path,
        keys: KeyStore,
        store: ParcelStore | PostgisParcelStore,
    ) -> None:
        self._server = server
        self._socket = sock
        self.host = host
        self.port: int = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        self.base_url = f"https://{shown}:{self.port}"
        self.ca_path = ca_path
        self.keys = keys
        self.store = store
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"parcelsearch-service-{self.port}", daemon=True
        )

    def __repr__(self) -> str:
        state = "running" if self._thread.is_alive() else "stopped"
        return f"RunningService({self.base_url!r}, {len(self.store):,} parcels, {state})"

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc
        finally:
            self._ready.set()

    def start(self, timeout: float = 30.0) -> RunningService:
        """Start serving; returns once the server accepts connections."""
        self._server._on_ready = self._ready.set  # type: ignore[attr-defined]
        self._thread.start()
        if not self._ready.wait(timeout) or not self._server.started:
            self.stop()
            raise ConfigurationError(f"the service did not start: {self._error!r}")
        return self

    def stop(self, grace: float = 1.0, timeout: float = 10.0) -> None:
        """Stop serving and wait for the server thread (idempotent).

        Requests in flight get ``grace`` seconds to finish; idle keep-alive connections
        (whose TLS close would wait for the client) are then dropped.
        """
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(grace)
            if self._thread.is_alive():
                self._server.force_exit = True
                self._thread.join(timeout)
        self._socket.close()
        self.keys.close()
        self.store.close()

    def __enter__(self) -> RunningService:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start_service(
    parcels: str | Path | gpd.GeoDataFrame | None = None,
    markets: str | Path | Sequence[str] | None = None,
    keys: str | Path | None = None,
    cert_dir: str | Path | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    match: str = "representative-point",
    busy_timeout: float = BUSY_TIMEOUT,
    portal: bool = False,
    forwarded_allow_ips: Sequence[str] = (),
) -> RunningService:
    """Start the service in a background thread and return once it listens.

    Parameters
    ----------
    parcels
        ``None`` (the bundled demo parcels), a parcels file, a GeoDataFrame or a
        ``postgresql://`` URL (parcels loaded with ``parcelsearch parcels load``).
    markets
        ``None`` (the markets of a parcels file's ``market`` column, as ``parcels synth``
        names them, else the bundled markets list), a markets file or a list of names.
    keys
        The key store: a SQLite file (created if missing) or a ``postgresql://`` URL.
        Defaults to ``keys.sqlite`` in the per-user service directory.
    cert_dir
        Where the CA and server certificate are written (reused if present). Defaults to the
        per-user service directory's ``certs``.
    host, port
        Where to listen; ``port=0`` picks a free port.
    match
        ``"representative-point"`` or ``"intersects"``.
    busy_timeout
        Seconds a request waits for a key store lock before the service answers 503.
    portal
        Also serve the developer portal at ``/portal/``.
    forwarded_allow_ips
        Addresses of the proxies whose ``X-Forwarded-*`` headers are believed (none by
        default).
    """
    key_store = KeyStore(
        default_keys_location() if keys is None else keys, busy_timeout=busy_timeout
    )
    cert_path = Path(default_cert_dir() if cert_dir is None else cert_dir)
    certs = ensure_certificates(cert_path, [host])
    store = open_parcel_store(parcels, match=match)
    if markets is None and isinstance(parcels, str | Path):  # a fabric brings its markets
        markets = fabric_markets([parcels])
    app = create_app(store, markets, key_store, portal=portal, portal_ca=certs.ca)
    sock = bind_socket(host, port)
    server = build_server(app, certs.cert, certs.key, forwarded_allow_ips=forwarded_allow_ips)
    return RunningService(server, sock, host, certs.ca, key_store, store).start()
