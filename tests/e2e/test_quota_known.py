"""The key's quota known without --quota (issue 56, point 5): saved with the profile at
login, and learnt from the vendor's quota refusal; calls witnessed by the service's log."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from typing import Any

import pytest
from _cli import run

import parcelsearch
from parcelsearch._shared import next_month_start
from parcelsearch.notices import PartialResultWarning


def _login_env(
    monkeypatch: pytest.MonkeyPatch, service: Any, ca_bundle: str, tmp_path: Path
) -> None:
    for name in (
        "PARCELSEARCH_API_KEY",
        "PARCELSEARCH_BASE_URL",
        "PARCELSEARCH_CA_BUNDLE",
        "PARCELSEARCH_PROFILE",
        "PARCELSEARCH_QUOTA",
        "PARCELSEARCH_ASK_ABOVE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PARCELSEARCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PARCELSEARCH_RATE", "40")


@pytest.mark.slow
def test_after_login_told_the_quota_the_month_plan_needs_no_quota_flag(
    make_key, service, ca_bundle, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`login --quota 12/month` (the key's kind, scaled down: 12 a month), then a 17-call job
    with --allow-partial and no --quota: the price block's quota line says the quota is the
    profile's, the question is the month plan, and the run spends exactly what it said; an
    explicit --quota still wins (the line then names no profile)."""
    _login_env(monkeypatch, service, ca_bundle, tmp_path)
    key = make_key("production", quota=12, per_second=50)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{key}\n"))
    code, out, err = run(
        ["login", "--base-url", service.base_url, "--ca-bundle", ca_bundle, "--quota", "12/month"],
        capsys,
    )
    assert code == 0, err
    assert "quota 12 calls a calendar month (UTC)" in out
    areas = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(areas)
    argv = ["search", str(areas), "--id-column", "area_id", "--out", str(tmp_path / "a.csv")]

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or "y")
    code, _, err = run([*argv, "--allow-partial", "--ask-above", "1"], capsys)
    assert code == 3, err  # partial: the rest waits for the month's reset
    assert re.search(
        r"\nquota \(from your profile\): 5 left this month, (?:about|exactly) "
        r"\d+ short: needs 1 more month at 12 a month\n",
        err,
    ), err
    said = re.search(
        r"\nplan: this month: (\d+) more calls? \(areas .+, complete\)\nthen: the "
        r"other (\d+) after \d{4}-\d\d-01 00:00 UTC\n",
        err,
    )
    assert said is not None, err
    spent = len(service.keys.requests(key.name))
    assert spent == 7 + int(said[1])  # the survey, then exactly the plan
    assert len(asked) == 1 and asked[0].startswith("this month: ")

    # Priced again, free (known_price: no call): the profile's quota, unless one is given.
    client = parcelsearch.Client(profile="default")
    planned = parcelsearch.plan(parcelsearch.demo_areas(), id_column="area_id")
    assert parcelsearch.known_price(planned, client).quota == (
        "quota (from your profile): 1 left this month, exactly 5 short: needs 1 more month at "
        "12 a month"
    )
    given = parcelsearch.known_price(planned, client, quota="1000/month").quota
    assert given == "quota: it would leave exactly 983 of the 989 left this month"
    assert len(service.keys.requests(key.name)) == spent


def test_the_vendors_quota_refusal_is_remembered_until_the_reset(
    make_client, demo_areas, service, tmp_path: Path
) -> None:
    """A key whose quota the run does not know meets the vendor's quota refusal once: the
    ledger keeps it by fingerprint (never the key) until the quota resets, so the next
    search of the same key prices with 0 left and spends 0 calls (the service's log the
    witness) instead of meeting the refusal again; known_price says the same, free."""
    client = make_client(key_overrides={"quota": 10, "per_second": 50}, rate=40)
    with pytest.raises(parcelsearch.QuotaExhaustedError):
        parcelsearch.search(demo_areas, client=client, progress=False)
    met = len(service.keys.requests(client.key_name))
    reset = f"{next_month_start(time.time()):%Y-%m-%d} 00:00 UTC"

    with pytest.raises(parcelsearch.QuotaWouldExceedError) as refused:
        parcelsearch.search(demo_areas, client=client, progress=False)
    text = str(refused.value)
    assert "the vendor refused the key for its quota on " in text, text
    assert f"0 left this month, resets {reset}" in text, text
    assert refused.value.allowed == 0
    assert len(service.keys.requests(client.key_name)) == met  # 0 calls: not refused again

    planned = parcelsearch.plan(demo_areas)
    quota = parcelsearch.known_price(planned, client).quota
    assert quota.startswith(
        f"quota: 0 left this month, resets {reset} (the vendor's refusal of "
    ), quota
    assert len(service.keys.requests(client.key_name)) == met
    kept = parcelsearch.Ledger.in_folder(client.cache_dir).refusal(client.fingerprint)
    assert kept is not None and f"{kept.until:%Y-%m-%d %H:%M} UTC" == reset
    assert not [
        p
        for p in Path(client.cache_dir).rglob("*")
        if p.is_file() and client._key.reveal().encode() in p.read_bytes()
    ]
    # With allow_partial: nothing now (no call asked for), the partial result for 0 calls.
    with pytest.warns(PartialResultWarning) as warned:
        result = parcelsearch.search(demo_areas, client=client, progress=False, allow_partial=True)
    assert result.calls == 0 and not result.complete
    assert len(service.keys.requests(client.key_name)) == met
    assert str(warned[0].message).startswith(
        f"the vendor's quota refusal kept in the ledger (0 left this month, resets {reset}) "
        "reached: "
    ), warned[0].message
