"""A vendor that serves a search only so many pages deep (issue 47, point 1): pages above
its result window are refused with a 400 "Result window is too large … Narrow the
searchPolygon". The refusal teaches the window (the page before), kept per base URL; pieces
with more pages are split until each fits, and the next search splits them before asking any
later page. The stand-in vendor's request log (tests/_vendor.py) is the witness of every
call."""

from __future__ import annotations

import json

import pytest
from _cli import run
from _vendor import exact, search

from parcelsearch._fetch.vendor_profile import PROFILES_FILE

WINDOW = 2
SIZE = 50  # alpha 5 pages, bravo 4, charlie 1, delta 0


def refused(vendor) -> list:
    return [a for a in vendor.log if a.status == 400]


def asked(vendor) -> list[tuple[str | None, int | None]]:
    return [(a.polygon, a.page) for a in vendor.log if a.status == 200]


def test_the_window_is_learnt_and_deep_pieces_split(vendor_env, vendor_areas, vendor_fabric,
                                                    tmp_path, capsys, caplog) -> None:
    vendor_env.set(window=WINDOW, page_size=SIZE)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet",
                                       "--workers", "1")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert len(refused(vendor_env)) == 1  # the one call that revealed it
    assert "Result window is too large" in caplog.text  # the vendor's words
    assert "keeps changing" not in caplog.text + err
    assert "serves a search 2 pages deep at most" in caplog.text
    assert all(a.page is None or a.page <= WINDOW for a in vendor_env.log if a.status == 200)
    assert len(asked(vendor_env)) == len(set(asked(vendor_env)))  # no page asked twice
    assert json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())[
        vendor_env.base_url]["result_window"] == WINDOW
    first = vendor_env.calls()
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "again.parquet",
                                       "--workers", "1", "--cache-dir", str(tmp_path / "fresh"))
    # a fresh cache without the profile: learnt again the same way
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == first
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "known.parquet",
                                       "--refresh", "all")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert not refused(vendor_env)  # from the profile: split before any later page is asked
    assert len(asked(vendor_env)) == len(set(asked(vendor_env)))
    minimum = vendor_env.calls()
    print(f"result window {WINDOW}: first run {first} calls, from the profile {minimum}")
    assert len({a.polygon for a in vendor_env.log}) > 4  # the four areas' pieces were split
    # the first run: the minimum, the pages below the window of the piece that revealed it
    # (2..WINDOW, not usable once it is split) and the one refused call
    assert first == minimum + (WINDOW - 1) + 1, (first, minimum)
    deep = {a.polygon for a in vendor_env.log if a.page == 1} - \
        {a.polygon for a in vendor_env.log if a.page and a.page > 1}
    assert deep  # pieces whose page 1 alone was asked: the split ones and the small
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert f"{WINDOW} pages a search at most (learnt" in out


def test_a_window_set_by_the_user_splits_before_any_refusal(vendor_env, vendor_areas,
                                                            vendor_fabric, tmp_path, capsys,
                                                            monkeypatch) -> None:
    vendor_env.set(window=WINDOW, page_size=SIZE)
    monkeypatch.setenv("PARCELSEARCH_RESULT_WINDOW", str(WINDOW))
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert not refused(vendor_env)
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert f"{WINDOW} pages a search at most (set: PARCELSEARCH_RESULT_WINDOW" in out
    monkeypatch.setenv("PARCELSEARCH_RESULT_WINDOW", "0")
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "bad.parquet")
    assert code == 2 and "the result window must be a whole number of pages" in err
    assert "PARCELSEARCH_RESULT_WINDOW" in err and vendor_env.calls("/v1") == 0


@pytest.mark.parametrize("words", [
    "Result window is too large, from + size must be less than or equal to: [100]",
    "Page too large. Narrow the searchPolygon"])
def test_the_refusal_is_recognised(words) -> None:
    from parcelsearch._fetch.answers import read_refusal

    body = json.dumps({"status": "ERROR", "messages": [words]}).encode()
    assert read_refusal(400, body).kind == "window"
    assert read_refusal(400, b'{"status": "ERROR", "messages": ["bad polygon"]}').kind == "other"


def test_a_plan_given_is_split_in_the_run_not_changed(vendor_env, vendor_areas, vendor_fabric,
                                                      tmp_path) -> None:
    import geopandas as gpd

    import parcelsearch

    vendor_env.set(window=WINDOW, page_size=SIZE)
    given = parcelsearch.plan(gpd.read_file(vendor_areas).set_index("area_id"))
    pieces = list(given.pieces)
    from parcelsearch.notices import LearntFactWarning

    with parcelsearch.Client(cache_dir=tmp_path / "py") as client, \
            pytest.warns(LearntFactWarning, match="serves 50 ids a page"):
        result = parcelsearch.search(None, plan=given, client=client, progress=False, workers=1)
    assert result.complete and len(refused(vendor_env)) == 1
    found = {str(a): set(g["group_id"]) for a, g in result.ids.groupby(given.id_name)}
    assert exact(found, vendor_fabric[2])
    assert given.pieces == pieces  # the plan itself is not changed
    assert len(result.tiles) > len(pieces)  # its deep pieces and their halves


def test_with_several_workers_the_area_is_whole(vendor_env, vendor_areas, vendor_fabric,
                                                tmp_path, capsys, caplog) -> None:
    vendor_env.set(window=WINDOW, page_size=SIZE)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet",
                                       "--workers", "4")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert 1 <= len(refused(vendor_env)) <= 4  # pages asked together before it was learnt
    assert "keeps changing" not in caplog.text + err
