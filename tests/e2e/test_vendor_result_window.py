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


def _searched_first(vendor, areas, fabric, tmp_path, capsys, workers: str, *, refusals: int) -> str:
    """The first search (``--workers workers``): complete and exact, ``refusals`` calls
    refused, no page asked twice; its standard error."""
    code, out, err, ids, meta = search(
        capsys, areas, tmp_path / "ids.parquet", "--workers", workers
    )
    assert code == 0, err
    assert exact(ids, fabric[2]) and meta["complete"] is True
    assert len(refused(vendor)) == refusals
    assert len(asked(vendor)) == len(set(asked(vendor)))  # no page asked twice
    return err


@pytest.mark.slow
def test_the_window_is_learnt_and_deep_pieces_split(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, caplog
) -> None:
    vendor_env.set(window=WINDOW, page_size=SIZE)
    err = _searched_first(
        vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, "1", refusals=1
    )  # the one call that revealed it
    assert "Result window is too large" in caplog.text  # the vendor's words
    assert "keeps changing" not in caplog.text + err
    assert "serves a search 2 pages deep at most" in caplog.text
    assert all(a.page is None or a.page <= WINDOW for a in vendor_env.log if a.status == 200)
    assert (
        json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())[vendor_env.base_url][
            "result_window"
        ]
        == WINDOW
    )
    first = vendor_env.calls()
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys,
        vendor_areas,
        tmp_path / "again.parquet",
        "--workers",
        "1",
        "--cache-dir",
        str(tmp_path / "fresh"),
    )
    # a fresh cache without the profile: learnt again the same way
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == first
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "known.parquet", "--refresh", "all"
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert not refused(vendor_env)  # from the profile: split before any later page is asked
    assert len(asked(vendor_env)) == len(set(asked(vendor_env)))
    minimum = vendor_env.calls()
    print(f"result window {WINDOW}: first run {first} calls, from the profile {minimum}")
    assert len({a.polygon for a in vendor_env.log}) > 4  # the four areas' pieces were split
    # the first run: the minimum and the one refused call (the deepest page asked first,
    # its refusal stating the window: no page below it asked of a piece then split)
    assert first == minimum + 1, (first, minimum)
    deep = {a.polygon for a in vendor_env.log if a.page == 1} - {
        a.polygon for a in vendor_env.log if a.page and a.page > 1
    }
    assert deep  # pieces whose page 1 alone was asked: the split ones and the small
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert f"{WINDOW} pages a search at most (learnt" in out


def test_a_window_set_by_the_user_splits_before_any_refusal(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch
) -> None:
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


@pytest.mark.parametrize(
    "words",
    [
        "Result window is too large, from + size must be less than or equal to: [100]",
        "Page too large. Narrow the searchPolygon",
    ],
)
def test_the_refusal_is_recognised(words) -> None:
    from parcelsearch._fetch.answers import read_refusal

    body = json.dumps({"status": "ERROR", "messages": [words]}).encode()
    assert read_refusal(400, body).kind == "window"
    assert read_refusal(400, b'{"status": "ERROR", "messages": ["bad polygon"]}').kind == "other"


@pytest.mark.parametrize(
    ("words", "size", "refused", "window"),
    [
        (
            "Result window is too large, from + size must be less than or equal to: [10000] but "
            "was [10100]",
            100,
            101,
            100,
        ),
        ("Result window is too large: page 3 of 50 is beyond the 100 results", 50, 3, 2),
        ("beyond the 1,000 hits a search may be paged through", 100, 12, 10),
        ("Page too large. Narrow the searchPolygon", 100, 5, None),  # no number: none stated
        ("less than or equal to: [10000]", 100, 50, None),  # not below the page refused
        ("less than or equal to: [40]", 50, 3, None),
    ],
)  # less than a page
def test_the_window_stated_in_the_refusal(words, size, refused, window) -> None:
    from parcelsearch._fetch.answers import stated_window

    assert stated_window(words, size, refused) == window


def test_a_plan_given_is_split_in_the_run_not_changed(
    vendor_env, vendor_areas, vendor_fabric, tmp_path
) -> None:
    import geopandas as gpd

    import parcelsearch

    vendor_env.set(window=WINDOW, page_size=SIZE)
    given = parcelsearch.plan(gpd.read_file(vendor_areas).set_index("area_id"))
    pieces = list(given.pieces)
    from parcelsearch.notices import LearntFactWarning

    with (
        parcelsearch.Client(cache_dir=tmp_path / "py") as client,
        pytest.warns(LearntFactWarning, match="serves 50 ids a page"),
    ):
        result = parcelsearch.search(None, plan=given, client=client, progress=False, workers=1)
    assert result.complete and len(refused(vendor_env)) == 1
    found = {str(a): set(g["group_id"]) for a, g in result.ids.groupby(given.id_name)}
    assert exact(found, vendor_fabric[2])
    assert given.pieces == pieces  # the plan itself is not changed
    assert len(result.tiles) > len(pieces)  # its deep pieces and their halves


def test_with_several_workers_it_is_refused_once(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, caplog
) -> None:
    vendor_env.set(window=WINDOW, page_size=SIZE)
    err = _searched_first(
        vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, "4", refusals=1
    )  # the depth gate: one page beyond the frontier
    assert "keeps changing" not in caplog.text + err
    first = vendor_env.calls()
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "known.parquet", "--refresh", "all", "--workers", "4"
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and not refused(vendor_env)
    assert first == vendor_env.calls() + 1  # the minimum (from the profile) plus the refusal


@pytest.mark.parametrize("workers", ["1", "4"])
def test_a_refusal_that_states_no_window_costs_a_second_one(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, workers
) -> None:
    # "Result window is too large. Narrow the searchPolygon." and no number: the deepest
    # page's refusal bounds the window; the pages up to it are then asked shallowest first,
    # so the next refusal, at the page after the deepest answered, is the window exactly
    vendor_env.set(window=WINDOW, page_size=SIZE, window_words="bare")
    _searched_first(vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, workers, refusals=2)
    first = vendor_env.calls()
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "known.parquet", "--refresh", "all", "--workers", workers
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and not refused(vendor_env)
    # the minimum, the two refusals and bravo's page 2 (its page 3 was the refused one)
    assert first == vendor_env.calls() + 3, (first, vendor_env.calls())
