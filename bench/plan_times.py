"""Planning CPU seconds of the region city, the island city, the island set, the real
boundaries and the synthetic hard areas, exact and tolerance 5 m.

``python bench/plan_times.py`` plans ``bench_tiling.region_city()``, ``bench_tiling.island_city()``,
``bench_tiling.island_set()``, ``bench_tiling.real_areas()`` and
``bench_tiling.hard_areas()`` (``pip install -e ".[bench]"``) with whichever parcelsearch
is importable and prints the CPU seconds of each plan (``time.process_time``: less noisy
than wall time on a shared machine), pieces and request bytes. To compare two versions,
write the areas once (``--save DIR``) and run each version on them (``--load DIR``),
alternated, in one session; or let this script do it: ``python bench/plan_times.py
--compare BASE_SRC [--rounds N]`` saves the areas to a temporary folder, then plans them N
times (2 by default) with the parcelsearch under ``BASE_SRC`` (e.g. a worktree's ``src`` at
an older commit) and with this checkout's, alternated, each in its own process, and prints
and writes (section ``planning-times`` of ``bench/RESULTS.md``) the pieces and the median CPU
seconds of both, with their ratio.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import geopandas as gpd

import parcelsearch

_NAMES = ("region", "city", "set", "real", "hard")


def _areas(argv: list[str]) -> dict[str, gpd.GeoDataFrame]:
    if argv[:1] == ["--load"]:
        folder = Path(argv[1])
        return {name: gpd.read_parquet(folder / f"{name}.parquet") for name in _NAMES}
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_tiling import hard_areas, island_city, island_set, real_areas, region_city

    found = {
        "region": region_city(),
        "city": island_city(),
        "set": island_set(),
        "real": real_areas(),
        "hard": hard_areas(),
    }
    if argv[:1] == ["--save"]:
        for name, frame in found.items():
            frame.to_parquet(Path(argv[1]) / f"{name}.parquet")
    return found


_LINE = re.compile(r"(\w+) +tolerance (\S+) m: +(\d+) pieces, +([\d,]+) bytes, +([\d.]+) s CPU")


def _run(src: Path, folder: str) -> dict[tuple[str, str], tuple[int, int, float]]:
    """One process planning the saved areas with the parcelsearch under ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, __file__, "--load", folder],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {
        (m[1], m[2]): (int(m[3]), int(m[4].replace(",", "")), float(m[5]))
        for m in _LINE.finditer(out)
    }


def compare(base: Path, rounds: int) -> str:
    """Both versions planned ``rounds`` times each, alternated; the table as markdown."""
    here = Path(__file__).resolve().parents[1] / "src"
    with tempfile.TemporaryDirectory() as folder:
        _areas(["--save", folder])
        runs: dict[str, list[dict[tuple[str, str], tuple[int, int, float]]]] = {
            "base": [],
            "this": [],
        }
        for _ in range(rounds):
            runs["base"].append(_run(base, folder))
            runs["this"].append(_run(here, folder))
    lines = [
        "| areas | tolerance | base pieces | pieces | base bytes | bytes | base s | s | ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key in runs["this"][0]:
        old = [r[key] for r in runs["base"]]
        new = [r[key] for r in runs["this"]]
        old_s = statistics.median(r[2] for r in old)
        new_s = statistics.median(r[2] for r in new)
        lines.append(
            f"| {key[0]} | {key[1]} m | {old[0][0]:,} | {new[0][0]:,} | "
            f"{old[0][1]:,} | {new[0][1]:,} | {old_s:.1f} | {new_s:.1f} | "
            f"{new_s / old_s:.2f} |"
        )
    return "\n".join(
        [
            f"Planning CPU seconds (`time.process_time`, median of {rounds} runs each, alternated, "
            f"each run its own process: `python bench/plan_times.py --compare BASE_SRC`), the "
            f"parcelsearch under `{base}` (base) against this checkout, on the region city, the "
            "island city, the island set, the real boundaries and the synthetic hard areas of "
            "`bench_tiling`; ratio = this ÷ base.",
            "",
            *lines,
        ]
    )


def main(argv: list[str]) -> None:
    if argv[:1] == ["--compare"]:
        rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 2
        text = compare(Path(argv[1]).resolve(), rounds)
        print(text)
        sys.path.insert(0, str(Path(__file__).parent))
        from _results import write_section

        write_section("planning-times", text)
        return
    for name, areas in _areas(argv).items():
        for tolerance in (0.0, 5.0):
            started = time.process_time()
            made = parcelsearch.plan(areas, tolerance)
            seconds = time.process_time() - started
            print(
                f"{name:5} tolerance {tolerance:g} m: {len(made.pieces):5d} pieces, "
                f"{sum(p.request_bytes for p in made.pieces):10,} bytes, {seconds:5.1f} s CPU"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
