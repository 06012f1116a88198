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

WORDS = {"apigee": ("HTTP 414", "Request line is too long", "protocol.http.TooBigLine"),
         "iis": ("HTTP 404", "IIS 10.0 Detailed Error - 404.15 - Not Found")}


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


@pytest.mark.parametrize("gateway", ["apigee", "iis"])
def test_a_refused_line_is_said_and_its_limit_kept_for_the_next_search(
        vendor_env, detailed_areas, vendor_fabric, tmp_path, capsys, gateway) -> None:
    vendor_env.set(line_limit=4096, line_refusal=gateway)
    code, out, err, ids, meta = search(capsys, detailed_areas, tmp_path / "ids.parquet")
    assert code == 3, err  # those areas failed, none silently
    assert all(word in err for word in WORDS[gateway]), err
    assert "stage" not in err and "/prod" not in err  # not blamed on a missing stage prefix
    assert "refused a request line of" in err and "takes at most 4,096 bytes" in err
    assert meta["complete"] is False
    assert len(long_lines(vendor_env)) == 4  # page 1 of each area's one piece, refused
    assert json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())[
        vendor_env.base_url]["max_request_bytes"] == 4096
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, detailed_areas, tmp_path / "again.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert not long_lines(vendor_env)  # planned to the limit learnt: nothing refused
    asked = [(a.polygon, a.page) for a in vendor_env.log]
    assert len(asked) == len(set(asked))  # each page paid once: the plan's minimum
    assert max(len(a.polygon or "") for a in vendor_env.log) > 1000  # detailed pieces


def test_a_limit_set_by_the_user_plans_every_piece_to_it(vendor_env, detailed_areas,
                                                         vendor_fabric, tmp_path, capsys,
                                                         monkeypatch) -> None:
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
    assert "4,096 bytes at most (set: PARCELSEARCH_MAX_REQUEST_BYTES" in out
    monkeypatch.setenv("PARCELSEARCH_MAX_REQUEST_BYTES", "tiny")
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, detailed_areas, tmp_path / "bad.parquet")
    assert code == 2 and "the longest request line must be a whole number of bytes" in err
    assert vendor_env.calls("/v1") == 0


def test_doctor_shows_the_request_line_limit_assumed(vendor_env, capsys) -> None:
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert code == 0, err
    assert "7,168 bytes at most (assumed until the gateway refuses a line" in out
