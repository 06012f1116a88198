"""Refusals of a commercial API gateway (Apigee) in front of the vendor, and redirects:
read in the vendor's words, never retried when they cannot heal, never shown as raw bytes or
markup. The stand-in vendor's request log (tests/_vendor.py) is the witness."""

from __future__ import annotations

import json

import pytest
from _vendor import MINIMUM, exact, fault_on, search

import parcelsearch
from parcelsearch import _wire
from parcelsearch._fetch.vendor_profile import PROFILES_FILE


def no_raw_bytes(text: str) -> bool:
    return "b'" not in text and 'b"' not in text and "<" not in text and "\\x" not in text


@pytest.mark.parametrize("fault", ["quota429", "quota403"])
def test_quota_fault_exits_3_within_two_extra_calls(
    vendor_env, vendor_areas, tmp_path, capsys, fault
) -> None:
    vendor_env.set(fault=lambda arrival: fault if arrival.number > 3 else None)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 3, err
    assert "Rate limit quota violation" in err and "no calls left" in err
    assert meta["complete"] is False
    refused = [a for a in vendor_env.log if a.status in (403, 429)]
    assert 1 <= len(refused) <= 2  # never retried: at most the ones already on their way
    assert no_raw_bytes(err)


def test_spike_arrest_fault_is_ridden_out(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    vendor_env.set(fault=fault_on({2, 5}, "spike"))
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert vendor_env.calls() == MINIMUM + 2


def test_refused_key_quotes_the_vendor(vendor_env, vendor_areas, tmp_path, capsys) -> None:
    vendor_env.set(fault=fault_on(None, "auth401"))
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 1, err
    assert "HTTP 401: Invalid ApiKey" in err and "PARCELSEARCH_API_KEY" in err
    assert no_raw_bytes(err) and "a-vendor-key" not in err
    assert vendor_env.calls() == 1  # the run's first call goes alone, and is not retried


@pytest.mark.slow
@pytest.mark.parametrize("status", [502, 503, 504])
def test_gateway_html_pages(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, status
) -> None:
    vendor_env.set(fault=fault_on({1, 4}, f"html{status}"))  # now and then: retried
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == MINIMUM + 2
    vendor_env.set(fault=fault_on(None, f"html{status}"))  # always: a clear message
    ring = _wire.ring_json(vendor_fabric[1].geometry.iloc[0].exterior.coords)
    with (
        parcelsearch.Client(retries=1, cache_dir=tmp_path / "c") as client,
        pytest.raises(parcelsearch.ServiceFailureError) as caught,
    ):
        client.search_page(ring, 1)
    message = str(caught.value)
    assert message.startswith(f"HTTP {status}: an HTML page titled '{status} ")
    assert "gave up after 2 attempts" in message and no_raw_bytes(message)


def test_same_origin_redirect_is_followed_and_remembered(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    vendor_env.set(redirect="slash")
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    redirected = [a for a in vendor_env.log if a.status == 301]
    assert len(redirected) == 1  # learned from the run's first call, which goes alone
    assert vendor_env.calls() == MINIMUM + len(redirected)
    profiles = json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())
    assert profiles[vendor_env.base_url]["moved"]
    vendor_env.log.clear()
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "again.parquet", "--refresh", "all"
    )
    assert code == 0, err
    assert vendor_env.calls() == MINIMUM and all(a.status == 200 for a in vendor_env.log)


@pytest.mark.parametrize("where", ["host", "http"])
def test_other_redirects_are_refused_naming_location(
    vendor_env, vendor_areas, tmp_path, capsys, where
) -> None:
    vendor_env.set(redirect=where)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 1
    shown = "https://localhost:" if where == "host" else "http://127.0.0.1:"
    assert "HTTP 301: the vendor redirects GET /v1/search" in err and shown in err
    assert all(a.host.startswith("127.0.0.1") for a in vendor_env.log)  # never sent elsewhere
    assert vendor_env.calls() == 1 and no_raw_bytes(err)  # the first call goes alone


def test_stage_path(vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch) -> None:
    vendor_env.set(stage=True)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 1
    assert "HTTP 404: Unable to identify proxy" in err and "stage prefix" in err
    assert "https://host/prod" in err and no_raw_bytes(err)
    assert vendor_env.calls() == 1
    vendor_env.log.clear()
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", vendor_env.base_url + "/prod")
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "prod.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == MINIMUM
