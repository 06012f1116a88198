"""A witness that planning is unchanged: one sha256 over every piece's request bytes.

Run ``python bench/plan_digest.py`` before and after a change that must not change any
plan (a refactoring). Over the benchmarks' cases — ``bench_tiling``'s synthetic hard
areas, its real New Zealand areas and coastline regions (``pip install -e ".[bench]"``),
and the demo's study areas — in exact mode and at tolerance 5 m, plus plain halving, it
hashes each piece's area id, piece id and request target at page 99999 (the canonical
ring JSON, percent-encoded, exactly as sent) and prints one digest per case and mode and
one over all of them. Two runs print the same lines exactly when every plan is the same.
The table goes to the ``plan-digest`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from pathlib import Path

import geopandas as gpd

sys.path.insert(0, str(Path(__file__).parent))
from _halving import halving_baseline  # noqa: E402
from bench_tiling import coast_regions, hard_areas, real_areas  # noqa: E402

import parcelsearch  # noqa: E402
from parcelsearch import _wire, demo, settings  # noqa: E402

_PAGE = 99999


def _cases() -> dict[str, Callable[[], gpd.GeoDataFrame]]:
    return {
        "demo": lambda: demo.demo_areas().set_index("area_id"),
        "hard": hard_areas,
        "real": real_areas,
        "coast": coast_regions,
    }


def _targets(areas: gpd.GeoDataFrame, mode: str) -> list[str]:
    """``area id, piece id, request target`` of every piece of ``areas`` in ``mode``."""
    if mode == "halving":
        validated = parcelsearch.planning.areas.validate_areas(areas)
        rings = [
            (area_id, piece_id, _wire.ring_json(ring.exterior.coords))
            for area_id, geom in validated.geometry.items()
            for piece_id, ring in enumerate(halving_baseline(geom))
        ]
    else:
        made = parcelsearch.plan(areas, 0.0 if mode == "exact" else 5.0)
        rings = [(p.area_id, p.piece_id, p.polygon_json) for p in made.pieces]
    return [
        f"{area_id}\t{piece_id}\t{_wire.search_target(settings.SEARCH_PATH, text, _PAGE)}"
        for area_id, piece_id, text in rings
    ]


def digests() -> dict[str, tuple[int, str]]:
    """Per ``case/mode``: pieces and the sha256 of their request targets, in plan order."""
    out: dict[str, tuple[int, str]] = {}
    for case, load in _cases().items():
        areas = load()
        for mode in ("exact", "tol5", "halving"):
            started = time.perf_counter()
            lines = _targets(areas, mode)
            digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
            out[f"{case}/{mode}"] = (len(lines), digest)
            print(
                f"{case}/{mode}: {len(lines)} pieces {digest[:16]} "
                f"({time.perf_counter() - started:.1f} s)",
                file=sys.stderr,
            )
    return out


def main() -> None:
    from _results import write_section

    found = digests()
    whole = hashlib.sha256()
    lines = []
    for name, (count, digest) in found.items():
        lines.append(f"{name:16} {count:6d} pieces  sha256 {digest}")
        whole.update(f"{name}:{digest}\n".encode())
    total = sum(c for c, _ in found.values())
    lines.append(f"{'all':16} {total:6d} pieces  sha256 {whole.hexdigest()}")
    print("\n".join(lines))
    write_section(
        "plan-digest",
        "Every piece's request target (page 99999), hashed per case "
        "and mode (`python bench/plan_digest.py`): the same lines mean the same "
        "plans.\n\n```\n" + "\n".join(lines) + "\n```\n",
    )


if __name__ == "__main__":
    main()
