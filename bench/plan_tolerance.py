"""Whole ``parcelsearch plan`` commands on New York City's five boroughs, exact against
``--tolerance T``: wall and CPU seconds and peak memory side by side, with their ratios.

``python bench/plan_tolerance.py [--tolerances 1,5,50,500,2000,5000] [--rounds 3] [--src SRC]``
plans the boroughs' real boundaries (NYC Department of City Planning's ``nybb_16a``:
76,063 vertices in 106 parts, EPSG:2263, a state plane CRS in US feet) as a user would:
``parcelsearch plan zip://nybb_16a.zip!nybb.shp --id-column BoroCode [--tolerance T]``,
each command its own process. The file is the one geopandas 0.14 shipped; it is fetched
once into ``bench/_work`` (git-ignored) with the ordinary client, ``pip download
geopandas==0.14.4 --no-deps``.

For each tolerance, ``--rounds`` pairs are run, the exact plan then the tolerance's, in
turn (so a drift in the machine's speed falls on both alike). Each run's CPU seconds
(user + system) and peak memory (largest resident set) come from the operating system's
own accounting of that child (``os.wait4``); wall seconds from the clock around it. The
figures are medians over the rounds, and each ratio is the median of the pairs' ratios
(tolerance ÷ exact: below 1 the covering plan is cheaper). ``--src SRC`` runs the
parcelsearch under ``SRC`` (e.g. an older checkout's ``src``, named in the text by
``--label``) instead of this one's. The table is printed and written to the
``plan-tolerance`` section of ``bench/RESULTS.md`` (``--section`` another).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

WORK = Path(__file__).resolve().parent / "_work"
HERE = Path(__file__).resolve().parents[1] / "src"
_WHEEL = "geopandas-0.14.4-py3-none-any.whl"
_MEMBER = "geopandas/datasets/nybb_16a.zip"
_PIECES = re.compile(r"^([\d,]+) pieces, at least", re.M)


def boroughs() -> Path:
    """``nybb_16a.zip`` (the boroughs' shapefile), fetched into ``bench/_work`` once."""
    WORK.mkdir(exist_ok=True)
    target = WORK / "nybb_16a.zip"
    if not target.exists():
        if not (WORK / _WHEEL).exists():
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "geopandas==0.14.4",
                    "--no-deps",
                    "-d",
                    str(WORK),
                ],
                check=True,
            )
        with zipfile.ZipFile(WORK / _WHEEL) as wheel:
            target.write_bytes(wheel.read(_MEMBER))
    return target


@dataclass(frozen=True)
class Run:
    """One finished command: wall and CPU seconds, peak memory (MiB), pieces planned."""

    wall: float
    cpu: float
    peak_mib: float
    pieces: int


def run_plan(areas: Path, tolerance: float, src: Path) -> Run:
    """``parcelsearch plan`` of ``areas`` at ``tolerance`` (0: exact) in its own process,
    with the parcelsearch under ``src``, measured by the operating system."""
    command = [
        sys.executable,
        "-c",
        "from parcelsearch.cli import run; run()",
        "plan",
        f"zip://{areas}!nybb.shp",
        "--id-column",
        "BoroCode",
    ]
    if tolerance:
        command += ["--tolerance", f"{tolerance:g}"]
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}:\n{text}")
    found = _PIECES.search(text)
    pieces = int(found[1].replace(",", "")) if found else -1
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, pieces)


def _ratio(pairs: list[tuple[Run, Run]], figure: str) -> float:
    return statistics.median(getattr(t, figure) / getattr(e, figure) for e, t in pairs)


def _median(runs: list[Run], figure: str) -> float:
    return statistics.median(getattr(r, figure) for r in runs)


def measure(tolerances: list[float], rounds: int, src: Path, label: str | None = None) -> str:
    """The table, as markdown, of ``rounds`` exact/tolerance pairs for each tolerance, the
    parcelsearch run named ``label`` (by default: this checkout, or the ``src`` folder)."""
    areas = boroughs()
    lines = [
        "| tolerance | pieces | wall s | CPU s | peak MiB | × wall | × CPU | × peak |",
        "|---|---|---|---|---|---|---|---|",
    ]
    exact_runs: list[Run] = []
    rows = []
    for tolerance in tolerances:
        pairs = []
        for _ in range(rounds):
            pairs.append((run_plan(areas, 0.0, src), run_plan(areas, tolerance, src)))
            print(
                f"  {tolerance:g} m: exact {pairs[-1][0]}, tolerance {pairs[-1][1]}",
                file=sys.stderr,
            )
        exact_runs += [e for e, _ in pairs]
        runs = [t for _, t in pairs]
        rows.append(
            f"| {tolerance:g} m | {runs[0].pieces:,} | {_median(runs, 'wall'):.2f} | "
            f"{_median(runs, 'cpu'):.2f} | {_median(runs, 'peak_mib'):.0f} | "
            f"{_ratio(pairs, 'wall'):.2f} | {_ratio(pairs, 'cpu'):.2f} | "
            f"{_ratio(pairs, 'peak_mib'):.2f} |"
        )
    lines.append(
        f"| exact | {exact_runs[0].pieces:,} | {_median(exact_runs, 'wall'):.2f} | "
        f"{_median(exact_runs, 'cpu'):.2f} | {_median(exact_runs, 'peak_mib'):.0f} | "
        "1 | 1 | 1 |"
    )
    lines += rows
    where = label or ("this checkout" if src == HERE else f"the parcelsearch under `{src}`")
    return "\n".join(
        [
            f"## Covering plans against the exact plan (`bench/plan_tolerance.py`): {where}",
            "",
            "Whole `parcelsearch plan` commands on New York City's five boroughs (`nybb_16a`, "
            "76,063 vertices, EPSG:2263 in US feet), exact against `--tolerance T`, with "
            f"{where}: medians of {rounds} pairs per tolerance, run in turn (exact, then the "
            "tolerance's), each its own process, CPU seconds and peak resident memory from "
            "`os.wait4`; × = the median of the pairs' ratios, tolerance ÷ exact (the target: at "
            "most 1.5).",
            "",
            *lines,
        ]
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tolerances", default="1,5,50,500,2000,5000", help="tolerances in metres, comma-separated"
    )
    parser.add_argument("--rounds", type=int, default=3, help="pairs per tolerance")
    parser.add_argument(
        "--src",
        type=Path,
        default=HERE,
        help="the src folder whose parcelsearch to run (default: this one's)",
    )
    parser.add_argument("--label", help="what to call the parcelsearch run in the text")
    parser.add_argument(
        "--section",
        default="plan-tolerance",
        help="the section of bench/RESULTS.md to write (default: %(default)s)",
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave bench/RESULTS.md as it is"
    )
    args = parser.parse_args(argv)
    tolerances = [float(t) for t in args.tolerances.split(",")]
    text = measure(tolerances, args.rounds, args.src.resolve(), args.label)
    print(text)
    if not args.no_write:
        sys.path.insert(0, str(Path(__file__).parent))
        from _results import write_section

        write_section(args.section, text)


if __name__ == "__main__":
    main(sys.argv[1:])
