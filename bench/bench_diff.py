"""``parcelsearch diff`` on large outputs: time and peak memory, side by side in one run.

Run ``python bench/bench_diff.py [ROWS]`` (default 2,000,000). It writes two outputs of
``ROWS`` (area id, GroupID) rows each (100 areas, two wide columns besides, 1,000 GroupIDs
changed), then compares them in a fresh process each way:

- **arrow**: what ``parcelsearch diff`` does (only the compared columns read, GroupIDs kept
  as Arrow strings, the changes found by Arrow's set lookups on one key per row);
- **sets**: the baseline kept for sides whose area ids differ in kind (a Python tuple per
  row, in sets).

Each prints the seconds and the peak resident memory (``ru_maxrss``) of its process.
Figures go to the ``diff`` section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))

from _results import write_section  # noqa: E402

AREAS = [f"a{i:03d}" for i in range(100)]
CHANGED = 1_000

_MEASURE = """
import resource, sys, time
from parcelsearch import comparison as c
started = time.perf_counter()
old, new = c.Side.of_file(sys.argv[1]), c.Side.of_file(sys.argv[2])
if sys.argv[3] == "sets":
    c._changes = c._changes_by_sets
diff = c.compare(old, new)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
      diff.added, diff.removed)
"""


def _write(path: Path, rows: int, shift: int) -> None:
    ids = np.arange(shift, rows + shift)
    table = pa.table(
        {
            "area_id": pa.array(np.array(AREAS)[ids % len(AREAS)]),
            "group_id": pa.array(np.char.zfill(ids.astype(str), 17)),
            "extra": pa.array(np.random.default_rng(shift).random(rows)),
            "padding": pa.array(np.char.zfill((ids % 977).astype(str), 40)),
        }
    )
    meta = {"id_column": "area_id", "areas": AREAS, "areas_complete": AREAS, "tolerance": 0.0}
    pq.write_table(
        table.replace_schema_metadata({b"parcelsearch": json.dumps(meta).encode()}), path
    )


def _measure(way: str, old: Path, new: Path) -> tuple[float, int, int, int]:
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(old), str(new), way],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds, rss, added, removed = done.stdout.split()
    return float(seconds), int(rss), int(added), int(removed)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000_000
    with tempfile.TemporaryDirectory(prefix="bench-diff-") as tmp:
        old, new = Path(tmp) / "old.parquet", Path(tmp) / "new.parquet"
        _write(old, rows, 0)
        _write(new, rows, CHANGED)
        figures = {way: _measure(way, old, new) for way in ("arrow", "sets")}
    lines = ["| way | seconds | peak RSS MiB | added | removed |", "|---|---:|---:|---:|---:|"]
    for way, (seconds, rss, added, removed) in figures.items():
        lines.append(f"| {way} | {seconds:.2f} | {rss // 1024} | {added} | {removed} |")
    arrow, sets = figures["arrow"], figures["sets"]
    lines += [
        "",
        f"{rows:,} rows a side: arrow takes {arrow[0] / sets[0]:.2f} x the time and "
        f"{arrow[1] / sets[1]:.2f} x the memory of sets (same changes: "
        f"{arrow[2:] == sets[2:]}).",
    ]
    text = "\n".join(lines)
    print(text)
    write_section("diff", "## Diff of large outputs (`bench/bench_diff.py`)\n\n" + text)


if __name__ == "__main__":
    main()
