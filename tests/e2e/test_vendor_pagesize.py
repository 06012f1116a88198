"""The vendor's page size learnt, not assumed (issue 47, point 4): a vendor serving 50
GroupIDs a page, with ``pages`` and ``rows`` that agree with 50, is read whole at the
minimum and re-priced; the size is kept per base URL, shown by ``doctor`` and may be set.
Answers whose counts agree with no page size are still refused. The stand-in vendor's
request log (tests/_vendor.py) is the witness of every call."""

from __future__ import annotations

import json

from _cli import run
from _vendor import AREA_PARCELS, exact, search

from parcelsearch._fetch.vendor_profile import PROFILES_FILE

#: Calls at 50 a page: 5 + 4 + 1 + 1 pages in the four areas.
MINIMUM_AT_50 = sum(max(1, -(-count // 50)) for count in AREA_PARCELS.values())


def kept(tmp_path, vendor) -> dict:
    return json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())[vendor.base_url]


def test_fifty_a_page_is_learnt_from_the_first_answer_and_kept(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    assert MINIMUM_AT_50 == 11
    vendor_env.set(page_size=50)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert vendor_env.calls() <= MINIMUM_AT_50 + 1  # the answer that tells it is a page used
    assert err.count("serves 50 ids a page (learnt): re-priced") == 1
    assert "environment variable PARCELSEARCH_PAGE_SIZE" in err  # the command line's words
    assert kept(tmp_path, vendor_env)["page_size"] == 50
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "again.parquet", "--refresh", "all"
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert vendor_env.calls() == MINIMUM_AT_50  # from the profile
    assert "re-priced" not in err  # nothing learnt again
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "cached.parquet")
    assert code == 0, err  # the pages of 50 kept in the cache pass its checks when read
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == 0


def test_a_page_size_set_by_the_user_is_used_and_not_learnt_over(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch
) -> None:
    vendor_env.set(page_size=50)
    monkeypatch.setenv("PARCELSEARCH_PAGE_SIZE", "50")
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == MINIMUM_AT_50
    assert "learnt" not in err
    vendor_env.log.clear()
    monkeypatch.setenv("PARCELSEARCH_PAGE_SIZE", "100")  # wrong: answers are refused
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "wrong.parquet", "--refresh", "all"
    )
    assert code != 0 and "does not add up" in err and "ceil(rows=250 / 100) is 3" in err
    assert "learnt" not in err


def test_a_page_size_that_is_not_a_number_is_refused_before_any_call(
    vendor_env, vendor_areas, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("PARCELSEARCH_PAGE_SIZE", "fifty")
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 2, err
    assert "the page size must be a whole number of GroupIDs" in err
    assert "PARCELSEARCH_PAGE_SIZE" in err and "Traceback" not in err
    assert vendor_env.calls("/v1") == 0


def test_answers_that_agree_with_no_page_size_are_refused(
    vendor_env, vendor_areas, tmp_path, capsys
) -> None:
    vendor_env.set(page_size=50, told_size=100)  # 50 ids, pages counted as if 100
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 3, err
    assert "does not add up" in err and "learnt" not in err
    assert meta["complete"] is False and set(meta["areas_complete"]) == {"charlie", "delta"}
    assert (
        "page_size" not in kept(tmp_path, vendor_env)
        or kept(tmp_path, vendor_env)["page_size"] is None
    )


def test_doctor_shows_the_page_size_and_where_it_comes_from(
    vendor_env, vendor_areas, tmp_path, capsys, monkeypatch
) -> None:
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert code == 0, err
    assert "100 GroupIDs a page (assumed" in out
    vendor_env.set(page_size=50)
    search(capsys, vendor_areas, tmp_path / "ids.parquet")
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert "50 GroupIDs a page (learnt" in out
    monkeypatch.setenv("PARCELSEARCH_PAGE_SIZE", "40")
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert "40 GroupIDs a page (set: PARCELSEARCH_PAGE_SIZE" in out


def test_in_python_the_learnt_size_is_a_warning_naming_the_option(
    vendor_env, vendor_fabric, tmp_path
) -> None:
    import pytest

    import parcelsearch
    from parcelsearch.notices import LearntFactWarning

    vendor_env.set(page_size=50)
    with (
        parcelsearch.Client(cache_dir=tmp_path / "py") as client,
        pytest.warns(LearntFactWarning, match="serves 50 ids a page") as caught,
    ):
        result = parcelsearch.search(vendor_fabric[1], client=client, progress=False)
    assert result.complete and vendor_env.calls() <= MINIMUM_AT_50 + 1
    found = {str(a): set(g) for a, g in result.ids.groupby(result.id_name)["group_id"]}
    assert exact(found, vendor_fabric[2])
    (warning,) = [w.message for w in caught if isinstance(w.message, LearntFactWarning)]
    assert "settings.options.page_size = 50" in str(warning)


def test_the_re_priced_line_is_said_when_learnt_on_its_own_line(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    # the command line with its progress bars (no --quiet) and four workers: the first
    # answer, alone, teaches the size; the line comes then, before the later pages are
    # priced and spent, not after the run, and not inside a bar's line
    vendor_env.set(page_size=50)
    out_file = tmp_path / "ids.parquet"
    code, out, err = run(
        [
            "search",
            str(vendor_areas),
            "--id-column",
            "area_id",
            "--out",
            str(out_file),
            "--workers",
            "4",
        ],
        capsys,
    )
    assert code == 0, err
    assert vendor_env.calls() == MINIMUM_AT_50  # the page that told it is a page used
    said = "serves 50 ids a page (learnt): re-priced"
    assert err.count(said) == 1
    assert err.index(said) < err.index(f"price: exactly {MINIMUM_AT_50} calls")
    line = next(part for part in err.replace("\r", "\n").split("\n") if said in part)
    assert line.startswith("parcelsearch: warning: the vendor at ")  # whole, not in a bar
    assert line.endswith("environment variable PARCELSEARCH_PAGE_SIZE.")
