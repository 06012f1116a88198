"""Team mode benchmark: N members doing the same search on one key, with and without the
team store.

Run ``python bench/bench_team.py`` (PostgreSQL's ``initdb``/``pg_ctl`` from
``$PARCELSEARCH_PG_BIN``, default ``/usr/lib/postgresql/15/bin``). It starts the reference
service over HTTPS (demo parcels, keys allowing 10 calls/s) and a throwaway PostgreSQL
cluster, then runs, side by side in one run, N = 1, 2, 4 members — each a separate
``parcelsearch search`` process with its own cache folder, as on separate machines — doing
the same search on one key:

- **alone**: each member with its own ledger, cache and pacer (what a team had before);
- **team**: every member joins one team store (``--team``).

For each it prints the calls the service admitted (its request log), the 429s it answered
(its access log), the members' exit codes, the wall time, and the rate the key saw (calls
admitted ÷ seconds from the first to the last). Goal: with the store, N members spend what
one does, and the total rate stays ≥ 9 calls/s of the key's 10.

Then, at the key's full rate (issue 39), N = 1, 2, 4 members each searching *different*
cells (``BUSY_CELLS`` each, one call a cell) through one team store, three rounds: every
member sends as fast as the key's stored pace allows, all together. Goal: 0 spike-arrest
429s (the service's access log) in every round, at a key rate near the stored pace's
10 × (1 - margin) calls/s.

Figures go to the ``team`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import geopandas as gpd
import psycopg
from shapely.geometry import box

sys.path.insert(0, str(Path(__file__).parent))

from _results import write_section  # noqa: E402
from bench_service import PG_BIN, Cluster  # noqa: E402

import parcelsearch  # noqa: E402
from parcelsearch.stores.team import init_team  # noqa: E402
from parcelsearch_service.server import RunningService, start_service  # noqa: E402

MEMBERS = (1, 2, 4)
#: Small cells over the demo fabric: one call each (page 1 of a piece of at most 100 parcels).
CELLS = 60
#: Cells each member searches in the full-rate rounds (its own: no page shared).
BUSY_CELLS = 50
#: Full-rate rounds for each N.
ROUNDS = 3


class _Statuses(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and len(record.args) > 3:
            self.statuses.append(int(record.args[3]))


class Clusters:
    """Fresh databases on one throwaway cluster (``bench_service.Cluster``), one a round."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bench-team-pg-"))
        self.cluster = Cluster(self.root)
        self._n = 0

    def database(self) -> str:
        self._n += 1
        with psycopg.connect(self.cluster.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE team_{self._n}")
        return self.cluster.url(f"team_{self._n}")

    def stop(self) -> None:
        self.cluster.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _cells(count: int = CELLS, first: int = 0) -> gpd.GeoDataFrame:
    """``count`` small squares over the demo areas' fabric (Abilene), from cell ``first``
    of a grid ten cells wide."""
    x0, y0 = -99.745, 32.44
    cells = [
        box(
            x0 + 0.002 * (i % 10),
            y0 + 0.002 * (i // 10),
            x0 + 0.002 * (i % 10) + 0.0015,
            y0 + 0.002 * (i // 10) + 0.0015,
        )
        for i in range(first, first + count)
    ]
    return gpd.GeoDataFrame(
        {"area_id": [f"c{i:03d}" for i in range(first, first + count)]},
        geometry=cells,
        crs="EPSG:4326",
    )


def _full_rate(
    svc: RunningService, cluster: Clusters, work: Path, n: int, round_no: int, statuses: list[int]
) -> dict[str, Any]:
    """N members, each its own cells, through one team store at the key's full rate."""
    name = f"full-{n}-{round_no}"
    key = svc.keys.create(name, key_type="production", quota=100_000, per_second=10)
    url = cluster.database()
    init_team(url)
    src = str(Path(parcelsearch.__file__).parent.parent)
    statuses.clear()
    procs = []
    (work / name).mkdir(parents=True, exist_ok=True)
    for member in range(n):
        areas = work / name / f"cells{member}.parquet"
        _cells(BUSY_CELLS, 1000 * round_no + BUSY_CELLS * member).to_parquet(areas)
        env = {
            **os.environ,
            "PARCELSEARCH_API_KEY": key,
            "PARCELSEARCH_BASE_URL": svc.base_url,
            "PARCELSEARCH_CA_BUNDLE": str(svc.ca_path),
            "PARCELSEARCH_CACHE_DIR": str(work / name / f"m{member}"),
            "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        args = [
            sys.executable,
            "-m",
            "parcelsearch.cli",
            "search",
            str(areas),
            "--out",
            str(work / name / f"m{member}.parquet"),
            "--id-column",
            "area_id",
            "--quiet",
            "--team",
            url,
            "--user",
            f"member{member}",
        ]
        procs.append(
            subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )
    codes = []
    for proc in procs:
        _, err = proc.communicate(timeout=900)
        codes.append(proc.returncode)
        if proc.returncode:
            print(f"{name}: exit {proc.returncode}: {err.decode().strip()[-300:]}", file=sys.stderr)
    log = svc.keys.requests(name)
    span = (log["time"].max() - log["time"].min()).total_seconds() if len(log) > 1 else 0.0
    return {
        "members": n,
        "round": round_no,
        "calls": len(log),
        "429s": statuses.count(429),
        "exit codes": codes,
        "rate": (len(log) - 1) / span if span else float("nan"),
    }


def _round(
    svc: RunningService,
    cluster: Clusters,
    areas: Path,
    work: Path,
    n: int,
    team: bool,
    statuses: list[int],
) -> dict[str, Any]:
    name = f"{'team' if team else 'alone'}-{n}"
    key = svc.keys.create(name, key_type="production", quota=100_000)
    url = cluster.database() if team else None
    if url:
        init_team(url)
    src = str(Path(parcelsearch.__file__).parent.parent)
    statuses.clear()
    started = time.perf_counter()
    procs = []
    (work / name).mkdir(parents=True, exist_ok=True)
    for member in range(n):
        env = {
            **os.environ,
            "PARCELSEARCH_API_KEY": key,
            "PARCELSEARCH_BASE_URL": svc.base_url,
            "PARCELSEARCH_CA_BUNDLE": str(svc.ca_path),
            "PARCELSEARCH_CACHE_DIR": str(work / name / f"m{member}"),
            "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        args = [
            sys.executable,
            "-m",
            "parcelsearch.cli",
            "search",
            str(areas),
            "--out",
            str(work / name / f"m{member}.parquet"),
            "--id-column",
            "area_id",
            "--quiet",
        ]
        if url:
            args += ["--team", url, "--user", f"member{member}"]
        procs.append(
            subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )
    codes = []
    for proc in procs:
        _, err = proc.communicate(timeout=900)
        codes.append(proc.returncode)
        if proc.returncode:
            print(f"{name}: exit {proc.returncode}: {err.decode().strip()[-300:]}", file=sys.stderr)
    wall = time.perf_counter() - started
    log = svc.keys.requests(name)
    span = (log["time"].max() - log["time"].min()).total_seconds() if len(log) > 1 else 0.0
    return {
        "mode": "team" if team else "alone",
        "members": n,
        "calls": len(log),
        "429s": statuses.count(429),
        "exit codes": codes,
        "wall s": wall,
        "rate": (len(log) - 1) / span if span else float("nan"),
    }


def main() -> None:
    if not (PG_BIN / "initdb").exists():
        sys.exit(f"PostgreSQL not found ({PG_BIN}/initdb missing)")
    handler = _Statuses()
    access = logging.getLogger("parcelsearch.service.access")
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    cluster = Clusters()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="bench-team-") as tmp,
            start_service(keys=Path(tmp) / "keys.sqlite", cert_dir=Path(tmp) / "certs") as svc,
        ):
            work = Path(tmp)
            areas = work / "cells.parquet"
            _cells().to_parquet(areas)
            rows = [
                _round(svc, cluster, areas, work, n, team, handler.statuses)
                for n in MEMBERS
                for team in (False, True)
            ]
            full = [
                _full_rate(svc, cluster, work, n, r, handler.statuses)
                for r in range(1, ROUNDS + 1)
                for n in MEMBERS
            ]
    finally:
        cluster.stop()
    lines = [
        "| members | mode | calls admitted | 429s | exit codes | wall s | key calls/s |",
        "|---:|---|---:|---:|---|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['members']} | {row['mode']} | {row['calls']} | {row['429s']} | "
            f"{' '.join(map(str, row['exit codes']))} | {row['wall s']:.1f} | "
            f"{row['rate']:.2f} |"
        )
    one = next(r["calls"] for r in rows if r["members"] == 1 and r["mode"] == "team")
    summary = [
        "",
        f"N members doing the same search ({CELLS} cells over the demo fabric) on one key "
        "allowing 10 calls/s, each member a separate `parcelsearch search` process with its "
        "own cache folder. Calls: the service's request log; 429s: its access log; the key's "
        "rate: calls admitted over the span from the first to the last.",
        "",
        "With the team store, N members spend what one does "
        f"({', '.join(str(r['calls']) for r in rows if r['mode'] == 'team')} calls for "
        f"N = {', '.join(map(str, MEMBERS))}; one member alone: {one}).",
    ]
    summary += [
        "",
        f"At the key's full rate: N members each searching {BUSY_CELLS} cells of its own "
        "(no page shared) through one team store, the key allowing 10 calls/s and the store's "
        "pace 10 calls/s with margin 0.05, all members started together; "
        f"{ROUNDS} rounds. Spike-arrest 429s: the service's access log.",
        "",
        "| round | members | calls admitted | spike 429s | exit codes | key calls/s |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for row in full:
        summary.append(
            f"| {row['round']} | {row['members']} | {row['calls']} | {row['429s']} | "
            f"{' '.join(map(str, row['exit codes']))} | {row['rate']:.2f} |"
        )
    summary += [
        "",
        f"Spike 429s over all {len(full)} full-rate runs: {sum(r['429s'] for r in full)}.",
    ]
    text = "\n".join(lines + summary)
    print(text)
    write_section("team", "## Team mode (`bench/bench_team.py`)\n\n" + text)


if __name__ == "__main__":
    main()
