"""Outages with four workers (a maintenance page served with 200, a 503): the other workers
hold, one probe at a time asks again, backed off, and the run stops after a bounded number of
paid probes, keeping what is complete. The stand-in vendor's request log is the witness."""

from __future__ import annotations

import pytest
from _vendor import MINIMUM, exact, search

WORKERS = "4"


def _down_from(number: int, seconds: float | None, fault: str = "maint200"):
    """A fault from the ``number``-th request on, for ``seconds`` (``None``: for good)."""
    window: dict[str, float] = {}

    def outage(arrival):
        if arrival.number < number:
            return None
        start = window.setdefault("start", arrival.at)
        return fault if seconds is None or arrival.at < start + seconds else None

    return outage


def _on_the_wire(down: list) -> int:
    """Of the outage's answers, those already sent when the first of them was answered."""
    first = min(down, key=lambda a: a.answered)
    return sum(1 for a in down if a.at <= first.answered)


@pytest.mark.parametrize("fault", ["maint200", "html503"])
def test_an_outage_met_first_costs_at_most_two_calls(
    vendor_env, vendor_areas, tmp_path, capsys, fault
) -> None:
    outage = _down_from(1, None, fault)
    vendor_env.set(fault=outage)
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", WORKERS
    )
    assert code == 1, err
    assert vendor_env.calls() <= 2
    assert "the outage cost 2 calls" in err and "1 of them a probe" in err
    assert meta == {} or meta["complete"] is False


@pytest.mark.slow
def test_an_outage_that_starts_mid_run_costs_the_requests_in_flight_and_the_probes(
    vendor_env, vendor_areas, tmp_path, capsys
) -> None:
    outage = _down_from(4, None)
    vendor_env.set(fault=outage)
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", WORKERS
    )
    assert code == 1, err
    down = [a for a in vendor_env.log if a.number >= 4]
    first = min(down, key=lambda a: a.answered)
    assert len(down) <= _on_the_wire(down) + 3  # on the wire, then 3 probes
    assert "3 of them probes, one at a time, over " in err and "the outage cost" in err
    assert meta["complete"] is False
    probes = sorted(a.at for a in down if a.at > first.answered)
    assert len(probes) <= 3
    gaps = [b - a for a, b in zip([first.answered, *probes], probes, strict=False)]
    assert all(gap >= 1.5 for gap in gaps)  # one at a time, backed off (2, 4, 8 s)


@pytest.mark.slow
@pytest.mark.parametrize("start", [1, 4])
def test_a_short_maintenance_window_costs_the_requests_in_flight_and_one_probe(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, start
) -> None:
    outage = _down_from(start, 1.5)
    vendor_env.set(fault=outage)
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", WORKERS
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    down = [a for a in vendor_env.log if a.status == 200 and outage(a) == "maint200"]
    assert down
    assert len(down) <= _on_the_wire(down) + 1  # then one probe, 2 s later, found it over
    assert vendor_env.calls() == MINIMUM + len(down)
    if start == 1:
        assert len(down) == 1  # the run's first request goes alone
