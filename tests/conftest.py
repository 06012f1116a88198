"""Shared fixtures: the reference service running under uvicorn over HTTPS on 127.0.0.1.

- ``service``: one :class:`RunningService` on the bundled demo data for the session;
- ``make_key(key_type="demo", **overrides)``: a fresh, uniquely named key on ``service``
  (a ``str`` whose ``.name`` is the key's name, as the quota message and
  ``service.keys.requests(name)`` use it);
- ``api_key``: a fresh production key with a quota of 100,000;
- ``ca_bundle``: the path (str) of the service's CA certificate;
- ``https``: a ``requests.Session`` that verifies against ``ca_bundle`` (``trust_env`` off:
  ``REQUESTS_CA_BUNDLE`` in the environment would otherwise override ``verify``);
- ``start_own_service(parcels=..., markets=..., match=...)``: a server of your own on custom
  parcels (stopped at the end of the test);
- ``example_276`` / ``service_276``: the issue's 276-parcel example and a session server on it.

Every test that spends quota should take its own key from ``make_key`` / ``api_key``.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from parcelsearch.service import synth
from parcelsearch.service.server import RunningService, start_service

_counter = itertools.count(1)


class ApiKey(str):
    """A plaintext key (a ``str``) that also knows its name."""

    name: str

    def __new__(cls, key: str, name: str) -> ApiKey:
        self = super().__new__(cls, key)
        self.name = name
        return self


def _key_name(request: pytest.FixtureRequest) -> str:
    test = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:48].strip("-")
    return f"{test}-{next(_counter)}"


@pytest.fixture(scope="session")
def service_cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One certificate directory (one CA) shared by every server the tests start."""
    return tmp_path_factory.mktemp("certs")


@pytest.fixture(scope="session")
def service(
    tmp_path_factory: pytest.TempPathFactory, service_cert_dir: Path
) -> Iterator[RunningService]:
    """The reference service on the bundled demo data (one per session)."""
    root = tmp_path_factory.mktemp("service")
    with start_service(keys=root / "keys.sqlite", cert_dir=service_cert_dir) as svc:
        yield svc


@pytest.fixture
def make_key(service: RunningService, request: pytest.FixtureRequest) -> Callable[..., ApiKey]:
    """``make_key(key_type="demo", **overrides)``: a fresh key on ``service``."""

    def make(key_type: str = "demo", **overrides: Any) -> ApiKey:
        name = overrides.pop("name", None) or _key_name(request)
        return ApiKey(service.keys.create(name, key_type=key_type, **overrides), name)

    return make


@pytest.fixture
def api_key(make_key: Callable[..., ApiKey]) -> ApiKey:
    """A fresh production key with a generous quota (100,000 calls)."""
    return make_key("production", quota=100_000)


@pytest.fixture(scope="session")
def ca_bundle(service: RunningService) -> str:
    """The CA certificate (PEM path) of ``service`` and of every other test server."""
    return str(service.ca_path)


@pytest.fixture
def https(ca_bundle: str) -> Iterator[requests.Session]:
    """A session verifying against the service's CA (environment CA settings ignored)."""
    with requests.Session() as session:
        session.trust_env = False
        session.verify = ca_bundle
        yield session


@pytest.fixture
def start_own_service(
    tmp_path: Path, service_cert_dir: Path
) -> Iterator[Callable[..., RunningService]]:
    """``start_own_service(parcels=None, markets=None, match=..., keys=None)``: a server of
    this test's own (keys in ``tmp_path``, certificates from the shared CA unless given, so
    ``https`` and ``ca_bundle`` work), stopped afterwards."""
    started: list[RunningService] = []

    def start(**kwargs: Any) -> RunningService:
        kwargs.setdefault("keys", tmp_path / "keys.sqlite")
        kwargs.setdefault("cert_dir", service_cert_dir)
        svc = start_service(**kwargs)
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.stop()


@pytest.fixture(scope="session")
def example_276() -> synth.Example:
    """276 parcels inside one ring (a 6-unit condominium among them) and 24 outside."""
    return synth.example_fabric(rows=276)


@pytest.fixture(scope="session")
def service_276(
    tmp_path_factory: pytest.TempPathFactory, example_276: synth.Example, service_cert_dir: Path
) -> Iterator[RunningService]:
    """A session server on the 276-parcel example (same CA as ``service``)."""
    root = tmp_path_factory.mktemp("service276")
    with start_service(
        parcels=example_276.parcels, keys=root / "keys.sqlite", cert_dir=service_cert_dir
    ) as svc:
        yield svc


# ---------------------------------------------------------------- PostgreSQL / PostGIS
# A throwaway cluster for the session: initdb in a temporary folder, a free 127.0.0.1 port,
# PostGIS created, stopped by its postmaster pid and removed at the end. Tests that need it
# skip (saying why) only when PostgreSQL or PostGIS cannot be found on this machine.

PG_BIN = Path(os.environ.get("PARCELSEARCH_PG_BIN", "/usr/lib/postgresql/15/bin"))


class PostgresCluster:
    """A running throwaway cluster; :meth:`database` makes a fresh database with PostGIS."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.data = root / "data"
        self._count = itertools.count(1)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def database(self, prefix: str = "t") -> str:
        """A new, empty database (PostGIS enabled); its URL."""
        name = f"{prefix}_{next(self._count)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template_parcelsearch')
        return self.url(name)

    def stop(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGINT)  # fast shutdown
            for _ in range(300):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
        shutil.rmtree(self.root, ignore_errors=True)


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its tools as the ``postgres`` user then."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """The session's throwaway PostgreSQL + PostGIS cluster."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL not found ({PG_BIN}/initdb missing); .ci/run installs it")
    root = Path(tempfile.mkdtemp(prefix="parcelsearch-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    cluster = PostgresCluster(root, _free_port())
    try:
        subprocess.run(
            _as_postgres([str(PG_BIN / "initdb"), "-D", str(cluster.data), "-U", "postgres",
                          "-A", "trust", "--no-sync", "-E", "UTF8"]),
            check=True, capture_output=True,
        )
        options = (f"-c listen_addresses=127.0.0.1 -c port={cluster.port} "
                   f"-c unix_socket_directories={root} -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off -c max_connections=300 -c jit=off")
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(cluster.data), "-w", "-l",
                          str(root / "log"), "-o", options, "start"]),
            check=True, capture_output=True,
        )
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE template_parcelsearch")
        try:
            with psycopg.connect(cluster.url("template_parcelsearch"), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION postgis")
        except psycopg.Error as exc:
            pytest.skip(f"PostGIS not available in {PG_BIN}: {exc}; .ci/run installs it")
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def keys_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh key store location on each backend: a SQLite file or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "keys.sqlite")
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.database("keys")
