"""Answers a real vendor sends that our reference service does not: read exactly, at the
minimum calls. The stand-in vendor's request log (tests/_vendor.py) is the witness."""

from __future__ import annotations

import pytest
from _vendor import MINIMUM, exact, search


@pytest.mark.parametrize(
    "switches",
    [
        {},
        {"gzip": True},
        {"numbers": "str"},
        {"datarows": False},
        {"extra_fields": True},
        {"gzip": True, "numbers": "str", "datarows": False, "extra_fields": True},
    ],
    ids=["as-reference", "gzip", "numbers-as-strings", "no-datarows", "unknown-fields", "all"],
)
def test_readable_answers_give_exact_ids_at_the_minimum(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, switches
) -> None:
    vendor_env.set(**switches)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2])
    assert meta["complete"] is True
    assert vendor_env.calls() == MINIMUM


def test_python_api_reads_them_too_and_a_failed_area_is_on_the_error(
    vendor, vendor_fabric, ca_bundle, tmp_path
) -> None:
    import parcelsearch

    vendor.set(gzip=True, numbers="str", datarows=False, empty="200-error")
    with parcelsearch.Client(
        "a-vendor-key", vendor.base_url, ca_bundle, rate=200, cache_dir=tmp_path / "cache"
    ) as client:
        result = parcelsearch.search(vendor_fabric[1], client=client, progress=False)
        assert result.complete and vendor.calls() == MINIMUM
        ids = {str(a): set(g["group_id"]) for a, g in result.ids.groupby("area_id")}
        assert exact(ids, vendor_fabric[2])

        def refuse_alpha(arrival):
            text = arrival.polygon or ""
            return "refuse400" if arrival.page == 1 and len(vendor.truth("", text)) == 250 else None

        vendor.set(fault=refuse_alpha)
        with pytest.raises(parcelsearch.AreasFailedError, match="area 'alpha': HTTP 400") as e:
            parcelsearch.search(vendor_fabric[1], client=client, progress=False, refresh="all")
    assert set(e.value.failures) == {"alpha"}
    assert e.value.result.complete is False
    assert set(e.value.result.areas_complete) == {"bravo", "charlie", "delta"}
