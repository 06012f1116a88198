"""Profile the reference service's request path under wrk load, with py-spy.

The configuration of issue 28's check (:mod:`bench_service`): ``parcelsearch serve``, one
worker, embedded stores (1 M parcels, keys in SQLite), wrk with 8 connections on the same
two cores (unpinned), cold polygons (3,000 > the hit-list cache), 2,000 production keys.
While wrk holds the service at saturation, py-spy samples every thread of the server
process (CPU samples only: a thread waiting on a lock, a socket or its queue is not
counted) and the stacks are summed into:

- the stages of a request (TLS and HTTP, the ASGI layers, parsing, admission, search, the
  page and its JSON, the hand-off between threads), each as a share of the samples;
- the functions with the largest share including what they call, and the largest share
  of their own (the line a sample was in).

The table is written to ``bench/RESULTS.md``, section ``service-profile-LABEL`` (run once
with ``--label before`` on the old code and once with ``--label after``). py-spy is a tool
here, like wrk, not a dependency: ``pip install py-spy``.

    python bench/profile_service.py --label after [--seconds 20] [--rate 200]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import write_section  # noqa: E402
from bench_service import (  # noqa: E402
    SHARED,
    analyst_keys,
    fabric_file,
    search_paths,
    service_process,
    wrk_script,
)

#: The work of a request, in priority order: a sample belongs to the first stage one of
#: whose frames matches (a search runs inside the admission's call, the hand-off encloses
#: the whole batch on the batcher's thread).
WORK: tuple[tuple[str, str], ...] = (
    ("parse the polygon (JSON, checks, shapely)", r"parse_polygon|parse_search|parse_page"),
    ("search (STRtree, points in polygon)", r"ParcelStore\.(hits|_search|work)|HitCache"),
    ("page and JSON", r"ParcelStore\.page|json/encoder|json_strings|_Service\._search"),
    (
        "admit (key, spike arrest, quota, count, log)",
        r"limits\.py|KeyStore|gateway\.py|_admission\.py",
    ),
    (
        "read the request (headers, query)",
        r"starlette/(requests|datastructures)|query_params|_Service\._call",
    ),
    ("hand-off between threads", r"batching\.py|call_soon_threadsafe|_write_to_self"),
)
#: The layers a request passes through: the rest of the samples go to the layer of their
#: innermost frame that names one (a socket write under the ASGI layers is the socket's).
LAYERS: tuple[tuple[str, str], ...] = (
    ("TLS and sockets (asyncio)", r"sslproto|ssl\.py|selector_events|socket"),
    ("the loop's poll (epoll_wait)", r"EpollSelector\.select"),
    ("HTTP (h11, uvicorn)", r"h11|uvicorn/protocols"),
    (
        "ASGI layers (Starlette, guard, routes)",
        r"starlette/|RequestLineGuard|GatedRoutes|"
        r"service/(app|asgi_layers)\.py",
    ),
)
OTHER = "other (the loop's own work, start-up, GC)"
STAGES = (*WORK, *LAYERS)
#: Frames that enclose everything a thread does (shown in no table).
ROOTS = (
    r"^(Thread\.|<module>|_run_code|_run_module|Runner\.run|asyncio_run|run_workers|"
    r"_serve |_service |main |run |Server\.|BaseEventLoop\.run_|Handle\._run|"
    r"Context\.run)"
)


@dataclass
class Profile:
    """Summed py-spy samples: per stack, how many."""

    stacks: Counter[tuple[str, ...]]

    @property
    def total(self) -> int:
        return sum(self.stacks.values())

    def stages(self) -> list[tuple[str, int]]:
        counts: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            counts[_stage(stack)] += n
        order = [name for name, _ in STAGES] + [OTHER]
        return [(name, counts[name]) for name in order if counts[name]]

    def inclusive(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            for function in {_function(frame) for frame in stack}:
                counts[function] += n
        return counts

    def own(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            if stack:
                counts[_function(stack[-1])] += n
        return counts


def _stage(stack: tuple[str, ...]) -> str:
    for name, pattern in WORK:
        if any(re.search(pattern, frame) for frame in stack):
            return name
    for frame in reversed(stack):
        for name, pattern in LAYERS:
            if re.search(pattern, frame):
                return name
    return OTHER


def _function(frame: str) -> str:
    """``name (file:line)`` as ``name (file)``: a function's samples over all its lines."""
    return re.sub(r":\d+\)$", ")", frame)


def read_raw(path: Path) -> Profile:
    """py-spy's ``--format raw`` output (``thread;frame;frame count`` lines), threads dropped."""
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text().splitlines():
        body, _, count = line.rpartition(" ")
        frames = body.split(";")
        if frames and frames[0].startswith("thread ("):
            frames = frames[1:]
        stacks[tuple(frames)] += int(count)
    return Profile(stacks)


def _share(n: int, total: int) -> str:
    return f"{100.0 * n / total:.1f} %"


def report(
    profile: Profile,
    rate: float,
    load: tuple[float, float],
    args: argparse.Namespace,
    top: int = 15,
) -> str:
    total = profile.total
    requests = rate * args.seconds  # answered while sampled (wrk's mean rate)
    per_request = 1e6 / args.rate / requests  # µs of CPU a sample stands for, per request
    stage_rows = [
        f"| {name} | {_share(n, total)} | {n * per_request:,.0f} |" for name, n in profile.stages()
    ]
    stage_rows.append(f"| **all** | 100 % | **{total * per_request:,.0f}** |")
    inclusive = [(f, n) for f, n in profile.inclusive().most_common() if not re.search(ROOTS, f)]
    incl_rows = [f"| `{f}` | {_share(n, total)} |" for f, n in inclusive[:top]]
    own_rows = [f"| `{f}` | {_share(n, total)} |" for f, n in profile.own().most_common(top)]
    return (
        f"py-spy ({args.rate} samples/s, CPU samples of every thread) on `parcelsearch serve` "
        f"(1 worker, embedded {args.parcels / 1e6:g} M parcels, keys in SQLite) while wrk "
        f"({args.connections} connections, the same 2 cores, unpinned) held it at saturation "
        f"for {args.seconds:g} s: {args.polygons:,} cold polygons, {args.keys_count:,} "
        f"production keys. {total:,} samples; {rate:,.0f} req/s while sampled (py-spy takes "
        f"its share of the cores). 1-min load average {load[0]:.1f} before, {load[1]:.1f} "
        "after.\n\n"
        "| stage of a request | share of CPU samples | µs of CPU a request |\n|---|---|---|\n"
        + "\n".join(stage_rows)
        + "\n\n| function, including what it calls | share |\n|---|---|\n"
        + "\n".join(incl_rows)
        + "\n\n| function, its own lines | share |\n|---|---|\n"
        + "\n".join(own_rows)
        + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after", help="the section: service-profile-LABEL")
    parser.add_argument("--parcels", type=int, default=1_000_000)
    parser.add_argument("--polygons", type=int, default=3000)
    parser.add_argument("--keys-count", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples a second")
    parser.add_argument(
        "--fabric",
        type=Path,
        default=None,
        help="parcels file to reuse (written there first if missing)",
    )
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if shutil.which("wrk") is None or not Path(spy).exists():
        print("needs wrk (apt-get install wrk) and py-spy (pip install py-spy)", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="profile-service-"))
    try:
        parcels = fabric_file(folder, args.parcels, args.fabric)[0]
        paths = search_paths(parcels, args.polygons)
        keys_file = str(folder / "keys.sqlite")
        api_keys = analyst_keys(keys_file, args.keys_count)
        server = service_process(folder, keys_file, str(parcels), 1, folder / "certs", SHARED)
        try:
            script = wrk_script(folder, "profile", paths, api_keys, None)
            warm = [
                "wrk",
                "-t2",
                f"-c{args.connections}",
                "-d3s",
                "-s",
                str(script),
                server.base_url,
            ]
            subprocess.run(warm, check=True, capture_output=True)
            load_before = os.getloadavg()[0]
            raw = folder / "profile.txt"
            wrk = subprocess.Popen(
                [
                    "wrk",
                    "-t2",
                    f"-c{args.connections}",
                    f"-d{args.seconds + 2:g}s",
                    "-s",
                    str(script),
                    server.base_url,
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(1)
            subprocess.run(
                [
                    spy,
                    "record",
                    "--pid",
                    str(server.pid),
                    "--duration",
                    f"{int(args.seconds)}",
                    "--rate",
                    str(args.rate),
                    "--format",
                    "raw",
                    "--output",
                    str(raw),
                    "--threads",
                    "--nonblocking",
                ],
                check=True,
                capture_output=True,
            )
            out, _ = wrk.communicate(timeout=60)
            rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out)[1])  # type: ignore[index]
        finally:
            server.stop()
        text = report(read_raw(raw), rate, (load_before, os.getloadavg()[0]), args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(text)
    write_section(f"service-profile-{args.label}", f"## Service profile: {args.label}\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
