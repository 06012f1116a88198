"""A run never spends more than its budget, with 16 threads racing for the last calls.

Counted where it cannot be fooled: at the fault proxy (every HTTP attempt, retries included)
and in the service's own request log.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import geopandas as gpd
import pytest
from _faultproxy import FaultProxy
from shapely.geometry import box

from parcelsearch import Ledger, search
from parcelsearch._run import fetching
from parcelsearch.errors import BudgetExhaustedError
from parcelsearch.notices import PartialResultWarning

BUDGET = 7
WORKERS = 16


class YieldingLock:
    """A lock that lets other threads run right after each release: any check-then-act split
    over two critical sections is interleaved with the other threads' checks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> YieldingLock:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        time.sleep(0.002)


@pytest.fixture
def racy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Provoke races: the search's run lock yields on release, and threads switch as often
    as the interpreter can."""
    init = fetching.Run.__init__

    def patched(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.lock = YieldingLock()

    monkeypatch.setattr(fetching.Run, "__init__", patched)
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


@pytest.fixture(scope="module")
def many_areas() -> gpd.GeoDataFrame:
    """40 small areas in the demo fabric: 40 page-1 requests that all start at once."""
    cells = [
        box(
            -99.735 + 0.0015 * (i % 8),
            32.445 + 0.0015 * (i // 8),
            -99.735 + 0.0015 * (i % 8) + 0.001,
            32.445 + 0.0015 * (i // 8) + 0.001,
        )
        for i in range(40)
    ]
    return gpd.GeoDataFrame(
        {"area_id": [f"a{i:02d}" for i in range(40)]}, geometry=cells, crs="EPSG:4326"
    )


@pytest.mark.parametrize("ledger", ["sqlite-ledger", "no-ledger"])
@pytest.mark.parametrize("areas", ["demo", "many"])
def test_budget_is_never_exceeded_by_many_threads(
    ledger: str,
    areas: str,
    racy: None,
    fault_proxy: FaultProxy,
    fast_key: Any,
    make_fast_client: Any,
    service: Any,
    demo_areas_gdf: gpd.GeoDataFrame,
    many_areas: gpd.GeoDataFrame,
    tmp_path: Any,
    figures: Any,
) -> None:
    frame = demo_areas_gdf if areas == "demo" else many_areas
    key = fast_key()
    # Some attempts fail and are retried: retries must be paid from the same budget.
    fault_proxy.rule = lambda a: "503" if a.number in (2, 4) else None
    client = make_fast_client(key, base_url=fault_proxy.base_url, rate=200)
    the_ledger = Ledger(tmp_path / "ledger.sqlite") if ledger == "sqlite-ledger" else False
    for run in range(3):
        fault_proxy.reset_log()
        with pytest.warns(PartialResultWarning, match=f"budget of {BUDGET} calls") as told:
            partial = search(
                frame,
                client=client,
                id_column="area_id",
                budget=BUDGET,
                allow_partial=True,
                ledger=the_ledger,
                cache=False,
                progress=False,
                workers=WORKERS,
            )
        stopped = told[0].message.error  # type: ignore[union-attr]
        assert isinstance(stopped, BudgetExhaustedError)
        sent = len(fault_proxy.arrivals)
        assert sent <= BUDGET, f"run {run}: {sent} attempts on a budget of {BUDGET}"
        assert stopped.spent == partial.calls == sent
        assert not partial.complete
        figures.add("calls counted", f"budget runs ({ledger}), attempts at the proxy", sent)
    log = service.keys.requests(key.name)
    assert len(log) <= 3 * BUDGET
    if isinstance(the_ledger, Ledger):
        assert the_ledger.usage(client.fingerprint).lifetime == 3 * BUDGET
