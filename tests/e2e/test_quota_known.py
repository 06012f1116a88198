"""The key's quota known without --quota (issue 56, point 5): saved with the profile at
login, and learnt from the vendor's quota refusal; calls witnessed by the service's log."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from _cli import run

import parcelsearch


def _login_env(monkeypatch: pytest.MonkeyPatch, service: Any, ca_bundle: str,
               tmp_path: Path) -> None:
    for name in ("PARCELSEARCH_API_KEY", "PARCELSEARCH_BASE_URL", "PARCELSEARCH_CA_BUNDLE",
                 "PARCELSEARCH_PROFILE", "PARCELSEARCH_QUOTA", "PARCELSEARCH_ASK_ABOVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PARCELSEARCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PARCELSEARCH_RATE", "40")


@pytest.mark.slow
def test_after_login_told_the_quota_the_month_plan_needs_no_quota_flag(
        make_key, service, ca_bundle, tmp_path: Path, capsys,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`login --quota 12/month` (the key's kind, scaled down: 12 a month), then a 17-call job
    with --allow-partial and no --quota: the price block's quota line says the quota is the
    profile's, the question is the month plan, and the run spends exactly what it said; an
    explicit --quota still wins (the line then names no profile)."""
    _login_env(monkeypatch, service, ca_bundle, tmp_path)
    key = make_key("production", quota=12, per_second=50)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{key}\n"))
    code, out, err = run(["login", "--base-url", service.base_url, "--ca-bundle", ca_bundle,
                          "--quota", "12/month"], capsys)
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
    assert re.search(r"\nquota \(from your profile\): 5 left this month, (?:about|exactly) "
                     r"\d+ short: needs 1 more month at 12 a month\n", err), err
    said = re.search(r"\nplan: this month: (\d+) more calls? \(areas .+, complete\)\nthen: the "
                     r"other (\d+) after \d{4}-\d\d-01 00:00 UTC\n", err)
    assert said is not None, err
    spent = len(service.keys.requests(key.name))
    assert spent == 7 + int(said[1])  # the survey, then exactly the plan
    assert len(asked) == 1 and asked[0].startswith("this month: ")

    # Priced again, free (known_price: no call): the profile's quota, unless one is given.
    client = parcelsearch.Client(profile="default")
    planned = parcelsearch.plan(parcelsearch.demo_areas(), id_column="area_id")
    assert parcelsearch.known_price(planned, client).quota == (
        "quota (from your profile): 1 left this month, exactly 5 short: needs 1 more month at "
        "12 a month")
    given = parcelsearch.known_price(planned, client, quota="1000/month").quota
    assert given == "quota: it would leave exactly 983 of the 989 left this month"
    assert len(service.keys.requests(key.name)) == spent
