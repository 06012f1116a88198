"""Issue 59, point 4: the refusals the pacer meets are printed in the run's summary, as many
as the service answered (its own access log), and each slowed the pace."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _cli import run

import parcelsearch


@pytest.mark.slow
def test_the_summary_says_the_refusals_met(spawn_service: Callable[..., Any], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    svc = spawn_service("sqlite", workers=1, extra=["--access-log"])
    key = svc.keys.create("paced", key_type="production", per_second=4, quota=1_000)
    parcelsearch.demo_areas().iloc[:4].to_file(tmp_path / "areas.gpkg")
    for name, value in {"PARCELSEARCH_API_KEY": key, "PARCELSEARCH_BASE_URL": svc.base_url,
                        "PARCELSEARCH_CA_BUNDLE": str(svc.ca_path),
                        "PARCELSEARCH_CACHE_DIR": str(tmp_path / "cache"),
                        "PARCELSEARCH_RATE": "8"}.items():  # twice what the key allows
        monkeypatch.setenv(name, value)
    code, out, err = run(["search", str(tmp_path / "areas.gpkg"), "--id-column", "area_id",
                          "--out", str(tmp_path / "ids.parquet"), "--quiet", "--yes"], capsys)
    assert code == 0, err
    svc.stop()
    refused = len(re.findall(r'"GET /v1/search" 429 ', svc.log_path.read_text()))
    assert refused > 0  # the key's 4 a second, asked at 8 a second
    assert f"{refused:,} refusal{'s' * (refused != 1)} met and retried (the pace slowed)" in out
