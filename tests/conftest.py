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

Hypothesis runs under the profile named by ``HYPOTHESIS_PROFILE``: ``ci`` (the default) is
derandomised — the same examples on every run, so a green main stays green — and ``explore``
searches at random, longer (``HYPOTHESIS_PROFILE=explore python -m pytest tests/reliability/
test_tiling_properties.py``). Neither keeps a database in the working tree; a failure prints
the example (and its ``@reproduce_failure`` blob) to keep as an explicit ``@example``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests
from hypothesis import settings as hypothesis_settings

if TYPE_CHECKING:
    from parcelsearch_service import synth
    from parcelsearch_service.server import RunningService

# The reference service and psycopg are imported inside the fixtures that use them, never
# here: a toolkit test file that does not import them runs without either
# (tests/test_fast_loop.py checks it).

hypothesis_settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True
)
hypothesis_settings.register_profile(
    "explore", max_examples=1_000, database=None, deadline=None, print_blob=True
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_counter = itertools.count(1)


# ---------------------------------------------------------------- markers, applied here
# `service`, `postgres` and `browser` follow from what a test uses, so no test is marked by
# hand (and none is forgotten); `slow` is marked by hand on the tests over ~2 s, and here on
# the notebooks' cells (each notebook starts a kernel and a service of its own). The fast
# inner loop (README, Tests): python -m pytest -m "not slow and not browser and not postgres".

#: Fixtures that start the reference service: a test that uses one (directly or through
#: another fixture: ``make_key``, ``api_key``, ``ca_bundle``, ``https``, ...) is ``service``.
SERVICE_FIXTURES = frozenset(
    {
        "service",
        "service_276",
        "start_own_service",
        "spawn_service",
        "conformance_service",
        "conformance_276",
        "attack_service",
        "_vendor_session",
    }
)
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each collected test ``service``, ``postgres`` and ``browser`` as it needs, and
    the notebooks' cells ``slow``."""
    for item in items:
        for name in _needs(item):
            item.add_marker(name)


def _needs(item: pytest.Item) -> set[str]:
    """The markers ``item`` earns by its fixtures, its parameters and its folder."""
    used = set(getattr(item, "fixturenames", ()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    path = Path(item.path)
    needs = set()
    if used & SERVICE_FIXTURES or TESTS / "service" in path.parents or _starts_service(path):
        needs.add("service")
    if "postgres" in used or any(_is_postgresql(value) for value in params.values()):
        needs.add("postgres")  # a backend/keys_location parameter "postgresql" starts one too
    if TESTS / "browser" in path.parents:
        needs.add("browser")
    if path.suffix == ".ipynb":
        needs.add("slow")  # nbval: a kernel (and a service) of its own per notebook
    return needs


def _is_postgresql(value: object) -> bool:
    return isinstance(value, str) and value == "postgresql"


@functools.cache
def _starts_service(path: Path) -> bool:
    """A notebook that starts the reference service (``parcelsearch.local_service()``)."""
    return path.suffix == ".ipynb" and "local_service(" in path.read_text(encoding="utf-8")


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


@pytest.fixture(scope="session", autouse=True)
def _ctrl_c_is_handled() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here, as in a terminal or Jupyter. A shell that starts
    the suite in the background ignores SIGINT, and children started from it (the CLI runs
    interrupted in the tests) would inherit that; the interrupt tests need the real thing."""
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, signal.SIG_DFL, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if previous in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, previous)


_USER_FOLDERS = ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")


def _user_folders(patch: pytest.MonkeyPatch, home: Path) -> None:
    """Point platformdirs' cache, data, config and state folders (the XDG variables) into
    ``home``, and clear the variables that would choose a cache folder, profile or matching
    rule of the user's."""
    for name in _USER_FOLDERS:
        patch.setenv(name, str(home / name.removeprefix("XDG_").lower()))
    for name in ("PARCELSEARCH_CACHE_DIR", "PARCELSEARCH_PROFILE", "PARCELSEARCH_MATCH"):
        patch.delenv(name, raising=False)
    # The decision point (100 calls by default) would stop the suite's larger searches
    # before their bulk; its own tests (tests/e2e/test_price.py) set or clear it.
    patch.setenv("PARCELSEARCH_ASK_ABOVE", "1000000")


@pytest.fixture(scope="session", autouse=True)
def _session_user_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Session fixtures (the shared service) also keep out of the user's real folders."""
    with pytest.MonkeyPatch.context() as patch:
        _user_folders(patch, tmp_path_factory.mktemp("session-user"))
        yield


@pytest.fixture(autouse=True)
def _own_user_folders(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own cache, data and config folders (platformdirs reads the XDG
    variables): nothing a test learns (``vendors.json``, the ledger, saved profiles) reaches
    the user's real folders or another test, and a server that reuses a port a stand-in had
    does not inherit what was learnt about that stand-in. Children the test starts (the CLI,
    notebook kernels) inherit them."""
    _user_folders(monkeypatch, tmp_path_factory.mktemp("user"))


@pytest.fixture(scope="session")
def service_cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One certificate directory (one CA) shared by every server the tests start."""
    return tmp_path_factory.mktemp("certs")


@pytest.fixture(scope="session")
def service(
    tmp_path_factory: pytest.TempPathFactory, service_cert_dir: Path, worker_id: str
) -> Iterator[RunningService]:
    """The reference service on the bundled demo data (one per session)."""
    from parcelsearch_service.server import start_service

    root = tmp_path_factory.mktemp("service")
    with start_service(keys=root / "keys.sqlite", cert_dir=service_cert_dir) as svc:
        yield svc
        _write_calls_per_test(svc, worker_id)


def _write_calls_per_test(svc: RunningService, worker: str) -> None:
    """With ``PARCELSEARCH_TEST_CALLS=FILE``, the calls each test's keys spent on the shared
    service, from the service's own counts (keys are named after their test): a witness to
    compare two trees by (a restructuring must leave every figure as it was). Under
    pytest-xdist each worker (``worker``: pytest-xdist's ``worker_id``, ``master`` when
    not distributed) has a session service of its own and writes ``FILE.gw0``, ``FILE.gw1`` …"""
    target = os.environ.get("PARCELSEARCH_TEST_CALLS")
    if not target:
        return
    if worker != "master":
        target = f"{target}.{worker}"
    calls: dict[str, int] = {}
    for row in svc.keys.list():
        test = str(row["name"]).rsplit("-", 1)[0]
        calls[test] = calls.get(test, 0) + int(row["used_lifetime"])
    Path(target).write_text(
        json.dumps(dict(sorted(calls.items())), indent=1) + "\n", encoding="utf-8"
    )


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
    from parcelsearch_service.server import start_service

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
    from parcelsearch_service import synth

    return synth.example_fabric(rows=276)


@pytest.fixture(scope="session")
def service_276(
    tmp_path_factory: pytest.TempPathFactory, example_276: synth.Example, service_cert_dir: Path
) -> Iterator[RunningService]:
    """A session server on the 276-parcel example (same CA as ``service``)."""
    from parcelsearch_service.server import start_service

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
        import psycopg

        name = f"{prefix}_{next(self._count)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template_parcelsearch')
        return self.url(name)

    @contextlib.contextmanager
    def lost(self, url: str) -> Iterator[None]:
        """Within: the database at ``url`` (made by :meth:`database`) refuses connections and
        its sessions are ended, as a store lost mid-run; allowed again on leaving."""
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
            )
        try:
            yield
        finally:
            with psycopg.connect(self.url(), autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')

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
    import psycopg

    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL not found ({PG_BIN}/initdb missing); bash .ci/run installs it")
    root = Path(tempfile.mkdtemp(prefix="parcelsearch-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    cluster = PostgresCluster(root, _free_port())
    try:
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "initdb"),
                    "-D",
                    str(cluster.data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ]
            ),
            check=True,
            capture_output=True,
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={cluster.port} "
            f"-c unix_socket_directories={root} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=300 -c jit=off"
        )
        subprocess.run(
            _as_postgres(
                [
                    str(PG_BIN / "pg_ctl"),
                    "-D",
                    str(cluster.data),
                    "-w",
                    "-l",
                    str(root / "log"),
                    "-o",
                    options,
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE template_parcelsearch")
        try:
            with psycopg.connect(cluster.url("template_parcelsearch"), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION postgis")
        except psycopg.Error as exc:
            pytest.skip(f"PostGIS not available in {PG_BIN}: {exc}; bash .ci/run installs it")
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture
def team(postgres: PostgresCluster) -> str:
    """A fresh team store (``team init``) in a new database of the session's cluster; its URL."""
    from parcelsearch.stores.team import init_team

    url = postgres.database("team")
    init_team(url)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def keys_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh key store location on each backend: a SQLite file or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "keys.sqlite")
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.database("keys")


# ---------------------------------------------------------------- the service in processes
# The end-to-end conformance and hostile-input suites run against `parcelsearch serve
# --workers 2` in its own process, once per backend: keys and parcels in SQLite + memory, and
# keys and parcels in PostgreSQL + PostGIS. Modules opt in by overriding `service` (and
# `service_276`) with `conformance_service` (and `conformance_276`).

BACKENDS = ("sqlite", "postgresql")


class ServiceProcess:
    """``parcelsearch serve --workers N`` in a child process, with a key store handle here.

    Attributes match :class:`~parcelsearch_service.server.RunningService` where the tests
    use them: ``base_url``, ``port``, ``ca_path``, ``keys``, ``store`` (opened on first use).
    """

    def __init__(
        self,
        *,
        keys: str,
        parcels: str | None,
        cert_dir: Path,
        backend: str,
        workers: int = 2,
        match: str = "representative-point",
        busy_timeout: float | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        self.backend = backend
        self.keys_location = keys
        self.parcels_location = parcels
        self.match = match
        command = [
            sys.executable,
            "-m",
            "parcelsearch.cli",
            "serve",
            "--keys",
            keys,
            "--cert-dir",
            str(cert_dir),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--workers",
            str(workers),
            "--match",
            match,
        ]
        if parcels is not None:
            command += ["--parcels", parcels]
        if busy_timeout is not None:
            command += ["--busy-timeout", str(busy_timeout)]
        command += list(extra)
        #: The service's log (stderr), kept with the test's temporary files.
        self.log_path = cert_dir.parent / f"serve-{next(_counter)}.log"
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
            )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        found = re.match(r"serving (https://127\.0\.0\.1:(\d+)) \(CA: (.+?)\)", line)
        if not found:
            self.stop()
            raise RuntimeError(f"parcelsearch serve did not start: {line!r}")
        self.base_url, self.port, self.ca_path = found[1], int(found[2]), Path(found[3])
        from parcelsearch_service.keys import KeyStore

        self.keys = KeyStore(keys)
        self._store: Any = None

    def __repr__(self) -> str:
        return f"ServiceProcess({self.base_url!r}, backend={self.backend!r})"

    @property
    def store(self) -> Any:
        """The same parcels, opened in this process (for expected answers)."""
        if self._store is None:
            from parcelsearch_service.postgis import open_parcel_store

            self._store = open_parcel_store(self.parcels_location, match=self.match)
        return self._store

    def stop(self) -> None:
        """SIGTERM to the supervisor (it stops its workers), SIGKILL if it lingers."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: only its workers
                self.proc.wait(timeout=20)
        if self.proc.stdout:
            self.proc.stdout.close()
        if getattr(self, "keys", None) is not None:
            self.keys.close()
        if getattr(self, "_store", None) is not None:
            self._store.close()


def _backend_locations(
    backend: str, request: pytest.FixtureRequest, folder: Path, parcels: Any
) -> tuple[str, str | None]:
    """(keys, parcels) locations for ``backend``; PostgreSQL gets one database for both."""
    if backend == "sqlite":
        if parcels is None:
            return str(folder / "keys.sqlite"), None
        path = folder / "parcels.parquet"
        parcels.to_parquet(path)
        return str(folder / "keys.sqlite"), str(path)
    from parcelsearch_service.postgis import load_parcels_into

    cluster: PostgresCluster = request.getfixturevalue("postgres")
    url = cluster.database("service")
    load_parcels_into(parcels, url)
    return url, url


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``"sqlite"`` (keys in SQLite, parcels in memory) or ``"postgresql"`` (PostgreSQL and
    PostGIS)."""
    return str(request.param)


@pytest.fixture(scope="session")
def conformance_service(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    service_cert_dir: Path,
) -> Iterator[ServiceProcess]:
    """``parcelsearch serve --workers 2`` on the bundled demo parcels, on each backend."""
    keys, parcels = _backend_locations(
        backend, request, tmp_path_factory.mktemp("conformance"), None
    )
    svc = ServiceProcess(keys=keys, parcels=parcels, cert_dir=service_cert_dir, backend=backend)
    yield svc
    svc.stop()


@pytest.fixture(scope="session")
def attack_service(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    service_cert_dir: Path,
) -> Iterator[ServiceProcess]:
    """``parcelsearch serve --workers 2 --portal --access-log`` on the demo parcels, on each
    backend, for the attack suite (tests/reliability/test_attacks.py): its own stores, so
    its sign-in failures throttle no other test."""
    keys, parcels = _backend_locations(backend, request, tmp_path_factory.mktemp("attack"), None)
    svc = ServiceProcess(
        keys=keys,
        parcels=parcels,
        cert_dir=service_cert_dir,
        backend=backend,
        extra=("--portal", "--access-log"),
    )
    yield svc
    svc.stop()


@pytest.fixture(scope="session")
def conformance_276(
    backend: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    service_cert_dir: Path,
    example_276: synth.Example,
) -> Iterator[ServiceProcess]:
    """``parcelsearch serve --workers 2`` on the 276-parcel example, on each backend."""
    keys, parcels = _backend_locations(
        backend, request, tmp_path_factory.mktemp("conformance276"), example_276.parcels
    )
    svc = ServiceProcess(keys=keys, parcels=parcels, cert_dir=service_cert_dir, backend=backend)
    yield svc
    svc.stop()


@pytest.fixture
def spawn_service(
    request: pytest.FixtureRequest, tmp_path: Path, service_cert_dir: Path
) -> Iterator[Callable[..., ServiceProcess]]:
    """``spawn_service(backend, parcels=None, locations=None, workers=2, match=...,
    busy_timeout=None, extra=())``: a
    ``parcelsearch serve`` process of this test's own on ``backend`` — fresh key and parcel
    stores (``parcels``: a frame, ``None`` for the demo), or the ``(keys, parcels)``
    ``locations`` of an earlier one (a restart) — stopped at the end of the test."""
    started: list[ServiceProcess] = []

    def spawn(
        backend: str,
        parcels: Any = None,
        locations: tuple[str, str | None] | None = None,
        workers: int = 2,
        match: str = "representative-point",
        busy_timeout: float | None = None,
        extra: Sequence[str] = (),
    ) -> ServiceProcess:
        if locations is None:
            folder = tmp_path / f"own-{next(_counter)}"
            folder.mkdir()
            locations = _backend_locations(backend, request, folder, parcels)
        svc = ServiceProcess(
            keys=locations[0],
            parcels=locations[1],
            cert_dir=service_cert_dir,
            backend=backend,
            workers=workers,
            match=match,
            busy_timeout=busy_timeout,
            extra=extra,
        )
        started.append(svc)
        return svc

    yield spawn
    for svc in started:
        svc.stop()
