"""Benchmark the reference service on a 1,000,000-parcel fabric (generated, not committed).

Prints p50/p99 latency per page (client-side, over HTTPS with keep-alive, so TLS, HTTP,
the gateway transaction and the search are all in it) for small, medium and large
polygons, cold first pages included, and sustained requests/s from a few client threads;
writes the figures into ``bench/RESULTS.md`` (section ``service``).

    python bench/bench_service.py [--parcels 1000000] [--seconds 15]

Targets (issue 3): p99 <= 10 ms per page, >= 500 requests/s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import write_section  # noqa: E402

from parcelsearch._wire import ring_json  # noqa: E402
from parcelsearch.service import synth  # noqa: E402
from parcelsearch.service.server import RunningService, start_service  # noqa: E402

#: Polygon sizes: (name, half-width in degrees, how many distinct polygons).
SIZES = (("small", 0.0006, 40), ("medium", 0.003, 12), ("large", 0.025, 3))


def _session(svc: RunningService, key: str) -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE would override verify
    session.verify = str(svc.ca_path)
    session.headers["x-api-key"] = key
    return session


def _rings(svc: RunningService, half: float, count: int, rng: np.random.Generator) -> list[str]:
    """``count`` squares of half-width ``half`` centred on random parcels."""
    picks = rng.integers(0, len(svc.store), count)
    rings = []
    for i in picks:
        x, y = float(svc.store.x[i]), float(svc.store.y[i])
        rings.append(ring_json([(x - half, y - half), (x + half, y - half), (x + half, y + half),
                                (x - half, y + half), (x - half, y - half)]))
    return rings


def latency(svc: RunningService, key: str, seed: int = 1) -> tuple[dict[str, dict[str, float]],
                                                                     list[tuple[str, str]]]:
    """Per size: every page of every polygon, timed; plus the (ring, page) pairs seen."""
    rng = np.random.default_rng(seed)
    session = _session(svc, key)
    figures: dict[str, dict[str, float]] = {}
    seen: list[tuple[str, str]] = []
    for name, half, count in SIZES:
        times, firsts, rows = [], [], []
        for ring in _rings(svc, half, count, rng):
            page, pages = 1, 1
            while page <= max(pages, 1):
                started = time.perf_counter()
                response = session.get(svc.base_url + "/v1/search",
                                       params={"searchPolygon": ring, "page": page})
                elapsed = (time.perf_counter() - started) * 1000
                body = response.json()
                if response.status_code != 200:
                    raise RuntimeError(f"{response.status_code}: {body}")
                pages = body["pages"]
                times.append(elapsed)
                if page == 1:
                    firsts.append(elapsed)
                    rows.append(body["rows"])
                seen.append((ring, str(page)))
                page += 1
        figures[name] = {
            "polygons": count, "mean rows": float(np.mean(rows)), "requests": len(times),
            "p50 ms": float(np.percentile(times, 50)), "p99 ms": float(np.percentile(times, 99)),
            "first page p50 ms": float(np.percentile(firsts, 50)),
            "first page max ms": float(np.max(firsts)),
        }
        print(f"{name:>6}: {figures[name]}", flush=True)
    session.close()
    return figures, seen


def throughput(svc: RunningService, key: str, requests_seen: list[tuple[str, str]],
               threads: int, seconds: float, max_requests: int) -> dict[str, float]:
    """Sustained requests/s: ``threads`` keep-alive clients cycling over ``requests_seen``."""
    done = [0] * threads
    errors = [0] * threads
    stop_at = time.perf_counter() + seconds
    budget = max_requests // threads

    def client(index: int) -> None:
        session = _session(svc, key)
        for n in range(budget):
            if time.perf_counter() > stop_at:
                break
            ring, page = requests_seen[(index * 7919 + n) % len(requests_seen)]
            response = session.get(svc.base_url + "/v1/search",
                                   params={"searchPolygon": ring, "page": page})
            done[index] += 1
            errors[index] += response.status_code != 200
        session.close()

    started = time.perf_counter()
    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    result = {"threads": threads, "requests": sum(done), "errors": sum(errors),
              "seconds": elapsed, "requests/s": sum(done) / elapsed}
    print(f"throughput: {result}", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parcels", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--max-requests", type=int, default=20_000)
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    parcels = synth.large_fabric(args.parcels)
    built = time.perf_counter() - started
    print(f"fabric: {len(parcels):,} parcels in {built:.1f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        svc = start_service(parcels=parcels, keys=Path(tmp) / "keys.sqlite",
                            cert_dir=Path(tmp) / "certs")
        loaded = time.perf_counter() - started
        print(f"service: loaded and listening in {loaded:.1f} s", flush=True)
        del parcels
        with svc:
            key = svc.keys.create("bench", "production", per_second=1e6, quota=10**9)
            sizes, seen = latency(svc, key)
            rate = throughput(svc, key, seen, args.threads, args.seconds, args.max_requests)

    lines = [
        f"Reference service on {args.parcels:,} synthetic parcels (fabric built in {built:.1f} s; "
        f"service loaded in {loaded:.1f} s), {os.cpu_count()} CPUs shared by server and "
        "clients. Client-side latency over HTTPS with keep-alive; every page of every polygon, "
        "first (uncached) pages included.",
        "",
        "| polygon | polygons | mean rows | pages fetched | p50 ms/page | p99 ms/page "
        "| first page p50 ms | first page max ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, f in sizes.items():
        lines.append(
            f"| {name} | {f['polygons']:.0f} | {f['mean rows']:,.0f} | {f['requests']:.0f} | "
            f"{f['p50 ms']:.2f} | {f['p99 ms']:.2f} | {f['first page p50 ms']:.2f} | "
            f"{f['first page max ms']:.2f} |"
        )
    lines += [
        "",
        f"Sustained: **{rate['requests/s']:.0f} requests/s** ({rate['requests']:,} requests, "
        f"{rate['errors']} errors, {rate['threads']} client threads, {rate['seconds']:.1f} s).",
        "",
        "Targets: p99 <= 10 ms per page; >= 500 requests/s.",
    ]
    if not args.no_write:
        write_section("service", "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
