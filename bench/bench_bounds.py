"""What a hostile vendor or a forged run history costs a search, bounded (issue 58): the
figures side by side, the unbounded read (as before) and the bounded one (now).

1. A gzip answer that inflates without end (a valid page, then N MB of whitespace), served
   on 127.0.0.1: peak memory (``ru_maxrss`` of a fresh process each) reading it with a plain
   ``requests`` session (the whole body) and with the toolkit's session (refused at 16 MB).
2. A run history with 3,000 forged rings of ~20 KB around an area (a local SQLite file):
   time and traced peak of every ring read (the old query) and of ``nearby()`` (the newest
   1,000 nearest within the box, chosen in SQL).

Run: ``python bench/bench_bounds.py [--megabytes 256]``. Each reading runs in its own
process, so one cannot inflate the other's peak.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_READ = """
import resource, sys, requests
from parcelsearch._fetch.session import new_session
session = new_session() if sys.argv[2] == "bounded" else requests.Session()
try:
    size = len(session.get(sys.argv[1], timeout=60).content)
    outcome = f"read {size / 2**20:,.0f} MB"
except Exception as exc:
    outcome = f"refused: {type(exc).__name__}"
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, outcome)
"""


def _bomb(megabytes: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    page = {
        "status": "OK",
        "rows": 1,
        "dataRows": 1,
        "pages": 1,
        "page": 1,
        "data": ["0123456789abcdef0"],
    }
    parts = [packer.compress(json.dumps(page).encode())]
    parts.extend(packer.compress(b" " * 2**20) for _ in range(megabytes))
    return b"".join([*parts, packer.flush()])


def bodies(megabytes: int) -> None:
    body = _bomb(megabytes)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/search"
    print(f"1. a gzip answer of {len(body) / 1e6:.2f} MB inflating to {megabytes:,} MB")
    print(f"   {'reader':<10} {'peak RSS':>10}  outcome")
    for how in ("unbounded", "bounded"):
        done = subprocess.run(
            [sys.executable, "-c", _READ, url, how],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        peak, outcome = done.stdout.split(" ", 1)
        print(f"   {how:<10} {float(peak):>7,.0f} MB  {outcome.strip()}")
    server.shutdown()


def history(rings: int) -> None:
    from parcelsearch.stores.history import _ring_meets, polygon_digest, ring_box
    from parcelsearch.stores.local.history import RunHistory

    with tempfile.TemporaryDirectory() as folder:
        made = RunHistory(Path(folder) / "ledger.sqlite")
        texts = []
        for n in range(rings):
            points = [[-97.7 + n * 1e-9, 30.2]] + [[-97.7 + k * 1e-6, 30.3] for k in range(800)]
            texts.append(str(points + [points[0]]).replace(" ", ""))
        made._insert(
            {
                "runs": [
                    (
                        "forged",
                        "2099",
                        "2099",
                        "f",
                        "https://x",
                        "/v1/search",
                        "a",
                        1,
                        "id",
                        0.0,
                        "cached",
                        1,
                        1,
                        "{}",
                    )
                ],
                "rings": [(polygon_digest(t), t, *ring_box(t)) for t in texts],
                "run_pieces": [
                    ("forged", '"a"', k, polygon_digest(t), 1, 1, "read", None)
                    for k, t in enumerate(texts)
                ],
            }
        )
        old = """SELECT p.polygon, p.pages, g.ring, r.finished, r.{seq} AS seq_order
            FROM {t}run_pieces p JOIN {t}runs r ON r.run_id = p.run_id
                 JOIN {t}rings g ON g.polygon = p.polygon
            WHERE r.base_url = ? AND r.path = ? AND p.status <> 'incomplete'
                  AND p.pages IS NOT NULL"""
        bounds = (-98.0, 30.0, -97.0, 31.0)
        print(f"2. a run history of {rings:,} forged rings of ~{len(texts[0]) / 1000:.0f} KB")
        print(f"   {'reader':<10} {'rings':>6} {'seconds':>8} {'traced peak':>12}")

        def unbounded() -> list[str]:  # the old nearby(): every ring read, then parsed
            frame = made._select(old, ("https://x", "/v1/search"))
            return [r for r in frame["ring"] if _ring_meets(str(r), bounds)]

        for how, read in (
            ("unbounded", unbounded),
            ("bounded", lambda: made.nearby("https://x", "/v1/search", bounds)),
        ):
            started = time.perf_counter()
            found = read()
            took = time.perf_counter() - started
            tracemalloc.start()
            read()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"   {how:<10} {len(found):>6,} {took:>8.2f} {peak / 1e6:>9,.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=256)
    parser.add_argument("--rings", type=int, default=3000)
    args = parser.parse_args()
    bodies(args.megabytes)
    history(args.rings)


if __name__ == "__main__":
    main()
