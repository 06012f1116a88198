"""The pacer on a loaded machine: calls a second and spike-arrest refusals, the pacer with
permits beside the two before it, strict spacing and the adaptive pace (issue 59, point 4).

The reference service runs as ``parcelsearch serve`` in its own process, with a key that
allows the vendor's 10 calls a second; the bench's own load generator (busy processes, two
per core) keeps the machine loaded beside it. In alternating rounds, a client sends the same
calls (page 1 of distinct small rings, ``--workers`` threads sharing one pacer) with
``RateLimiter(10, adaptive=False, permits=False)`` (strict spacing),
``RateLimiter(10, permits=False)`` (AIMD on the refusals met) and ``RateLimiter(10)`` (the
pacer now: AIMD, and permits freed a second after each answer), each first in turn. The
refusals are the service's own
count (its access log: ``GET /v1/search`` answered 429), the calls a second those admitted
(its request log) over the wall time.
Writes section ``pacer`` of ``bench/RESULTS.md``.

    python bench/bench_pacer.py [--calls 300] [--rounds 2] [--workers 8] [--burners 4]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import write_section  # noqa: E402

import parcelsearch  # noqa: E402
from parcelsearch._fetch.pacing import RateLimiter  # noqa: E402
from parcelsearch._wire import ring_json  # noqa: E402
from parcelsearch_service.keys import KeyStore  # noqa: E402

RATE = 10.0
#: The pacers measured, by name: the two before issue 59's fourth point, and the one now.
MODES = {
    "strict": lambda: RateLimiter(RATE, adaptive=False, permits=False),
    "adaptive": lambda: RateLimiter(RATE, permits=False),
    "permits": lambda: RateLimiter(RATE),
}


def _burn(until: float) -> None:
    """Keep one core busy until ``until`` (time.time)."""
    x = 0
    while time.time() < until:
        x = (x * 31 + 7) % 1_000_003


def _rings(count: int) -> list[str]:
    """``count`` distinct small rings over Abilene's demo fabric."""
    rings = []
    for k in range(count):
        x, y = -99.74 + 0.0007 * (k % 40), 32.445 + 0.0007 * (k // 40)
        rings.append(
            ring_json([(x, y), (x + 0.0005, y), (x + 0.0005, y + 0.0005), (x, y + 0.0005), (x, y)])
        )
    return rings


@dataclass
class Round:
    mode: str
    calls: int
    seconds: float
    refused: int
    met: int
    load: float

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds


def _serve(folder: Path) -> tuple[subprocess.Popen[str], str, Path]:
    command = [
        sys.executable,
        "-m",
        "parcelsearch.cli",
        "serve",
        "--keys",
        str(folder / "keys.sqlite"),
        "--cert-dir",
        str(folder / "certs"),
        "--port",
        "0",
        "--access-log",
    ]
    with (folder / "access.log").open("w") as log:  # the service's own line per request
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    found = re.match(r"serving (https://127\.0\.0\.1:\d+) \(CA: (.+?)\)", line)
    if not found:
        proc.terminate()
        raise SystemExit(f"parcelsearch serve did not start: {line!r}")
    return proc, found[1], Path(found[2])


def _round(
    mode: str, base_url: str, ca: Path, keys: KeyStore, rings: list[str], workers: int, folder: Path
) -> Round:
    name = f"{mode}-{time.monotonic_ns()}"
    key = keys.create(name, key_type="production", per_second=RATE, quota=10_000_000)
    client = parcelsearch.Client(
        api_key=key, base_url=base_url, ca_bundle=str(ca), cache_dir=folder / "cache", rate=RATE
    )
    client.transport.limiter = MODES[mode]()
    load = os.getloadavg()[0]
    lock = threading.Lock()
    done = [0]

    def one(ring: str) -> None:
        client.search_page(ring, 1)
        with lock:
            done[0] += 1

    access = folder / "access.log"
    before = access.stat().st_size
    start = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, rings))
    seconds = time.monotonic() - start
    time.sleep(0.5)  # the service's last log lines
    with access.open("rb") as lines:
        lines.seek(before)
        refused = sum(1 for line in lines if b'"GET /v1/search" 429 ' in line)
    log = keys.requests(name)  # the admitted calls, counted by the service
    client.close()
    return Round(
        mode,
        int((log["status"] == 200).sum()),
        seconds,
        refused,
        client.transport.limiter.refusals,
        load,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=8)  # a search's default
    parser.add_argument("--burners", type=int, default=2 * (os.cpu_count() or 1))
    args = parser.parse_args(argv)
    rows: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="bench-pacer-") as tmp:
        folder = Path(tmp)
        proc, base_url, ca = _serve(folder)
        keys = KeyStore(folder / "keys.sqlite")
        seconds = args.rounds * len(MODES) * (args.calls / RATE) * 1.6 + 30
        burners = [
            multiprocessing.Process(target=_burn, args=(time.time() + seconds,), daemon=True)
            for _ in range(args.burners)
        ]
        for b in burners:
            b.start()
        try:
            time.sleep(3)  # the load average climbs
            for k in range(args.rounds):
                rings = _rings(args.calls * len(MODES) * (k + 1))[-len(MODES) * args.calls :]
                names = list(MODES)
                names = names[k % len(names) :] + names[: k % len(names)]  # each first in turn
                for j, mode in enumerate(names):
                    part = rings[j * args.calls : (j + 1) * args.calls]
                    row = _round(mode, base_url, ca, keys, part, args.workers, folder)
                    rows.append(row)
                    print(
                        f"round {k + 1} {mode:8}: {row.calls} calls in {row.seconds:.1f} s = "
                        f"{row.per_second:.2f} calls/s, {row.refused} spike refusals "
                        f"(service's access log; {row.met} met by the pacer), "
                        f"load {row.load:.1f}",
                        flush=True,
                    )
        finally:
            for b in burners:
                b.terminate()
            keys.close()
            proc.terminate()
            proc.wait(timeout=30)
            if proc.stdout:
                proc.stdout.close()
    write_section("pacer", _report(rows, args))
    return 0


def _report(rows: list[Round], args: argparse.Namespace) -> str:
    lines = [
        "## The pacer on a loaded machine (issue 59)",
        "",
        f"`python bench/bench_pacer.py --calls {args.calls} --rounds {args.rounds} --workers "
        f"{args.workers} --burners {args.burners}`: `parcelsearch serve` in its own process, a "
        f"key allowing 10 calls/s (the vendor's spike arrest), {args.burners} busy processes "
        f"on {os.cpu_count()} cores beside it; {args.workers} threads share one pacer, page 1 "
        "of distinct small rings. Refusals: the service's access log (429 answers); calls/s: "
        "the admitted calls (its request log) over the wall time. `strict`: the pacer before "
        "issue 59 (strict spacing, `RateLimiter(10, adaptive=False, permits=False)`); "
        "`adaptive`: AIMD on the refusals met (`RateLimiter(10, permits=False)`, x0.9 a "
        "refusal, +0.02 calls/s a call up to 0.98 of the pace refused at); `permits`: the "
        "pacer now (`RateLimiter(10)`: AIMD and strict spacing, and 10 permits, each free "
        "again 1 s after the answer of the call that used it); each first in turn.",
        "",
        "| round | pacer | calls | seconds | calls/s | spike refusals | 1-min load |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, row in enumerate(rows):
        lines.append(
            f"| {k // len(MODES) + 1} | {row.mode} | {row.calls} | {row.seconds:.1f} | "
            f"{row.per_second:.2f} | {row.refused} | {row.load:.1f} |"
        )
    for mode in MODES:
        mine = [r for r in rows if r.mode == mode]
        calls, secs = sum(r.calls for r in mine), sum(r.seconds for r in mine)
        lines.append(
            f"| all | {mode} | {calls} | {secs:.1f} | {calls / secs:.2f} | "
            f"{sum(r.refused for r in mine)} | |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
