"""A gateway with a shorter request-line limit (issue 47, point 2): 4,096 bytes, refused as
Apigee does (414, ``TooBigLine``) or as IIS does (an HTML 404.15 "query string too long").
The refusal is said in the vendor's words, never blamed on a stage prefix; the limit it
teaches is kept per base URL, so the next search plans its pieces to it; the user may set
it (``PARCELSEARCH_MAX_REQUEST_BYTES``) and ``doctor`` shows it. The stand-in vendor's
request log (tests/_vendor.py) is the witness of every call."""

from __future__ import annotations

import json
import warnings

import pytest
from _cli import run
from _vendor import exact, search

from parcelsearch._fetch.vendor_profile import PROFILES_FILE

WORDS = {
    "apigee": ("HTTP 414", "Request line is too long", "protocol.http.TooBigLine"),
    "iis": ("HTTP 404", "IIS 10.0 Detailed Error - 404.15 - Not Found"),
}


@pytest.fixture
def detailed_areas(tmp_path, vendor_fabric):
    """The four study areas with round corners (about 260 vertices each): request lines over
    4,096 bytes under the 7,168-byte default, one piece an area."""
    areas = vendor_fabric[1].copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # buffer in degrees: the shape is the aim
        areas["geometry"] = areas.buffer(0.0004, quad_segs=64)
    path = tmp_path / "detailed.gpkg"
    areas.reset_index().to_file(path)
    return path


def long_lines(vendor) -> list:
    return [a for a in vendor.log if a.status in (404, 414)]


def paid_once(vendor) -> bool:
    """No page answered twice: the plan's minimum."""
    asked = [(a.polygon, a.page) for a in vendor.log if a.status == 200]
    return len(asked) == len(set(asked))


@pytest.mark.parametrize("gateway", ["apigee", "iis"])
def test_a_refused_line_is_learnt_and_the_areas_planned_again(
    vendor_env, detailed_areas, vendor_fabric, tmp_path, capsys, caplog, gateway
) -> None:
    vendor_env.set(line_limit=4096, line_refusal=gateway)
    code, out, err, ids, meta = search(
        capsys, detailed_areas, tmp_path / "ids.parquet", "--workers", "1"
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert len(long_lines(vendor_env)) == 1  # the one call that revealed it
    assert paid_once(vendor_env)  # then the new plan's pages, each once
    assert "planned again" in caplog.text and "4,096" in caplog.text
    assert all(word in caplog.text for word in WORDS[gateway]), caplog.text  # its words
    assert "stage" not in caplog.text  # not blamed on a missing stage prefix
    assert (
        json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())[vendor_env.base_url][
            "max_request_bytes"
        ]
        == 4096
    )
    first = vendor_env.calls()
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, detailed_areas, tmp_path / "again.parquet", "--refresh", "all"
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert not long_lines(vendor_env) and paid_once(vendor_env)  # from the profile
    assert vendor_env.calls() == first - 1  # the minimum
    assert max(len(a.polygon or "") for a in vendor_env.log) > 1000  # detailed pieces


@pytest.mark.parametrize("gateway", ["apigee", "iis"])
def test_a_plan_given_is_not_planned_again_and_the_refusal_is_said(
    vendor_env, detailed_areas, tmp_path, capsys, gateway
) -> None:
    import geopandas as gpd

    import parcelsearch
    from parcelsearch.errors import AreasFailedError

    vendor_env.set(line_limit=4096, line_refusal=gateway)
    given = parcelsearch.plan(gpd.read_file(detailed_areas).set_index("area_id"))
    with (
        parcelsearch.Client(cache_dir=tmp_path / "py") as client,
        pytest.raises(AreasFailedError) as caught,
    ):
        parcelsearch.search(None, plan=given, client=client, progress=False, workers=1)
    text = str(caught.value)
    assert all(word in text for word in WORDS[gateway]), text
    assert "takes at most 4,096 bytes" in text and "stage" not in text
    assert len(long_lines(vendor_env)) == 1  # the others not sent: over the limit learnt
    assert "not sent: a request line of" in text


def test_a_limit_set_by_the_user_plans_every_piece_to_it(
    vendor_env, detailed_areas, vendor_fabric, tmp_path, capsys, monkeypatch
) -> None:
    code, out, err, ids, meta = search(capsys, detailed_areas, tmp_path / "free.parquet")
    assert code == 0, err  # no limit at the gateway: one piece an area
    vendor_env.set(line_limit=4096)
    vendor_env.log.clear()
    monkeypatch.setenv("PARCELSEARCH_MAX_REQUEST_BYTES", "4096")
    code, out, err, ids, meta = search(capsys, detailed_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert not long_lines(vendor_env)
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert "4,096 bytes at most (set: --max-request-bytes or PARCELSEARCH_MAX_REQUEST_BYTES" in out
    monkeypatch.delenv("PARCELSEARCH_MAX_REQUEST_BYTES")
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys,
        detailed_areas,
        tmp_path / "flag.parquet",
        "--max-request-bytes",
        "4096",
        "--refresh",
        "all",
    )
    assert code == 0, err  # the flag: the same plan, nothing refused
    assert exact(ids, vendor_fabric[2]) and not long_lines(vendor_env)
    code, out, err = run(["doctor", "--dry-run", "--max-request-bytes", "2048"], capsys)
    assert "2,048 bytes at most (set" in out
    code, out, err = run(["doctor", "--dry-run", "--max-request-bytes", "100"], capsys)
    assert code == 2 and "--max-request-bytes" in err and "at least 1024" in err
    monkeypatch.setenv("PARCELSEARCH_MAX_REQUEST_BYTES", "tiny")
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, detailed_areas, tmp_path / "bad.parquet")
    assert code == 2 and "the longest request line must be a whole number of bytes" in err
    assert vendor_env.calls("/v1") == 0


def test_doctor_shows_the_request_line_limit_assumed(vendor_env, capsys) -> None:
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert code == 0, err
    assert "7,168 bytes at most (assumed until the gateway refuses a line" in out


def test_with_several_workers_a_line_is_refused_once(
    vendor_env, vendor_fabric, tmp_path, capsys
) -> None:
    # alpha and bravo plain (short lines, answered first), charlie and delta detailed: the
    # length gate sends one line longer than any answered at a time, so the two detailed
    # page 1s are not both on the wire when the gateway refuses the first
    areas = vendor_fabric[1].copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        detailed = areas.buffer(0.0004, quad_segs=64)
    areas["geometry"] = [
        plain if area in ("alpha", "bravo") else round_
        for area, plain, round_ in zip(areas.index, areas.geometry, detailed, strict=True)
    ]
    path = tmp_path / "mixed.gpkg"
    areas.reset_index().to_file(path)
    vendor_env.set(line_limit=4096)
    code, out, err, ids, meta = search(capsys, path, tmp_path / "ids.parquet", "--workers", "4")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert vendor_env.log[0].status == 200  # a short line answered first …
    assert len(long_lines(vendor_env)) == 1  # … then one refusal, whatever the workers
    assert paid_once(vendor_env)
    first = vendor_env.calls()
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, path, tmp_path / "again.parquet", "--workers", "4", "--refresh", "all"
    )
    assert code == 0, err
    assert not long_lines(vendor_env) and vendor_env.calls() == first - 1  # the minimum
