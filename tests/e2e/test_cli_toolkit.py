"""The analyst's sub-commands (plan, search, markets, cache, demo) end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest

import parcelsearch
from parcelsearch.cli import main


@pytest.fixture
def areas_file(tmp_path: Path) -> Path:
    path = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(path)
    return path


@pytest.fixture
def env(monkeypatch, service, ca_bundle, make_key, tmp_path) -> str:
    key = make_key("production", quota=1_000)
    monkeypatch.setenv("PARCELSEARCH_API_KEY", key)
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", service.base_url)
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", ca_bundle)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    return key


def test_plan_prints_pieces_and_writes_tiles(areas_file, tmp_path, capsys) -> None:
    out = tmp_path / "tiles.geojson"
    assert main(["plan", str(areas_file), "--id-column", "area_id", "--out-tiles", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "pieces, at least" in printed and "park-ring" in printed
    tiles = gpd.read_file(out)
    demo_plan = parcelsearch.plan(parcelsearch.demo_areas(), id_column="area_id")
    assert len(tiles) == len(demo_plan.pieces)


def test_search_writes_ids_and_rerun_costs_nothing(env, areas_file, tmp_path, capsys) -> None:
    out = tmp_path / "ids.parquet"
    args = ["search", str(areas_file), "--id-column", "area_id", "--out", str(out), "--quiet"]
    assert main(args) == 0
    first = pd.read_parquet(out)
    assert list(first.columns) == ["area_id", "group_id"] and len(first) > 1000
    capsys.readouterr()
    assert main(args) == 0
    assert "0 calls made" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_parquet(out), first)


def test_search_budget_error_says_how_to_resume(env, areas_file, tmp_path, capsys) -> None:
    args = ["search", str(areas_file), "--id-column", "area_id", "--out",
            str(tmp_path / "ids.parquet"), "--quiet", "--budget", "2"]
    assert main(args) == 3  # stopped by the budget (before spending anything)
    err = capsys.readouterr().err
    assert "nothing was spent" in err and env not in err


def test_bad_areas_file_is_a_clear_error(tmp_path, capsys) -> None:
    bad = tmp_path / "areas.geojson"
    bad.write_text("{not json")
    assert main(["plan", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cannot read study areas" in err and "Traceback" not in err


def test_missing_key_is_a_configuration_error(monkeypatch, areas_file, tmp_path, capsys) -> None:
    monkeypatch.delenv("PARCELSEARCH_API_KEY", raising=False)
    assert main(["search", str(areas_file), "--out", str(tmp_path / "x.parquet")]) == 2
    assert "PARCELSEARCH_API_KEY" in capsys.readouterr().err


def test_markets_and_cache_commands(env, capsys) -> None:
    assert main(["markets", "--json"]) == 0
    assert "Abilene, TX" in capsys.readouterr().out
    assert main(["cache", "info"]) == 0
    info = capsys.readouterr().out
    assert "1 for life, 1 this month" in info  # the markets call, counted in the ledger
    assert env not in info
    assert main(["cache", "verify"]) == 0
    assert "cache OK" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0


@pytest.mark.slow
def test_demo_command_runs_end_to_end(tmp_path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "parcelsearch.cli", "demo", "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "0 calls spent" in done.stdout and "same GroupIDs: True" in done.stdout
    assert {p.name for p in out.iterdir()} >= {"group_ids.parquet", "map.html", "tiles.geojson"}
    html = (out / "map.html").read_text()
    assert "<script src=" not in html
