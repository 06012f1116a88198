"""Fixtures of the reliability and security suite, and the figures it reports.

- ``figures``: the session's collector (faults injected, inputs tried, calls counted, IDs
  compared, …). At the end of a session that ran reliability tests it is printed (terminal
  summary) and written, with the tiling property figures (``_figures/tiling.json``), to
  ``tests/reliability/_figures/RESULTS.md`` (git-ignored, so a test run leaves the tree
  clean). Set ``PARCELSEARCH_RECORD_RESULTS=1`` to update the committed record
  ``tests/reliability/RESULTS.md`` instead.
- ``fast_key(**overrides)``: a production key on the session service allowing 50 calls/s.
- ``make_fast_client(key, base_url=None, **kwargs)``: a ``Client`` for it (rate 40/s, own
  cache folder in ``tmp_path``, the service's CA).
- ``fault_proxy``: a :class:`_faultproxy.FaultProxy` in front of the session service.
- ``demo_baseline``: the fault-free ``ids`` of the demo areas (computed once).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest

import parcelsearch
from parcelsearch import Client, search

sys.path.insert(0, str(Path(__file__).parent))
from _faultproxy import FaultProxy  # noqa: E402

HERE = Path(__file__).parent
#: The committed record, rewritten only when asked (``PARCELSEARCH_RECORD_RESULTS=1``).
RECORD = HERE / "RESULTS.md"
#: Where every session's figures go otherwise (git-ignored).
RESULTS = (
    RECORD
    if os.environ.get("PARCELSEARCH_RECORD_RESULTS") == "1"
    else (HERE / "_figures" / "RESULTS.md")
)
TILING = HERE / "_figures" / "tiling.json"
FAST_RATE = 50.0  # calls/s the keys of this suite allow
CLIENT_RATE = 40.0  # calls/s their clients send


class Figures:
    """Counts by section, plus free-text notes, gathered by the tests of one session."""

    def __init__(self) -> None:
        self.sections: dict[str, Counter[str]] = defaultdict(Counter)
        self.notes: list[str] = []
        self.outcomes: Counter[str] = Counter()
        self.started = time.monotonic()

    def add(self, section: str, name: str, n: int = 1) -> None:
        self.sections[section][name] += int(n)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def total(self, section: str) -> int:
        return sum(self.sections[section].values())


FIGURES = Figures()


@pytest.fixture(scope="session")
def figures() -> Figures:
    """The session's figure collector."""
    return FIGURES


@pytest.fixture
def fast_key(make_key: Callable[..., Any]) -> Callable[..., Any]:
    """``fast_key(**overrides)``: a production key allowing 50 calls/s, quota 100,000."""

    def make(**overrides: Any) -> Any:
        overrides.setdefault("per_second", FAST_RATE)
        overrides.setdefault("quota", 100_000)
        return make_key("production", **overrides)

    return make


@pytest.fixture
def make_fast_client(service: Any, ca_bundle: str, tmp_path: Path) -> Callable[..., Client]:
    """``make_fast_client(key, base_url=None, cache="cache", **kwargs)``: a Client at 40/s."""

    def make(key: str, base_url: str | None = None, cache: str = "cache", **kwargs: Any) -> Client:
        kwargs.setdefault("rate", CLIENT_RATE)
        return Client(
            api_key=key,
            base_url=base_url or service.base_url,
            ca_bundle=ca_bundle,
            cache_dir=tmp_path / cache,
            **kwargs,
        )

    return make


@pytest.fixture
def fault_proxy(service: Any, service_cert_dir: Path) -> Iterator[FaultProxy]:
    """A fault-injecting HTTPS proxy in front of the session service."""
    proxy = FaultProxy(service.base_url, service_cert_dir)
    yield proxy
    proxy.close()


@pytest.fixture(scope="session")
def demo_areas_gdf() -> gpd.GeoDataFrame:
    return parcelsearch.demo_areas()


@pytest.fixture(scope="session")
def demo_baseline(
    service: Any,
    ca_bundle: str,
    demo_areas_gdf: gpd.GeoDataFrame,
    tmp_path_factory: pytest.TempPathFactory,
) -> pd.DataFrame:
    """``ids`` of the demo areas from a fault-free run (own key, own cache)."""
    key = service.keys.create(
        "reliability-baseline", key_type="production", per_second=FAST_RATE, quota=100_000
    )
    client = Client(
        api_key=key,
        base_url=service.base_url,
        ca_bundle=ca_bundle,
        rate=CLIENT_RATE,
        cache_dir=tmp_path_factory.mktemp("baseline"),
    )
    with client:
        result = search(demo_areas_gdf, client=client, id_column="area_id", progress=False)
    assert result.complete and len(result.ids) > 500
    FIGURES.add("calls counted", "baseline demo search (fault-free)", result.calls)
    return result.ids


# -- reporting ----------------------------------------------------------------------------


def _ours(nodeid: str) -> bool:
    return nodeid.replace("\\", "/").startswith("tests/reliability/")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _ours(report.nodeid):
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        FIGURES.outcomes[report.outcome] += 1
        if report.outcome == "passed":
            module = report.nodeid.split("::")[0].rsplit("/", 1)[-1]
            FIGURES.add("tests passed", module)


def _tiling() -> dict[str, int]:
    try:
        return dict(json.loads(TILING.read_text()))
    except (OSError, ValueError):
        return {}


def _markdown(session_seconds: float) -> str:
    lines = [
        "# Reliability and security: results",
        "",
        "Written by `tests/reliability/conftest.py` at the end of a session that ran the",
        "reliability tests with `PARCELSEARCH_RECORD_RESULTS=1` (otherwise the figures go to",
        "the git-ignored `tests/reliability/_figures/RESULTS.md`). Do not edit by hand.",
        "",
        f"- tests: {FIGURES.outcomes.get('passed', 0)} passed, "
        f"{FIGURES.outcomes.get('failed', 0)} failed, "
        f"{FIGURES.outcomes.get('skipped', 0)} skipped",
        f"- session: {session_seconds:.1f} s",
        "",
    ]
    for section in sorted(FIGURES.sections):
        counts = FIGURES.sections[section]
        lines += [
            f"## {section} (total {sum(counts.values()):,})",
            "",
            "| what | count |",
            "|---|---:|",
        ]
        lines += [f"| {name} | {n:,} |" for name, n in sorted(counts.items())]
        lines.append("")
    tiling = _tiling()
    if tiling:
        lines += [
            "## tiling properties (hypothesis, `_figures/tiling.json`)",
            "",
            "| what | count |",
            "|---|---:|",
        ]
        lines += [f"| {name} | {n:,} |" for name, n in sorted(tiling.items())]
        lines.append("")
    if FIGURES.notes:
        lines += ["## notes", ""] + [f"- {note}" for note in FIGURES.notes] + [""]
    return "\n".join(lines)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if sum(FIGURES.outcomes.values()) and FIGURES.sections:
        where = _results(getattr(session.config, "workerinput", {}).get("workerid"))
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(_markdown(time.monotonic() - FIGURES.started))


def _results(worker: str | None) -> Path:
    """Where a session's figures go: :data:`RESULTS`, or under pytest-xdist each worker's
    share beside it in ``_figures/`` (never a partial committed record: record with
    ``-n 0``)."""
    if worker is None:
        return RESULTS
    return HERE / "_figures" / f"RESULTS.{worker}.md"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    if not (sum(FIGURES.outcomes.values()) and FIGURES.sections):
        return
    write = terminalreporter.write_line
    terminalreporter.section("reliability figures")
    for section in ("faults injected", "inputs tried", "calls counted", "IDs compared"):
        counts = FIGURES.sections.get(section)
        if counts:
            top = ", ".join(f"{k} {v:,}" for k, v in counts.most_common(4))
            write(f"{section}: {sum(counts.values()):,}  ({top}{', …' if len(counts) > 4 else ''})")
    tiling = _tiling()
    if tiling:
        write(
            f"tiling properties: {tiling.get('exact_examples', 0)} exact + "
            f"{tiling.get('tolerance_examples', 0)} tolerance examples, "
            f"{tiling.get('exact_pieces_checked', 0) + tiling.get('tolerance_pieces_checked', 0)}"
            " pieces checked"
        )
    write(f"written to {RESULTS.relative_to(HERE.parent.parent)}")
