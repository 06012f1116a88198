"""Paging as a real vendor may do it: never silently wrong, exit code and ``complete``
always agreeing. The stand-in vendor's request log (tests/_vendor.py) is the witness."""

from __future__ import annotations

import json

import pytest
from _vendor import MINIMUM, exact, search

from parcelsearch._fetch.vendor_profile import PROFILES_FILE


def shrunk(vendor, expected: dict[str, set[str]]) -> dict[str, set[str]]:
    """Each area's GroupIDs once its result lost its last 100 (the vendor's order)."""
    out = dict(expected)
    for ids in vendor._truth.values():
        for area, wanted in expected.items():
            if wanted and set(ids) == wanted and len(ids) > 100:
                out[area] = set(ids[:-100])
    return out


def test_unstable_order_is_never_complete(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    vendor_env.set(order="shuffled")
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 3, err
    assert meta["complete"] is False
    assert "order is not stable" in err and "'alpha'" in err and "'bravo'" in err
    expected = vendor_fabric[2]
    assert ids.get("charlie") == expected["charlie"]  # one page: no order to keep
    assert set(meta["areas_complete"]) == {"charlie", "delta"}
    # each multi-page area: its pages, one overlap check (page 1 again) and the probe of the
    # page base (page 0, once per base URL) at most
    assert vendor_env.calls() <= MINIMUM + 2 + 1


@pytest.mark.parametrize("past_last", ["last", "empty", "400"])
def test_pages_from_zero_are_learned_once_per_base_url(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, past_last
) -> None:
    vendor_env.set(base=0, past_last=past_last)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    # the probe (page 0, once), then every piece read again from page 0
    assert vendor_env.calls() <= 2 * MINIMUM + 2  # + a page in flight when it was learned
    profiles = json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())
    assert profiles[vendor_env.base_url]["page_base"] == 0
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "again.parquet", "--refresh", "all"
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert vendor_env.calls() == MINIMUM  # the profile: no probe, no page read twice


@pytest.mark.parametrize("past_last", ["400", "empty", "last"])
def test_pages_that_shrink_mid_run_are_read_again_consistently(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, past_last
) -> None:
    vendor_env.set(shrink_after=1, past_last=past_last, base=1)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert meta["complete"] is True
    assert ids == {a: v for a, v in shrunk(vendor_env, vendor_fabric[2]).items() if v}
    spent = vendor_env.calls()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "again.parquet")
    assert code == 0, err  # nothing stale is left cached to fail every rerun
    assert meta["complete"] is True and vendor_env.calls() == spent


@pytest.mark.parametrize("empty", ["404", "200-error"])
def test_empty_result_worded_as_an_error_is_an_empty_area(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, empty
) -> None:
    vendor_env.set(empty=empty)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert "delta" in meta["areas_complete"]
    assert vendor_env.calls() == MINIMUM


def test_a_runs_probes_count_toward_its_budget_and_are_shown(
    vendor_env, vendor_areas, tmp_path, capsys
) -> None:
    # a vendor counting from 0: the run probes page=0 (and may read a page 1 again): those
    # calls are in its count, its budget and its summary line, named, and in its metadata
    vendor_env.set(base=0)
    code, out, err = _cli_search(capsys, vendor_areas, tmp_path / "free.parquet")
    assert code == 0, err
    zero = [a.number for a in vendor_env.log if a.page == 0]
    assert len(zero) == 5  # the probe, then the four pieces read again from page 0
    needed = vendor_env.calls()
    meta = _meta(tmp_path / "free.parquet")
    assert meta["calls"] == needed and meta["probes"] == 1  # the probe among the calls
    assert f"{needed} calls made (1 probe of the vendor's paging among them)" in out
    for budget in (needed - 1, zero[0] - 1):  # short of the run, or of its probe
        (tmp_path / "cache" / PROFILES_FILE).unlink()  # the page base unknown again
        vendor_env.log.clear()
        code, out, err = _cli_search(
            capsys,
            vendor_areas,
            tmp_path / f"b{budget}.parquet",
            "--budget",
            str(budget),
            "--refresh",
            "all",
            "--yes",
        )
        assert code != 0 and "budget" in err.lower()
        assert vendor_env.calls() <= budget  # never over it: the probe is one of them


def _cli_search(capsys, areas, out, *extra):
    from _cli import run

    return run(
        ["search", str(areas), "--id-column", "area_id", "--quiet", "--out", str(out), *extra],
        capsys,
    )


def _meta(path) -> dict:
    import pyarrow.parquet as pq

    return json.loads(pq.read_schema(path).metadata[b"parcelsearch"])


def test_a_slipped_page_is_never_complete(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    # each page after the first begins with the previous page's last id (rows unchanged):
    # alpha (3 pages) loses 2 ids, bravo (2 pages) 1; the vendor lists each id once, which
    # the run learns from the 230 ids of the first pages (none twice in a page)
    vendor_env.set(slip=True)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 3, err
    assert meta["complete"] is False
    assert set(meta["areas_complete"]) == {"charlie", "delta"}
    assert "2 of 4 areas failed" in err and "a page slipped" in err
    expected = vendor_fabric[2]
    assert ids.get("charlie") == expected["charlie"]
    profiles = json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())
    assert profiles[vendor_env.base_url]["ids_once"] is True
    assert vendor_env.calls() <= MINIMUM + 1  # no re-reading: the boundary tells it

    vendor_env.reset()  # the vendor's paging mended: the failed areas are read again
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "again.parquet")
    assert code == 0, err
    assert exact(ids, expected) and meta["complete"] is True


def test_a_vendor_listing_parcels_each_keeps_a_boundary_repeat(
    vendor_env, vendor_areas, tmp_path, capsys
) -> None:
    # where the vendor is known to list a condominium's parcels each (an id twice in a page),
    # an id repeated at a boundary is a condominium split by the page break: nothing can
    # tell a slip by one from it (the vendor guide says so; --verify-sample re-reads)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / PROFILES_FILE).write_text(
        json.dumps(
            {
                vendor_env.base_url: {
                    "base_url": vendor_env.base_url,
                    "ids_once": False,
                    "page_base": 1,
                }
            }
        )
    )
    vendor_env.set(slip=True)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert meta["complete"] is True  # as the vendor guide warns: not detectable here
