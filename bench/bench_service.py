"""Benchmark the reference service from outside, against its own stack's ceiling.

The service runs as ``parcelsearch serve`` in its own process(es); the load comes from wrk
(Debian's ``wrk``) in another process, over HTTPS with keep-alive. The polygon mix has more
distinct polygons (default 3,000) than the hit-list cache holds (512), cycled in order, so
every search is cold; the requests are spread over 2,000 production keys (10 calls/s each,
as the vendor's), so the spike-arrest check counts a real window and no request is refused.
In the same run, the stack's ceiling is measured: a trivial Starlette
endpoint on the same uvicorn + TLS setup (:func:`parcelsearch_service.server.build_server`,
same worker count). For each configuration it reports requests/s at saturation and p50/p99
at half that rate, each also as a ratio to the ceiling (the ceiling's latency measured at
the same offered rate), and writes the table to ``bench/RESULTS.md`` (section ``service``).

Configurations: embedded store with 1 M parcels (keys in SQLite); PostGIS with 1 M and 10 M
parcels (keys in PostgreSQL too, a throwaway cluster in a temp folder). Each with one worker
on a core of its own and wrk on the other (as a service and its remote clients would be;
the ceiling's server gets the same core), one worker sharing both cores with wrk, and two
workers sharing both cores with wrk. PostgreSQL is never pinned. wrk's two threads each
cycle through their own half of the polygons.

    python bench/bench_service.py [--parcels 1000000] [--postgis 1000000,10000000]
                                  [--polygons 3000] [--seconds 10] [--connections 8]
    python bench/bench_service.py --alternate 3 [--fabric parcels.parquet]

``--alternate N`` runs issue 28's check alone: the embedded service (1 M parcels, keys in
SQLite, one worker) and the ceiling, both sharing the two cores with wrk, measured side by
side in N rounds (ceiling, service, ceiling at saturation, then both at half load); it
prints each round's ratio, p99 at half load and non-2xx, writes section
``service-alternate``, and exits 1 unless every round meets the target. ``--fabric`` keeps
the generated parcels file for the next run.

Needs ``wrk`` (``apt-get install wrk``) and PostgreSQL 15 + PostGIS 3 for the PostGIS rows.
Targets (issue 12): embedded cold mix >= 0.35 x ceiling with one worker; PostGIS 10 M >=
0.15 x ceiling; p99 <= 10 ms at half load everywhere. Issue 28: the embedded one-worker row
>= 0.35 x ceiling on shared cores in each of three alternating rounds, 0 non-2xx.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import geopandas as gpd
import numpy as np
import psycopg
import shapely
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import write_section  # noqa: E402

from parcelsearch._wire import ring_json  # noqa: E402
from parcelsearch_service import synth  # noqa: E402
from parcelsearch_service.keys import KeyStore  # noqa: E402
from parcelsearch_service.postgis import TABLE, index_table, prepare_table  # noqa: E402
from parcelsearch_service.server import bind_socket, build_server, run_workers  # noqa: E402
from parcelsearch_service.tls import ensure_certificates  # noqa: E402

PG_BIN = Path(os.environ.get("PARCELSEARCH_PG_BIN", "/usr/lib/postgresql/15/bin"))
CLI = [sys.executable, "-m", "parcelsearch.cli"]
CEILING_PATH = "/ping"


# ----------------------------------------------------------------------------- servers


def ceiling_main(cert_dir: Path, workers: int) -> int:
    """Child mode: a trivial endpoint on the service's uvicorn + TLS setup."""

    async def ping(request: Request) -> Response:
        return Response(b'{"status":"OK"}', media_type="application/json")

    app = Starlette(routes=[Route(CEILING_PATH, ping)])
    certs = ensure_certificates(cert_dir, ["127.0.0.1"])
    sock = bind_socket("127.0.0.1", 0)
    print(f"serving https://127.0.0.1:{sock.getsockname()[1]} (CA: {certs.ca})", flush=True)
    return run_workers(lambda: build_server(app, certs.cert, certs.key), sock, workers)


class Server:
    """A server process that prints ``serving https://HOST:PORT …`` when it listens."""

    def __init__(self, command: list[str], log: Path, cpus: set[int] | None = None) -> None:
        with log.open("w") as err:
            self.proc = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
                preexec_fn=_on(cpus),
            )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        found = re.match(r"serving (https://\S+) ", line)
        if not found:
            self.stop()
            raise RuntimeError(f"{command[3:5]} did not start ({line!r}); see {log}")
        self.base_url = found[1]

    @property
    def pid(self) -> int:
        """The server's process id (with one worker, the process that serves)."""
        return self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: it and its workers
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


class Cluster:
    """A throwaway PostgreSQL + PostGIS cluster in a temp folder on a free port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        data = root / "data"
        self._run(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        )
        # synchronous_commit=off matches the SQLite store's synchronous=NORMAL in WAL mode
        # (a crash may lose the last commits, never corrupt); fsync stays on.
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={root} -c synchronous_commit=off "
            "-c max_connections=300 -c shared_buffers=1GB -c jit=off "
            "-c max_wal_size=4GB -c maintenance_work_mem=1GB"
        )
        self._run(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(data),
                "-w",
                "-l",
                str(root / "log"),
                "-o",
                options,
                "start",
            ]
        )
        self.pid = int((data / "postmaster.pid").read_text().split()[0])
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench")
        with psycopg.connect(self.url("bench"), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION postgis")

    @staticmethod
    def _run(command: list[str]) -> None:
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True)

    def url(self, dbname: str = "bench") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        os.kill(self.pid, signal.SIGINT)  # fast shutdown, by the postmaster's pid
        for _ in range(600):
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


# ----------------------------------------------------------------------------- load


@dataclass
class Run:
    """One wrk run: requests/s, latency percentiles (ms), non-2xx answers."""

    rate: float
    p50: float
    p99: float
    errors: int


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _on(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that keeps the child (and its threads and workers) on ``cpus``."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


@dataclass(frozen=True)
class Layout:
    """Where the processes run: ``server`` (service or ceiling) and ``wrk`` on their own
    cores, or (``None``) wherever the kernel puts them."""

    server: set[int] | None = None
    wrk: set[int] | None = None

    @property
    def label(self) -> str:
        if self.server is None:
            return "shared"
        return f"server on core {min(self.server)}, wrk on core {min(self.wrk or {0})}"


#: On this 2-core machine a one-worker server and wrk can each have a core of their own, as a
#: service and its remote clients would; two workers need both cores, so they share with wrk.
SHARED = Layout()
APART = Layout({0}, {1})


def _wrk(
    base_url: str, script: Path, seconds: float, connections: int, layout: Layout = SHARED
) -> Run:
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds:g}s",
            "--latency",
            "-s",
            str(script),
            base_url,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
        preexec_fn=_on(layout.wrk),
    ).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])  # type: ignore[index]
    pct = {
        p: float(v) * _UNITS[u]
        for p, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, flags=re.M)
    }
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    timeouts = re.search(r"timeout (\d+)", out)
    bad = (int(errors[1]) if errors else 0) + (int(timeouts[1]) if timeouts else 0)
    return Run(rate, pct["50"], pct["99"], bad)


def wrk_script(
    folder: Path, name: str, paths: list[str], keys: list[str], delay_ms: float | None
) -> Path:
    """A wrk Lua script cycling through ``paths`` and, beside them, ``keys``: each of wrk's
    two threads through its own half of the paths, so that neither asks for a polygon the
    other asked for recently (each half is more than the hit-list cache holds: every search
    is cold, however the threads' paces drift)."""
    rows = ",\n".join(f'  "{p}"' for p in paths)
    key_rows = ",\n".join(f'  "{k}"' for k in keys)
    header = '["x-api-key"] = keys[n % #keys + 1]' if keys else ""
    delay = f"function delay() return {delay_ms:.3f} end\n" if delay_ms else ""
    text = (
        f"local paths = {{\n{rows}\n}}\nlocal keys = {{\n{key_rows}\n}}\nlocal i = 0\n"
        "local threads = 0\nlocal half = math.max(1, math.floor(#paths / 2))\n"
        "function setup(thread)\n  thread:set('first', (threads % 2) * half)\n"
        "  threads = threads + 1\nend\n"
        "function init(args) i = 0 end\n"
        "function request()\n  i = i % half + 1\n"
        "  local n = math.min(#paths, first + i)\n"
        f"  return wrk.format('GET', paths[n], {{{header}}})\nend\n{delay}"
    )
    path = folder / f"{name}.lua"
    path.write_text(text)
    return path


def _half(
    base_url: str,
    folder: Path,
    name: str,
    paths: list[str],
    keys: list[str],
    seconds: float,
    connections: int,
    target: float,
    layout: Layout,
) -> Run:
    """``target`` requests/s offered: each connection waits a delay after every answer
    (rate = connections / (delay + latency)); a short probe measures the latency part."""
    first = connections * 1000.0 / target
    probe = _wrk(
        base_url, wrk_script(folder, f"{name}-probe", paths, keys, first), 3, connections, layout
    )
    latency_ms = max(0.0, connections * 1000.0 / probe.rate - first)
    delay_ms = max(0.01, connections * 1000.0 / target - latency_ms)
    return _wrk(
        base_url,
        wrk_script(folder, f"{name}-half", paths, keys, delay_ms),
        seconds,
        connections,
        layout,
    )


def measure(
    service_url: str,
    ceiling_url: str,
    folder: Path,
    paths: list[str],
    keys: list[str],
    seconds: float,
    connections: int,
    layout: Layout = SHARED,
) -> tuple[tuple[Run, Run], tuple[Run, Run]]:
    """(ceiling, service) × (saturation, half load). The ceiling's saturation is measured
    just before and just after the service's and averaged, so a machine whose background
    load drifts during the run skews the ratio less; both get the same offered half load."""
    svc_sat_script = wrk_script(folder, "svc-sat", paths, keys, None)
    ceil_script = wrk_script(folder, "ceil-sat", [CEILING_PATH], [], None)
    _wrk(service_url, svc_sat_script, 2, connections, layout)  # warm-up (both)
    _wrk(ceiling_url, ceil_script, 2, connections, layout)
    before = _wrk(ceiling_url, ceil_script, seconds, connections, layout)
    service = _wrk(service_url, svc_sat_script, seconds, connections, layout)
    after = _wrk(ceiling_url, ceil_script, seconds, connections, layout)
    ceiling = Run(
        (before.rate + after.rate) / 2,
        (before.p50 + after.p50) / 2,
        (before.p99 + after.p99) / 2,
        before.errors + after.errors,
    )
    target = service.rate / 2
    service_half = _half(
        service_url, folder, "svc", paths, keys, seconds, connections, target, layout
    )
    ceiling_half = _half(
        ceiling_url, folder, "ceil", [CEILING_PATH], [], seconds, connections, target, layout
    )
    return (ceiling, ceiling_half), (service, service_half)


# ----------------------------------------------------------------------------- data


def search_paths(parcels_file: Path, count: int, seed: int = 12) -> list[str]:
    """``count`` distinct small squares centred on random parcels' representative points."""
    frame = gpd.read_parquet(parcels_file)
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(frame), size=count, replace=False)
    points = shapely.point_on_surface(np.asarray(frame.geometry.array, dtype=object)[picks])
    halves = rng.uniform(0.0004, 0.0015, count)
    return [_square_path(p.x, p.y, h) for p, h in zip(points, halves, strict=True)]


def fabric_file(folder: Path, n: int, reuse: Path | None = None) -> tuple[Path, float]:
    """``n`` synthetic parcels in a parquet file, and the seconds taken to make it: in
    ``folder``, or at ``reuse`` (read from there when a file is already there)."""
    started = time.perf_counter()
    path = reuse or folder / f"parcels-{n}.parquet"
    if reuse is None or not reuse.exists():
        synth.large_fabric(n).to_parquet(path)
    return path, time.perf_counter() - started


# ----------------------------------------------------------------------------- main


@dataclass
class Row:
    label: str
    workers: int
    layout: Layout
    ceiling: tuple[Run, Run]
    service: tuple[Run, Run]


def service_process(
    folder: Path, keys: str, parcels: str, workers: int, certs: Path, layout: Layout
) -> Server:
    return Server(
        [
            *CLI,
            "serve",
            "--keys",
            keys,
            "--parcels",
            parcels,
            "--workers",
            str(workers),
            "--port",
            "0",
            "--host",
            "127.0.0.1",
            "--cert-dir",
            str(certs),
        ],
        folder / f"serve-{time.monotonic_ns()}.log",
        layout.server,
    )


def _ceiling(folder: Path, workers: int, certs: Path, layout: Layout) -> Server:
    return Server(
        [
            sys.executable,
            __file__,
            "--ceiling-server",
            "--workers",
            str(workers),
            "--cert-dir",
            str(certs),
        ],
        folder / f"ceiling-{workers}.log",
        layout.server,
    )


#: The rows' (workers, layout): one worker on a core of its own and sharing, two sharing.
CONFIGURATIONS = ((1, APART), (1, SHARED), (2, SHARED))


def _bench_one(
    folder: Path,
    label: str,
    keys: str,
    parcels: str,
    workers: int,
    layout: Layout,
    paths: list[str],
    args: argparse.Namespace,
    certs: Path,
) -> Row:
    if layout.server is not None and (os.cpu_count() or 1) < 2:
        layout = SHARED
    api_keys = analyst_keys(keys, args.keys_count)
    service = service_process(folder, keys, parcels, workers, certs, layout)
    try:
        ceiling_server = _ceiling(folder, workers, certs, layout)
        try:
            ceiling, served = measure(
                service.base_url,
                ceiling_server.base_url,
                folder,
                paths,
                api_keys,
                args.seconds,
                args.connections,
                layout,
            )
        finally:
            ceiling_server.stop()
    finally:
        service.stop()
    row = Row(label, workers, layout, ceiling, served)
    print(_line(row), flush=True)
    return row


def analyst_keys(location: str, count: int) -> list[str]:
    """``count`` new keys with the production rate (10 calls/s each) and a quota the run
    cannot reach: the load of many analysts, each within the rate the gateway allows."""
    store = KeyStore(location)
    prefix = f"bench-{time.monotonic_ns()}"
    try:
        return [store.create(f"{prefix}-{n}", "production", quota=10**12) for n in range(count)]
    finally:
        store.close()


def _line(row: Row) -> str:
    (c_sat, c_half), (s_sat, s_half) = row.ceiling, row.service
    return (
        f"| {row.label} | {row.workers} | {row.layout.label} | {s_sat.rate:,.0f} | "
        f"{c_sat.rate:,.0f} | {s_sat.rate / c_sat.rate:.2f} | {s_half.rate:,.0f} | "
        f"{s_half.p50:.2f} | "
        f"{s_half.p99:.2f} | {s_half.p50 / c_half.p50:.1f} | {s_half.p99 / c_half.p99:.1f} "
        f"| {s_sat.errors + s_half.errors} |"
    )


HEAD = (
    "| configuration | workers | cores | service req/s (saturation) | ceiling req/s | "
    "ratio | half load req/s | p50 ms | p99 ms | p50 / ceiling p50 | p99 / ceiling p99 | "
    "non-2xx |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parcels",
        type=int,
        default=1_000_000,
        help="parcels for the embedded rows (0: no embedded rows)",
    )
    parser.add_argument(
        "--postgis",
        default="1000000,10000000",
        help="PostGIS table sizes, comma-separated ('' for none)",
    )
    parser.add_argument(
        "--postgis-in-sql",
        default="",
        help="PostGIS table sizes generated inside the database (a grid of "
        "squares: generating them with synth takes too long here)",
    )
    parser.add_argument("--polygons", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument(
        "--keys-count",
        type=int,
        default=2000,
        help="production keys (10 calls/s each) the requests are spread over",
    )
    parser.add_argument(
        "--alternate",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only issue 28's check: ROUNDS rounds of ceiling, service, "
        "ceiling (embedded, 1 worker, shared cores), each round's ratio, p99 "
        "at half load and non-2xx (section service-alternate)",
    )
    parser.add_argument(
        "--fabric",
        type=Path,
        default=None,
        help="the embedded parcels file to reuse (written there if missing)",
    )
    parser.add_argument("--ceiling-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--cert-dir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ceiling_server:
        return ceiling_main(args.cert_dir, args.workers)
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install wrk", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="bench-service-"))
    certs = folder / "certs"
    rows: list[Row] = []
    notes: list[str] = [
        f"1-min load average at the start: {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores (the machine may be shared with other jobs)"
    ]

    def record(row: Row) -> None:  # after every row, so an interrupted run keeps its figures
        rows.append(row)
        write_section("service", _report(rows, notes, args))

    if args.alternate:
        try:
            return alternate(folder, args, certs)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    try:
        if args.parcels:
            parcels_file, took = fabric_file(folder, args.parcels, args.fabric)
            notes.append(f"embedded: {args.parcels:,} parcels generated in {took:.0f} s")
            paths = search_paths(parcels_file, args.polygons)
            for number, (workers, layout) in enumerate(CONFIGURATIONS):
                record(
                    _bench_one(
                        folder,
                        f"embedded {args.parcels / 1e6:g} M",
                        str(folder / f"keys-{number}.sqlite"),
                        str(parcels_file),
                        workers,
                        layout,
                        paths,
                        args,
                        certs,
                    )
                )
        sizes = [int(s) for s in args.postgis.split(",") if s.strip()]
        in_sql = [int(s) for s in args.postgis_in_sql.split(",") if s.strip()]
        if sizes or in_sql:
            _bench_postgis(folder, sizes, in_sql, args, certs, notes, record)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    notes.append(f"1-min load average at the end: {os.getloadavg()[0]:.1f}")
    text = _report(rows, notes, args)
    print(text)
    write_section("service", text)
    return 0


def _report(rows: list[Row], notes: list[str], args: argparse.Namespace) -> str:
    table = "\n".join([HEAD, *(_line(r) for r in rows)])
    return (
        f"`parcelsearch serve` in its own process(es), load from wrk (2 threads, "
        f"{args.connections} connections, keep-alive, HTTPS) in another, on the same "
        f"{os.cpu_count()}-core machine. {args.polygons:,} distinct polygons (small squares "
        "around random parcels, page 1), each of wrk's threads cycling through its own half "
        "in order: more than the 512-entry hit-list cache, so every search is cold; beside "
        f"them {args.keys_count:,} production keys "
        "(10 calls/s each, as the vendor's) cycled in turn, so the gateway's checks run as for "
        "many analysts at once, none of them over its rate. Ceiling: a trivial Starlette "
        "endpoint on the same uvicorn + TLS setup and worker count, measured in the same run "
        "(saturation: the mean of a run just before and one just after the service's). "
        f"Saturation: closed loop for {args.seconds:g} s; half load: half the service's "
        "saturation rate offered (per-connection delay), to the service and to the ceiling; "
        "ratios are service / ceiling. Cores: a one-worker server (service, and the ceiling "
        "likewise) on core 0 and wrk on core 1, as a service and its remote clients would "
        "be, or all sharing both cores (two workers need both); PostgreSQL is never "
        "pinned.\n\n" + table + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n\n"
        "Targets (issue 12): embedded, 1 worker, ratio >= 0.35; PostGIS 10 M ratio >= 0.15; "
        "p99 <= 10 ms at half load everywhere."
    )


@dataclass
class Round:
    """One round of :func:`alternate`: the load average before it and its measurements."""

    load: float
    ceiling: tuple[Run, Run]
    service: tuple[Run, Run]

    @property
    def ratio(self) -> float:
        return self.service[0].rate / self.ceiling[0].rate

    @property
    def met(self) -> bool:
        service, half = self.service
        return self.ratio >= 0.35 and half.p99 < 10.0 and service.errors + half.errors == 0


def alternate(folder: Path, args: argparse.Namespace, certs: Path) -> int:
    """Issue 28's check alone: one service (embedded, 1 worker) and its ceiling, both on the
    two cores wrk uses, measured side by side ``args.alternate`` times (each round:
    ceiling, service, ceiling at saturation, then both at half the service's rate); 0 if
    every round met the target."""
    parcels_file, _ = fabric_file(folder, args.parcels, args.fabric)
    paths = search_paths(parcels_file, args.polygons)
    keys = str(folder / "keys.sqlite")
    api_keys = analyst_keys(keys, args.keys_count)
    rounds: list[Round] = []
    service = service_process(folder, keys, str(parcels_file), 1, certs, SHARED)
    try:
        ceiling_server = _ceiling(folder, 1, certs, SHARED)
        try:
            for number in range(1, args.alternate + 1):
                load = os.getloadavg()[0]
                ceiling, served = measure(
                    service.base_url,
                    ceiling_server.base_url,
                    folder,
                    paths,
                    api_keys,
                    args.seconds,
                    args.connections,
                )
                rounds.append(Round(load, ceiling, served))
                print(_round_line(number, rounds[-1]), flush=True)
        finally:
            ceiling_server.stop()
    finally:
        service.stop()
    text = _alternate_report(rounds, args)
    print(text)
    write_section("service-alternate", text)
    return 0 if all(r.met for r in rounds) else 1


def _round_line(number: int, r: Round) -> str:
    (c_sat, c_half), (s_sat, s_half) = r.ceiling, r.service
    return (
        f"| {number} | {r.load:.1f} | {s_sat.rate:,.0f} | {c_sat.rate:,.0f} | "
        f"{r.ratio:.2f} | {s_half.rate:,.0f} | {s_half.p50:.2f} | {s_half.p99:.2f} | "
        f"{c_half.p99:.2f} | {s_sat.errors + s_half.errors} | "
        f"{'yes' if r.met else 'no'} |"
    )


def _alternate_report(rounds: list[Round], args: argparse.Namespace) -> str:
    head = (
        "| round | load average before | service req/s | ceiling req/s | ratio | "
        "half load req/s | p50 ms | p99 ms | ceiling p99 ms (same rate) | non-2xx | "
        "met |\n|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [_round_line(n, r) for n, r in enumerate(rounds, start=1)]
    ratios = [r.ratio for r in rounds]
    verdict = (
        "every round met it"
        if all(r.met for r in rounds)
        else f"{sum(not r.met for r in rounds)} of {len(rounds)} rounds missed it"
    )
    return (
        "## Service: issue 28's check (`bench_service.py --alternate`)\n\n"
        f"`parcelsearch serve`, 1 worker, embedded stores ({args.parcels / 1e6:g} M parcels, "
        f"keys in SQLite), and a trivial Starlette endpoint on the same uvicorn + TLS (1 "
        f"worker), both sharing the machine's {os.cpu_count()} cores with wrk (2 threads, "
        f"{args.connections} connections, unpinned). {args.polygons:,} cold polygons, "
        f"{args.keys_count:,} production keys. Each round: ceiling, service, ceiling at "
        f"saturation ({args.seconds:g} s each; the ratio is the service over the mean of the "
        "two ceilings), then half the service's rate offered to both.\n\n"
        + "\n".join([head, *lines])
        + "\n\n"
        f"Ratio min {min(ratios):.2f}, max {max(ratios):.2f}. Target (issue 28): ratio >= "
        f"0.35, p99 < 10 ms at half load, 0 non-2xx in each round: {verdict}."
    )


def _bench_postgis(
    folder: Path,
    sizes: list[int],
    in_sql: list[int],
    args: argparse.Namespace,
    certs: Path,
    notes: list[str],
    record: Callable[[Row], None],
) -> None:
    if not (PG_BIN / "initdb").exists():
        notes.append(f"PostGIS rows skipped: no PostgreSQL in {PG_BIN}")
        return
    root = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    cluster = Cluster(root)
    try:
        for size in sizes:
            parcels_file, took = fabric_file(folder, size)
            started = time.perf_counter()
            subprocess.run(
                [*CLI, "parcels", "load", str(parcels_file), "--into", cluster.url(), "--replace"],
                check=True,
                capture_output=True,
            )
            loaded = time.perf_counter() - started
            notes.append(
                f"PostGIS {size:,}: generated in {took:.0f} s, loaded with "
                f"`parcelsearch parcels load` (COPY, indexes, CLUSTER) in "
                f"{loaded:.0f} s"
            )
            paths = search_paths(parcels_file, args.polygons)
            parcels_file.unlink()
            for workers, layout in CONFIGURATIONS:
                record(
                    _bench_one(
                        folder,
                        f"PostGIS {size / 1e6:g} M",
                        cluster.url(),
                        cluster.url(),
                        workers,
                        layout,
                        paths,
                        args,
                        certs,
                    )
                )
        for size in in_sql:
            took = grid_in_sql(cluster.url(), size)
            notes.append(
                f"PostGIS {size:,} (grid generated in SQL): table built, indexed "
                f"and clustered in {took:.0f} s"
            )
            paths = sql_search_paths(cluster.url(), args.polygons)
            for workers, layout in CONFIGURATIONS:
                record(
                    _bench_one(
                        folder,
                        f"PostGIS {size / 1e6:g} M (SQL grid)",
                        cluster.url(),
                        cluster.url(),
                        workers,
                        layout,
                        paths,
                        args,
                        certs,
                    )
                )
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


#: The SQL grid: squares of 90 % of a 0.0002-degree cell (about 20 m) around Abilene, TX.
GRID_SQL = f"""
INSERT INTO {TABLE} (seq, parcel_id, group_id, point, footprint)
SELECT i, 'g' || i, lpad(to_hex(i), 17, '0'), ST_PointOnSurface(sq), sq
FROM (
  SELECT i, ST_MakeEnvelope(-99.9 + (i %% %(side)s) * 0.0002, 32.3 + (i / %(side)s) * 0.0002,
                            -99.9 + (i %% %(side)s) * 0.0002 + 0.00018,
                            32.3 + (i / %(side)s) * 0.0002 + 0.00018, 4326) AS sq
  FROM generate_series(0::bigint, %(n)s - 1) AS i
) AS cells
"""


def grid_in_sql(url: str, n: int) -> float:
    """``n`` square parcels generated inside PostGIS (seconds taken, indexes included)."""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        prepare_table(conn, replace=True)
        conn.execute(GRID_SQL, {"side": int(np.ceil(np.sqrt(n))), "n": n})
        index_table(conn)
    return time.perf_counter() - started


def sql_search_paths(url: str, count: int, seed: int = 12) -> list[str]:
    """Like :func:`search_paths`, around random parcels of the table."""
    with psycopg.connect(url) as conn:
        total = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]  # type: ignore[index]
        rng = np.random.default_rng(seed)
        picks = [int(v) for v in rng.choice(total, size=count, replace=False)]
        rows = conn.execute(
            f"SELECT ST_X(point), ST_Y(point) FROM {TABLE} WHERE seq = ANY(%s)", (picks,)
        ).fetchall()
    halves = rng.uniform(0.0004, 0.0015, len(rows))
    return [_square_path(x, y, h) for (x, y), h in zip(rows, halves, strict=True)]


def _square_path(x: float, y: float, half: float) -> str:
    ring = ring_json(
        [
            (x - half, y - half),
            (x + half, y - half),
            (x + half, y + half),
            (x - half, y + half),
            (x - half, y - half),
        ]
    )
    return "/v1/search?searchPolygon=" + quote(ring, safe="")


if __name__ == "__main__":
    sys.exit(main())
