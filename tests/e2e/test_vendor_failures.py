"""A final error on one piece fails that piece and its area, not the run: the other areas
finish and are written, the failed one is named in the vendor's words, the exit code is 3,
and a rerun pays only for what is missing (the stand-in vendor's log is the witness)."""

from __future__ import annotations

import pytest
from _vendor import MINIMUM, exact, search


@pytest.mark.parametrize(
    "fault, words, tries",
    [
        ("refuse400", "HTTP 400: searchPolygon: the ring crosses itself at vertex 3", 1),
        ("garbled", "field 'rows' is 'many', not a count", 2),  # one identical repeat, no more
    ],
)
def test_one_failing_area_is_named_and_the_others_written(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, fault, words, tries
) -> None:
    vendor = vendor_env

    def bravo_page_1(arrival):
        if arrival.page == 1 and arrival.polygon and len(vendor.truth("", arrival.polygon)) == 200:
            return fault
        return None

    vendor.set(fault=bravo_page_1)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 3, err
    assert meta["complete"] is False
    assert set(meta["areas_complete"]) == {"alpha", "charlie", "delta"}
    expected = vendor_fabric[2]
    assert exact(ids, {a: v for a, v in expected.items() if a != "bravo"})
    assert "1 of 4 areas failed (area 'bravo': " in err and words in err
    refused = [a for a in vendor.log if a.page == 1 and a.status in (200, 400) and bravo_page_1(a)]
    assert len(refused) == tries
    # the other areas' pages, bravo's tries, and at most the page-0 probe of the page base
    assert vendor.calls() <= MINIMUM - 2 + tries + 1

    vendor.set(fault=None)
    vendor.log.clear()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "again.parquet")
    assert code == 0, err
    assert exact(ids, expected) and meta["complete"] is True
    assert vendor.calls() == 2  # bravo's two pages, nothing else paid again


def _bravo(vendor, fault):
    """``fault`` for every request of bravo's polygon (200 parcels), whatever its page."""

    def rule(arrival):
        if arrival.polygon and len(vendor.truth("", arrival.polygon)) == 200:
            return fault
        return None

    return rule


def test_one_area_whose_requests_keep_failing_fails_alone(
    vendor_env, vendor_areas, vendor_fabric, tmp_path
) -> None:
    import geopandas as gpd

    import parcelsearch

    vendor = vendor_env
    vendor.set(fault=_bravo(vendor, "html500"))
    areas = gpd.read_file(vendor_areas).set_index("area_id")
    with (
        parcelsearch.Client(retries=1) as client,
        pytest.raises(parcelsearch.AreasFailedError) as caught,
    ):
        parcelsearch.search(areas, client=client, progress=False, workers=4, confirm=True)
    error = caught.value
    assert error.exit_code == 3
    result = error.result
    assert result.complete is False
    assert set(result.areas_complete) == {"alpha", "charlie", "delta"}
    assert (
        "1 of 4 areas failed (area 'bravo': HTTP 500: an HTML page titled '500 Internal "
        "Server Error'" in str(error)
    )
    bravo = [a for a in vendor.log if a.status == 500]
    assert len(bravo) == 2  # its one request, tried twice (retries=1)
    assert vendor.calls() == MINIMUM - 2 + 2
    expected = vendor_fabric[2]
    got = {a: set(g) for a, g in result.ids.groupby("area_id")["group_id"]}
    assert exact(got, {a: v for a, v in expected.items() if a != "bravo"})


def test_every_request_failing_stops_the_run(vendor_env, vendor_areas, tmp_path) -> None:
    import geopandas as gpd

    import parcelsearch

    vendor_env.set(fault=lambda arrival: "html500")
    areas = gpd.read_file(vendor_areas).set_index("area_id")
    with (
        parcelsearch.Client(retries=1) as client,
        pytest.raises(parcelsearch.ParcelSearchError) as caught,
    ):
        parcelsearch.search(areas, client=client, progress=False, workers=4, confirm=True)
    assert "HTTP 500" in str(caught.value)
    assert not isinstance(caught.value, parcelsearch.AreasFailedError)  # the vendor's, said so
    assert vendor_env.calls() <= 2 + 4 * 2  # the first piece alone, then those on the wire


@pytest.mark.slow
def test_one_area_failing_from_the_command_line_exits_3_and_complete_false(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    vendor_env.set(fault=_bravo(vendor_env, "html500"))
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", "4"
    )
    assert code == 3, err
    assert meta["complete"] is False
    assert set(meta["areas_complete"]) == {"alpha", "charlie", "delta"}
    assert "1 of 4 areas failed (area 'bravo': HTTP 500" in err
    assert exact(ids, {a: v for a, v in vendor_fabric[2].items() if a != "bravo"})
    assert len([a for a in vendor_env.log if a.status == 500]) == 6  # 1 + 5 retries
