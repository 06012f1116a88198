"""Write one benchmark's figures into its own section of ``bench/RESULTS.md``.

Each benchmark owns the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``;
running one benchmark leaves the others' sections as they were.
"""

from __future__ import annotations

import platform
import re
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
_HEADER = "# Benchmark results\n\nWritten by the benchmarks in `bench/`; do not edit by hand.\n"


def write_section(name: str, markdown: str, path: Path = RESULTS) -> None:
    """Replace (or append) the section ``name`` of the results file with ``markdown``."""
    stamp = (
        f"_{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}_\n\n"
    )
    block = f"<!-- {name}:start -->\n{stamp}{markdown.rstrip()}\n<!-- {name}:end -->"
    text = path.read_text() if path.exists() else _HEADER
    tag = re.escape(name)
    pattern = re.compile(rf"<!-- {tag}:start -->.*?<!-- {tag}:end -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _m: block, text)
    else:
        text = f"{text.rstrip()}\n\n{block}\n"
    path.write_text(text)
