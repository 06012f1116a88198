"""``parcelsearch doctor`` and ``parcelsearch.check_service()`` against the stand-in vendor:
at most 3 calls, 4 with --areas (the vendor's request log is the witness), priced and
confirmed first, none with --dry-run, and what they learn used by later searches without
probing. (The matching rule learnt against the reference service under both of its rules:
``test_match_rule.py``.)"""

from __future__ import annotations

import json

from _cli import run
from _vendor import MINIMUM, exact, fault_on, search

import parcelsearch
from parcelsearch._fetch.vendor_profile import PROFILES_FILE

CHECKS = (
    "network",
    "TLS",
    "key",
    "stage path",
    "compression",
    "paging base",
    "error format",
    "markets",
    "matching rule",
    "retirement",
    "GroupIDs",
    "page size",
    "request line",
    "result window",
    "response deadline",
)


def test_dry_run_spends_nothing_and_unconfirmed_spends_nothing(vendor_env, capsys) -> None:
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert code == 0, err
    assert "0 calls spent (price 2, at most 3" in out and all(check in out for check in CHECKS)
    assert "60 s for a whole response, however slowly its bytes come (the default" in out
    assert "opaque strings, at most 128 characters" in out  # the facts assumed, shown free
    code, out, err = run(["doctor"], capsys)  # not a terminal: nothing asked, nothing spent
    assert code == 2 and "not confirmed: doctor spends 2 calls" in err and "--yes" in err
    assert vendor_env.calls("/v1") == 0


def test_doctor_learns_what_later_searches_use(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    vendor_env.set(base=0, past_last="400", gzip=True)
    code, out, err = run(["doctor", "--yes"], capsys)
    assert code == 0, err
    assert vendor_env.calls("/v1") == 2
    assert "pages are numbered from 0" in out and "Content-Encoding gzip" in out
    assert "certificate verified" in out and "active (" in out
    profile = json.loads((tmp_path / "cache" / PROFILES_FILE).read_text())[vendor_env.base_url]
    assert profile["page_base"] == 0 and profile["compression"] == "gzip"
    vendor_env.log.clear()
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and vendor_env.calls() == MINIMUM  # no probing


def test_doctor_names_a_missing_stage_path_and_a_refused_key(vendor_env, capsys) -> None:
    vendor_env.set(stage=True)
    code, out, err = run(["doctor", "--yes"], capsys)
    assert code == 1
    assert "stage path" in out and "failed" in out and "https://host/prod" in out
    assert vendor_env.calls("/v1") == 1  # nothing more is asked of a wrong base URL
    vendor_env.set(stage=False, fault=fault_on(None, "auth401"))
    vendor_env.log.clear()
    code, out, err = run(["doctor", "--yes"], capsys)
    assert code == 1 and "the key refused: HTTP 401: Invalid ApiKey" in out
    assert vendor_env.calls("/v1") == 1 and "a-vendor-key" not in out


def test_check_service_in_python(vendor_env, tmp_path) -> None:
    with parcelsearch.Client(cache_dir=tmp_path / "py") as client:
        priced = parcelsearch.check_service(client, dry_run=True)
        assert (priced.price, priced.calls, vendor_env.calls("/v1")) == (2, 0, 0)
        report = parcelsearch.check_service(client)
    assert report.ok and report.calls == 2 == vendor_env.calls("/v1")
    assert report.learned["page_base"] == 1
    assert [f.check for f in report.findings] == list(CHECKS)
    with parcelsearch.Client(cache_dir=tmp_path / "py", response_deadline=5) as client:
        priced = parcelsearch.check_service(client, dry_run=True)
    (deadline,) = [f for f in priced.findings if f.check == "response deadline"]
    assert (
        deadline.text.startswith("5 s for a whole response")
        and "given to the client" in deadline.text
    )
    assert "pages are numbered from 1" in str(report)


def test_on_a_terminal_doctor_asks_before_spending(vendor_env, capsys, monkeypatch) -> None:
    class Terminal:
        def isatty(self) -> bool:
            return True

    answers = iter(["n", "y"])
    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda question: next(answers))
    code, out, err = run(["doctor"], capsys)
    assert code == 2 and vendor_env.calls("/v1") == 0  # "n": nothing spent
    code, out, err = run(["doctor"], capsys)
    assert code == 0 and vendor_env.calls("/v1") == 2


def test_doctor_names_a_certificate_it_cannot_verify(
    vendor_env, capsys, monkeypatch, tmp_path
) -> None:
    import trustme

    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", str(other))
    code, out, err = run(["doctor", "--yes"], capsys)
    assert code == 1
    assert "TLS" in out and "failed" in out and "certificate verify failed" in out
    assert vendor_env.calls("/v1") == 0  # the handshake failed: nothing reached the vendor


def test_doctor_never_spends_more_than_3_calls(vendor_env, capsys) -> None:
    vendor_env.set(redirect="slash", fault=fault_on({2}, "html503"))  # each probe would take 2+
    code, out, err = run(["doctor", "--yes"], capsys)
    assert vendor_env.calls("/v1") == 3
    assert "3 calls spent (price 2" in out and "markets" in out


def test_doctor_with_areas_never_spends_more_than_4_calls(vendor_env, vendor_areas, capsys) -> None:
    """With --areas the price is 3 and the cap one more: each probe would take 2 or more
    calls here, and the fourth is the last (the vendor's request log)."""
    vendor_env.set(redirect="slash", fault=fault_on({2}, "html503"))
    code, out, err = run(["doctor", "--yes", "--areas", str(vendor_areas)], capsys)
    assert vendor_env.calls("/v1") == 4
    assert "4 calls spent (price 3, at most 4" in out


def test_doctor_refuses_unreadable_areas_before_spending(vendor_env, tmp_path, capsys) -> None:
    code, out, err = run(["doctor", "--yes", "--areas", str(tmp_path / "missing.gpkg")], capsys)
    assert code == 2 and "missing.gpkg" in err and "does not exist" in err
    assert "Traceback" not in err and vendor_env.calls("/v1") == 0
    code, out, err = run(["doctor", "--dry-run", "--areas", str(tmp_path / "missing.gpkg")], capsys)
    assert code == 2 and "does not exist" in err and vendor_env.calls("/v1") == 0


def test_doctor_names_a_retired_endpoint_and_its_sunset(vendor_env, capsys) -> None:
    from _vendor import GONE_WORDS, SUNSET

    vendor_env.set(fault=fault_on(None, "gone410"))
    code, out, err = run(["doctor", "--yes"], capsys)
    assert code == 1
    assert f"HTTP 410 Gone for markets (Sunset: {SUNSET}): {GONE_WORDS}" in out
    assert vendor_env.calls("/v1") == 1  # nothing more is asked of a retired endpoint
