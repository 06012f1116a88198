"""A final error on one piece fails that piece and its area, not the run: the other areas
finish and are written, the failed one is named in the vendor's words, the exit code is 3,
and a rerun pays only for what is missing (the stand-in vendor's log is the witness)."""

from __future__ import annotations

import pytest
from _vendor import MINIMUM, exact, search


@pytest.mark.parametrize("fault, words, tries", [
    ("refuse400", "HTTP 400: searchPolygon: the ring crosses itself at vertex 3", 1),
    ("garbled", "field 'rows' is 'many', not a count", 2),  # one identical repeat, no more
])
def test_one_failing_area_is_named_and_the_others_written(vendor_env, vendor_areas,
                                                          vendor_fabric, tmp_path, capsys,
                                                          fault, words, tries) -> None:
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
    refused = [a for a in vendor.log if a.page == 1 and a.status in (200, 400)
               and bravo_page_1(a)]
    assert len(refused) == tries
    # the other areas' pages, bravo's tries, and at most the page-0 probe of the page base
    assert vendor.calls() <= MINIMUM - 2 + tries + 1

    vendor.set(fault=None)
    vendor.log.clear()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "again.parquet")
    assert code == 0, err
    assert exact(ids, expected) and meta["complete"] is True
    assert vendor.calls() == 2  # bravo's two pages, nothing else paid again
