"""The analyst's commands (plan, search, markets, cache, demo) end to end, against the
reference service. Calls are counted on the service's side (its request log)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyarrow.parquet as pq
import pyogrio
import pytest
import trustme
from _cli import PYTHON, run, served

import parcelsearch


def _gpkg_meta(path: Path) -> dict[str, object]:
    """The run's metadata of a GeoPackage, read as any GDAL user would (its metadata)."""
    stored = json.loads(pyogrio.read_info(path)["layer_metadata"]["parcelsearch"])
    assert isinstance(stored, dict)
    return stored


@pytest.fixture
def areas_file(tmp_path: Path) -> Path:
    path = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(path)
    return path


def test_search_writes_every_format_and_reruns_cost_nothing(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    base = ["search", str(areas_file), "--id-column", "area_id", "--quiet"]
    code, out, err = run([*base, "--out", str(tmp_path / "ids.parquet")], capsys)
    assert code == 0, err
    spent = served(service, key)
    assert f"{spent} calls made" in out and "complete, written to" in out
    ids = pd.read_parquet(tmp_path / "ids.parquet")
    assert list(ids.columns) == ["area_id", "group_id", "name", "market"]
    assert len(ids) > 1000 and ids["group_id"].dtype == "string"
    meta = json.loads(pq.read_schema(tmp_path / "ids.parquet").metadata[b"parcelsearch"])
    assert meta["complete"] is True and meta["calls"] == spent
    assert set(meta["areas_complete"]) == set(parcelsearch.demo_areas()["area_id"])

    for suffix in (".csv", ".gpkg", ".geojson"):
        code, out, err = run([*base, "--out", str(tmp_path / f"ids{suffix}")], capsys)
        assert code == 0, err
        assert "0 calls made" in out
    assert served(service, key) == spent  # the reruns came from the cache

    csv = pd.read_csv(tmp_path / "ids.csv", dtype=str)
    pd.testing.assert_frame_equal(csv, ids.astype(object).astype(str), check_dtype=False)
    assert json.loads((tmp_path / "ids.csv.parcelsearch.json").read_text())["calls"] == 0

    with warnings.catch_warnings():  # one layer: read without naming it, and no warning
        warnings.simplefilter("error")
        per_area = gpd.read_file(tmp_path / "ids.gpkg")
    assert len(per_area) == 5 and per_area["area_id"].is_unique  # geometry once per area
    listed = {
        (a, g)
        for a, text in zip(per_area["area_id"], per_area["group_ids"], strict=True)
        for g in json.loads(text)
    }
    assert listed == set(zip(ids["area_id"], ids["group_id"], strict=True))
    assert per_area.set_index("area_id")["n_group_ids"].sum() == len(ids)
    assert _gpkg_meta(tmp_path / "ids.gpkg")["complete"] is True
    assert _gpkg_meta(tmp_path / "ids.gpkg")["calls"] == 0

    geojson = json.loads((tmp_path / "ids.geojson").read_text())
    assert len(geojson["features"]) == 5 and geojson["parcelsearch"]["complete"] is True
    listed = sum(len(f["properties"]["group_ids"]) for f in geojson["features"])
    assert listed == len(ids)


def test_budget_below_the_plan_is_refused_with_flags(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    out = tmp_path / "ids.parquet"
    code, _, err = run(
        [
            "search",
            str(areas_file),
            "--id-column",
            "area_id",
            "--out",
            str(out),
            "--quiet",
            "--budget",
            "2",
        ],
        capsys,
    )
    assert code == 3
    assert "parcelsearch: stopped: this search needs at least 7 calls" in err
    assert "nothing was spent" in err
    assert re.search(r"Try --tolerance \d+ \(metres\)|[Rr]aise --budget \d+", err), err
    assert "--allow-partial" in err
    assert not PYTHON.search(err) and key not in err
    assert served(service, key) == 0
    # the refusal is written like every stop: an empty, typed file marked incomplete
    assert "PARTIAL result (complete: false), written to" in err
    ids = pd.read_parquet(out)
    assert len(ids) == 0 and ids["group_id"].dtype == "string"
    assert list(ids.columns) == ["area_id", "group_id", "name", "market"]
    meta = json.loads(pq.read_schema(out).metadata[b"parcelsearch"])
    assert meta["complete"] is False and meta["calls"] == 0 and meta["areas_complete"] == []


def test_budget_reached_mid_run_writes_the_partial_result(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    out = tmp_path / "ids.gpkg"
    code, stdout, err = run(
        [
            "search",
            str(areas_file),
            "--id-column",
            "area_id",
            "--out",
            str(out),
            "--quiet",
            "--budget",
            "7",
            "--allow-partial",
        ],
        capsys,
    )
    assert code == 3, err
    assert "budget of 7 calls reached" in err
    assert "running the same search again resumes" in err
    assert "PARTIAL result (complete: false)" in err
    assert not PYTHON.search(err)
    assert served(service, key) == 7
    meta = _gpkg_meta(out)
    assert meta["complete"] is False and meta["calls"] == 7
    assert len(meta["areas_complete"]) < 5
    # resuming spends only what is missing, and completes
    code, stdout, err = run(
        ["search", str(areas_file), "--id-column", "area_id", "--out", str(out), "--quiet"], capsys
    )
    assert code == 0, err
    assert _gpkg_meta(out)["complete"] is True


def test_quota_too_small_exits_3_before_spending(
    env, service, make_key, areas_file, tmp_path, capsys, monkeypatch
) -> None:
    small = make_key("demo")
    monkeypatch.setenv("PARCELSEARCH_API_KEY", small)
    code, _, err = run(
        [
            "search",
            str(areas_file),
            "--out",
            str(tmp_path / "o.parquet"),
            "--quiet",
            "--quota",
            "5/lifetime",
        ],
        capsys,
    )
    assert code == 3
    assert "has 5 left of its quota (5 calls for the life of the key)" in err
    assert "nothing was spent." in err
    assert "Try --tolerance 500 (metres), whose plan fits." in err
    assert not PYTHON.search(err)
    assert served(service, small) == 0


def test_wrong_key_is_a_failure_in_cli_words(
    env, service, areas_file, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("PARCELSEARCH_API_KEY", "not-a-key-at-all-0000")
    code, _, err = run(
        ["search", str(areas_file), "--out", str(tmp_path / "o.parquet"), "--quiet"], capsys
    )
    assert code == 1
    assert "HTTP 401: Invalid ApiKey" in err
    assert "Check the environment variable PARCELSEARCH_API_KEY." in err
    assert not PYTHON.search(err) and "not-a-key-at-all" not in err


def test_an_untrusted_certificate_points_at_the_ca_flag(
    env, service, areas_file, tmp_path, capsys
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    code, _, err = run(["markets", "--ca-bundle", str(other_ca)], capsys)
    assert code == 1
    assert "TLS verification failed (GET /v1/markets)" in err
    assert (
        "For a local service, its CA is the ca.pem in its certificate folder. Point "
        "--ca-bundle FILE or the environment variable PARCELSEARCH_CA_BUNDLE at the CA's "
        "PEM file."
    ) in err
    assert "REQUESTS_CA_BUNDLE or SSL_CERT_FILE" in err and "trust store" in err
    assert not PYTHON.search(err)


def test_empty_result_keeps_its_types(env, service, key, tmp_path, capsys) -> None:
    """An area with no parcels: the GroupID column is still text, in every format."""
    empty = gpd.GeoDataFrame(
        {"area_id": ["montana"]},
        crs="EPSG:4326",  # on land, no parcels
        geometry=gpd.GeoSeries.from_wkt(
            ["POLYGON ((-110 47, -109.99 47, -109.99 47.01, -110 47.01, -110 47))"]
        ),
    )
    empty.to_file(tmp_path / "empty.geojson")
    code, out, err = run(
        [
            "search",
            str(tmp_path / "empty.geojson"),
            "--id-column",
            "area_id",
            "--out",
            str(tmp_path / "ids.parquet"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    assert "0 unique GroupIDs in 0 (area, group) rows; 1 call made" in out
    ids = pd.read_parquet(tmp_path / "ids.parquet")
    assert len(ids) == 0
    assert ids["group_id"].dtype == "string" and ids["area_id"].dtype != "float64"


def test_active_markets_only_with_every_area_outside(env, service, key, tmp_path, capsys) -> None:
    outside = parcelsearch.demo_areas().query("area_id == 'marfa-ranch'")
    outside.to_file(tmp_path / "marfa.gpkg")
    code, out, err = run(
        [
            "search",
            str(tmp_path / "marfa.gpkg"),
            "--id-column",
            "area_id",
            "--active-markets-only",
            "--out",
            str(tmp_path / "ids.parquet"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    assert "1 area skipped (market not active): marfa-ranch" in out
    assert served(service, key) == 1  # the market list, nothing else


def test_markets_and_cache_commands(env, service, key, capsys) -> None:
    code, out, _ = run(["markets", "--json"], capsys)
    assert code == 0 and "Abilene, TX" in json.loads(out)
    assert served(service, key) == 1  # the list costs one call …
    assert run(["markets"], capsys)[0] == 0
    assert served(service, key) == 1  # … then comes from the cache for a day
    code, info, _ = run(["cache", "info"], capsys)
    assert code == 0
    assert "1 for life, 1 this month" in info  # the markets call, counted in the ledger
    assert key not in info
    code, out, _ = run(["cache", "verify"], capsys)
    assert code == 0 and "cache OK" in out
    assert run(["cache", "clear"], capsys)[0] == 0


def test_sigterm_stops_a_search_with_exit_143(
    service, ca_bundle, make_key, areas_file, tmp_path
) -> None:
    """SIGTERM mid-search: exit 143, a short message, no traceback, the partial --out."""
    slow = make_key("production", quota=1_000)
    env = {
        **os.environ,
        "PARCELSEARCH_API_KEY": slow,
        "PARCELSEARCH_BASE_URL": service.base_url,
        "PARCELSEARCH_CA_BUNDLE": ca_bundle,
        "PARCELSEARCH_CACHE_DIR": str(tmp_path / "c"),
        "PARCELSEARCH_RATE": "2",
    }
    argv = [
        sys.executable,
        "-m",
        "parcelsearch.cli",
        "search",
        str(areas_file),
        "--quiet",
        "--workers",
        "1",
        "--out",
        str(tmp_path / "ids.parquet"),
    ]
    with subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        deadline = time.monotonic() + 60
        while served(service, slow) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served(service, slow) > 0, "the search never started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "parcelsearch: interrupted: SIGTERM received: no request" in err  # said once
    assert "Traceback" not in err
    spent = served(service, slow)
    assert spent < 17  # stopped before the whole search was spent
    meta = json.loads(pq.read_schema(tmp_path / "ids.parquet").metadata[b"parcelsearch"])
    assert meta["complete"] is False and meta["calls"] == spent


@pytest.mark.slow
def test_demo_command_runs_end_to_end(tmp_path) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "parcelsearch.cli", "demo", "--out", str(out), "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "0 calls spent" in done.stdout and "same GroupIDs: True" in done.stdout
    # The README's 17 calls are these 16 and the market list, which the demo asks for first.
    assert "1113 unique GroupIDs; 16 calls spent" in done.stdout
    assert {p.name for p in out.iterdir()} >= {"group_ids.parquet", "map.html", "tiles.geojson"}
    html = (out / "map.html").read_text()
    assert "<script src=" not in html


# -- issue 22: the edges a new analyst hit ------------------------------------------------


def test_an_area_id_column_names_the_areas_without_id_column(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    """The user's own ``area_id`` values reach every output; nothing is renumbered."""
    names = sorted(parcelsearch.demo_areas()["area_id"])
    code, out, err = run(
        ["search", str(areas_file), "--out", str(tmp_path / "ids.csv"), "--quiet"], capsys
    )
    assert code == 0, err
    assert "warning" not in err
    found = set(pd.read_csv(tmp_path / "ids.csv")["area_id"])
    assert found == set(names) - {"marfa-ranch"}  # no parcels out there
    code, _, err = run(
        ["search", str(areas_file), "--out", str(tmp_path / "ids.gpkg"), "--quiet"], capsys
    )
    assert code == 0, err
    per_area = gpd.read_file(tmp_path / "ids.gpkg")
    assert sorted(per_area["area_id"]) == names
    assert set(per_area.loc[per_area["group_ids"] != "[]", "area_id"]) == found


def test_row_numbers_as_ids_are_announced_in_cli_words(tmp_path, capsys) -> None:
    """Without an ``area_id`` column or ``--id-column`` the rows are numbered, and the command
    says so in one line naming ``--id-column`` (no Python file path or source line)."""
    areas = parcelsearch.demo_areas().rename(columns={"area_id": "code"})
    areas.to_file(tmp_path / "coded.gpkg")
    code, out, err = run(["plan", str(tmp_path / "coded.gpkg")], capsys)
    assert code == 0, err
    warning = [line for line in err.splitlines() if "warning" in line]
    assert warning == [
        "parcelsearch: warning: the study areas have no 'area_id' column, so "
        "they are identified by their row numbers (0 to 4) in every output "
        "(their columns: 'code', 'name', 'market'). Name the column that "
        "identifies them with --id-column COLUMN."
    ], err
    assert ".py" not in err and not PYTHON.search(err)
    code, out, err = run(["plan", str(tmp_path / "coded.gpkg"), "--id-column", "code"], capsys)
    assert code == 0 and "warning" not in err and "northside" in out


def _far_areas(tmp_path: Path, columns: dict | None = None) -> Path:
    """Two squares in Montana, far from every parcel (on land: at sea is refused)."""
    far = gpd.GeoDataFrame(
        {"area_id": ["far-1", "far-2"], **(columns or {})},
        crs="EPSG:4326",
        geometry=gpd.GeoSeries.from_wkt(
            [
                "POLYGON ((-110 47, -109.99 47, -109.99 47.01, -110 47.01, -110 47))",
                "POLYGON ((-111 46, -110.99 46, -110.99 46.01, -111 46.01, -111 46))",
            ]
        ),
    )
    far.to_file(tmp_path / "far.geojson")
    return tmp_path / "far.geojson"


def test_a_search_that_matched_nothing_says_what_to_check(
    env, service, key, tmp_path, capsys
) -> None:
    code, out, err = run(
        ["search", str(_far_areas(tmp_path)), "--out", str(tmp_path / "ids.csv"), "--quiet"], capsys
    )
    assert code == 0, err
    assert served(service, key) == 2
    assert (
        "parcelsearch: warning: no parcel matched any of the 2 areas searched (2 calls "
        "spent in this run, 0 pages from cache)"
    ) in err
    assert "declare the right one with --crs EPSG:CODE" in err
    assert "List the markets covered with parcelsearch markets." in err
    assert not PYTHON.search(err) and ".py" not in err


def test_active_markets_only_without_the_market_column_spends_nothing(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    code, _, err = run(
        [
            "search",
            str(areas_file),
            "--active-markets-only",
            "--market-column",
            "City",
            "--out",
            str(tmp_path / "ids.csv"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 2
    assert "no column 'City' of market names" in err
    assert "Name the column of market names with --market-column COLUMN." in err
    assert served(service, key) == 0  # refused before the market list's call


def test_a_cached_run_says_the_key_was_not_used(
    env, service, key, areas_file, tmp_path, capsys, monkeypatch
) -> None:
    argv = ["search", str(areas_file), "--out", str(tmp_path / "ids.csv"), "--quiet"]
    assert run(argv, capsys)[0] == 0
    monkeypatch.setenv("PARCELSEARCH_API_KEY", "not-a-key-at-all-0000")
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert (
        "every page came from the cache: no call was made, so the key was not used (nor checked)"
    ) in out


def test_a_ca_bundle_that_is_not_pem_is_refused_before_anything(
    env, service, key, areas_file, tmp_path, capsys, monkeypatch
) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", str(bad))
    code, _, err = run(
        ["search", str(areas_file), "--out", str(tmp_path / "ids.csv"), "--quiet"], capsys
    )
    assert code == 2
    assert f"CA bundle '{bad}' holds no certificate that can be read" in err
    assert "--ca-bundle FILE or the environment variable PARCELSEARCH_CA_BUNDLE" in err
    assert served(service, key) == 0


def test_a_tls_failure_is_not_counted_as_a_call(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    """The ledger records only what the service counts: a refused handshake is no call."""
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    code, _, err = run(
        [
            "search",
            str(areas_file),
            "--out",
            str(tmp_path / "ids.csv"),
            "--quiet",
            "--ca-bundle",
            str(other_ca),
        ],
        capsys,
    )
    assert code == 1 and "TLS verification failed" in err
    assert served(service, key) == 0
    code, info, _ = run(["cache", "info"], capsys)
    assert code == 0
    assert "calls by key" not in info or ": 0 for life" in info, info


def test_a_tls_failure_of_the_market_list_is_not_counted_either(
    env, service, key, tmp_path, capsys
) -> None:
    """The market list's call outside a search is spent like a search's: refunded when no
    request reached the service."""
    other_ca = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other_ca))
    code, _, err = run(["markets", "--ca-bundle", str(other_ca)], capsys)
    assert code == 1 and "TLS verification failed" in err
    assert served(service, key) == 0
    code, info, _ = run(["cache", "info"], capsys)
    assert code == 0
    assert "calls by key" not in info or ": 0 for life" in info, info


def test_the_progress_bar_total_never_shrinks_nor_goes_back(
    env, service, key, areas_file, tmp_path, capsys
) -> None:
    """Without --quiet: one bar per phase, each made with its total known (page 1 of every
    piece, then every page), that total never changed; 100 % only at a bar's very end."""
    code, _, err = run(
        ["search", str(areas_file), "--active-markets-only", "--out", str(tmp_path / "ids.csv")],
        capsys,
    )
    assert code == 0, err
    states = [
        (label, int(n), int(total))
        for label, n, total in re.findall(r"(page 1|search): +\d+%\|[^|]*\| *(\d+)/(\d+) \[", err)
    ]
    assert states, err
    bars: list[list[tuple[int, int]]] = []
    for i, (label, n, total) in enumerate(states):
        if i == 0 or label != states[i - 1][0]:
            bars.append([])
        bars[-1].append((n, total))
    assert [label for label, _, _ in states[:1]] == ["page 1"] and len(bars) == 2
    assert bars[-1][-1] == (16, 16)  # the pages of the 4 active areas
    for bar in bars:
        assert len({total for _, total in bar}) == 1  # made with its total, never changed
        counts = [n for n, _ in bar]
        assert counts == sorted(counts)
        full = next(i for i, (n, total) in enumerate(bar) if n >= total)
        assert all(state == bar[-1] for state in bar[full:])  # 100 % only at the end


def test_tables_on_the_terminal_are_capped_and_hold_no_polygons(tmp_path, capsys) -> None:
    import shapely

    grid = gpd.GeoDataFrame(
        {"area_id": [f"cell-{i}" for i in range(45)]},
        crs="EPSG:4326",
        geometry=[
            shapely.box(-99.74 + 0.001 * i, 32.44, -99.7395 + 0.001 * i, 32.4405) for i in range(45)
        ],
    )
    grid.to_file(tmp_path / "grid.gpkg")
    code, out, err = run(["plan", str(tmp_path / "grid.gpkg")], capsys)
    assert code == 0, err
    assert "… 25 more areas (every piece in --out-tiles FILE)" in out
    assert "cell-19" in out and "cell-20" not in out
    assert len(out.splitlines()) < 30
    assert "POLYGON" not in out


@pytest.mark.slow
def test_the_demo_announces_every_file_it_writes(tmp_path) -> None:
    import io

    from parcelsearch.demo import run_demo

    said = io.StringIO()
    assert run_demo(tmp_path / "demo", progress=False, out=said) == 0
    text = said.getvalue()
    written = sorted(p.name for p in (tmp_path / "demo").iterdir())
    assert written == ["group_ids.parquet", "map.html", "tiles.geojson"]
    for name in written:
        assert str(tmp_path / "demo" / name) in text
    assert "POLYGON" not in text  # the skipped area is named, not drawn as text


def test_a_repaired_area_is_one_clean_warning_line(tmp_path, capsys) -> None:
    import shapely

    bowtie = shapely.Polygon(
        [(-99.74, 32.44), (-99.73, 32.45), (-99.73, 32.44), (-99.74, 32.45), (-99.74, 32.44)]
    )
    gpd.GeoDataFrame({"area_id": ["bow"]}, geometry=[bowtie], crs="EPSG:4326").to_file(
        tmp_path / "bow.geojson"
    )
    code, _, err = run(["plan", str(tmp_path / "bow.geojson")], capsys)
    assert code == 0, err
    assert err.startswith(
        "parcelsearch: warning: area 'bow': its geometry was invalid (Self-intersection"
    ), err
    assert "and was repaired (made valid); check the result, or fix the source data" in err
    assert len(err.strip().splitlines()) == 1 and ".py" not in err and not PYTHON.search(err)


def test_messages_about_the_areas_file_speak_of_files_and_flags(tmp_path, capsys) -> None:
    areas = parcelsearch.demo_areas()
    with pytest.warns(UserWarning, match="'crs' was not provided"):
        areas.set_crs(None, allow_override=True).to_file(tmp_path / "nocrs.gpkg")
    code, _, err = run(["plan", str(tmp_path / "nocrs.gpkg")], capsys)
    assert code == 2, err
    assert f"study areas file '{tmp_path / 'nocrs.gpkg'}' has no CRS" in err
    assert "Declare it with --crs EPSG:4326" in err and "GeoDataFrame" not in err

    points = areas.assign(geometry=areas.geometry.representative_point())
    points.to_file(tmp_path / "points.gpkg")
    code, _, err = run(["plan", str(tmp_path / "points.gpkg")], capsys)
    assert code == 2 and "is a Point, not an area" in err
    assert "buffer points and lines into areas first" in err
    assert "gdf" not in err and not PYTHON.search(err) and "(" + "50)" not in err


def test_a_csv_with_a_wkt_column_is_read_and_otherwise_explained(tmp_path, capsys) -> None:
    areas = parcelsearch.demo_areas()
    table = areas.assign(wkt=areas.geometry.to_wkt()).drop(columns="geometry")
    table.to_csv(tmp_path / "areas.csv", index=False)
    code, out, err = run(["plan", str(tmp_path / "areas.csv"), "--crs", "EPSG:4326"], capsys)
    assert code == 0, err
    assert "northside" in out and "7 pieces, at least 7 calls" in out
    table.rename(columns={"wkt": "shape"}).to_csv(tmp_path / "shape.csv", index=False)
    code, _, err = run(["plan", str(tmp_path / "shape.csv"), "--crs", "EPSG:4326"], capsys)
    assert code == 2
    assert "is a CSV without a geometry column: name its WKT column 'geometry' or 'wkt'" in err
    assert "ogr2ogr -f GPKG areas.gpkg areas.csv" in err


def test_a_crs_that_puts_the_areas_outside_its_own_region_is_questioned(tmp_path, capsys) -> None:
    import shapely

    local = gpd.GeoDataFrame(
        {"area_id": ["site"]}, crs="EPSG:3857", geometry=[shapely.box(100, 100, 600, 600)]
    )  # a local grid
    local.to_file(tmp_path / "local.gpkg")
    code, _, err = run(["plan", str(tmp_path / "local.gpkg"), "--crs", "EPSG:32614"], capsys)
    assert code == 2  # refused for free (issue 49); trusted, a warning says the same
    assert "parcelsearch: error: the study areas lie at longitude -103.5..-103.5" in err
    assert "nothing was planned or spent" in err and "pass --trust-crs." in err
    code, _, err = run(
        ["plan", str(tmp_path / "local.gpkg"), "--crs", "EPSG:32614", "--trust-crs"], capsys
    )
    assert code == 0, err
    assert "parcelsearch: warning: the study areas lie at longitude -103.5..-103.5" in err
    assert "outside the area EPSG:32614 is meant for (longitude -102..-96" in err
    assert "Declare the CRS they are really in with --crs EPSG:CODE." in err
    code, _, err = run(["plan", str(areas_file_in(tmp_path)), "--crs", "EPSG:4326"], capsys)
    assert code == 0 and "warning" not in err


def areas_file_in(folder: Path) -> Path:
    path = folder / "demo.gpkg"
    parcelsearch.demo_areas().to_file(path)
    return path


def test_plan_help_promises_no_budget_stop_or_partial_out(capsys) -> None:
    code, out, _ = run(["plan", "--help"], capsys)
    assert code == 0
    codes = out.split("exit codes:")[1]
    assert "partial" not in codes and "\n  3 " not in codes and "--budget" not in codes
    code, out, _ = run(["search", "--help"], capsys)
    assert "\n  3    stopped by --budget" in out and "the partial --out is written" in out


def test_a_geoparquet_index_is_a_column_like_any_other(tmp_path, capsys) -> None:
    """The command line's rule has no index: a stored one is a column, named by the rule."""
    indexed = parcelsearch.demo_areas().set_index("area_id")
    indexed.to_parquet(tmp_path / "areas.parquet")  # the index is stored
    code, out, err = run(["plan", str(tmp_path / "areas.parquet")], capsys)
    assert code == 0, err
    assert "northside" in out and "warning" not in err
    both = parcelsearch.demo_areas().set_index("name")
    both.to_parquet(tmp_path / "both.parquet")
    code, out, err = run(["plan", str(tmp_path / "both.parquet")], capsys)
    assert code == 0 and "northside" in out, err  # the area_id column, as documented
