"""The vendor's quota headers (``X-RateLimit-Remaining`` as Apigee and Kong send it, the IETF
draft's ``RateLimit-Remaining``) lower what a run may spend, never raise it, and the run
stops before the vendor's refusal. The stand-in vendor's request log is the witness."""

from __future__ import annotations

import pytest
from _vendor import MINIMUM, exact, search


@pytest.mark.parametrize("header", ["X-RateLimit-Remaining", "RateLimit-Remaining"])
@pytest.mark.parametrize("left", [3, 5])
def test_the_header_stops_the_run_before_the_refusal(
    vendor_env, vendor_areas, tmp_path, capsys, header, left
) -> None:
    vendor_env.set(quota_left=left, quota_header=header)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 3, err
    assert header in err and meta.get("complete") is not True
    assert [a.status for a in vendor_env.log if a.status == 429] == []  # never refused
    assert vendor_env.calls() <= left
    # without the header, the same key would have met the quota fault
    vendor_env.reset()
    vendor_env.set(quota_left=left, quota_header="X-Not-Read")
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "no.parquet", "--cache-dir", str(tmp_path / "other")
    )
    assert code == 3 and any(a.status == 429 for a in vendor_env.log)


def test_the_header_never_raises_what_the_run_may_spend(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    vendor_env.set(quota_left=1000)
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--budget", "4"
    )
    assert code == 3 and "budget" in err
    assert vendor_env.calls() <= 4
    vendor_env.reset()
    vendor_env.set(quota_left=MINIMUM)  # exactly enough: the last answer says 0 left
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "all.parquet", "--cache-dir", str(tmp_path / "fresh")
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == MINIMUM
