"""Your own areas on the reference service (issue 41, point 5): 'parcels synth' lays a fabric
under any areas file, the service serves it, and a search finds parcels in every area."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pytest
from _cli import run
from _examples import ROOT, console_commands

import parcelsearch
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.keys.store import default_keys_location
from parcelsearch_service.synth import fabric_for

GUIDE = ROOT / "docs" / "guide" / "own-areas.md"

TRACTS = Path(__file__).resolve().parents[1] / "data" / "sf_tracts_2020.geojson"


@pytest.mark.slow
def test_synth_on_the_command_line_then_served_and_searched(tmp_path: Path, capsys) -> None:
    areas = gpd.read_file(TRACTS).iloc[:3].to_crs("EPSG:2227")  # a state plane, in feet
    areas.to_file(tmp_path / "tracts.gpkg")
    out = tmp_path / "parcels.parquet"
    code, printed, err = run(
        ["parcels", "synth", str(tmp_path / "tracts.gpkg"), "--out", str(out)], capsys
    )
    assert code == 0, err
    parcels = gpd.read_parquet(out)
    assert f"{len(parcels):,} parcels" in printed and f"serve --parcels {out}" in printed
    assert parcels.crs.to_epsg() == 4326 and parcels["parcel_id"].is_unique
    same = fabric_for(areas)  # deterministic: the same fabric from Python
    assert parcels["group_id"].tolist() == same["group_id"].tolist()

    with parcelsearch.local_service(parcels=str(out)) as client:
        result = parcelsearch.search(areas, id_column="tract", client=client, progress=False)
    summary = result.summary()
    assert result.complete and (summary["parcels"] > 0).all() and len(summary) == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--out", "parcels.txt"], ".txt is not one of the formats written"),
        (["--out", "parcels.parquet", "--max-parcels", "10"], "raise --max-parcels"),
    ],
)
def test_synth_refuses_what_it_cannot_make(
    tmp_path: Path, capsys, argv, message, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    gpd.read_file(TRACTS).iloc[:2].to_file(tmp_path / "tracts.gpkg")
    code, _, err = run(["parcels", "synth", "tracts.gpkg", *argv], capsys)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.slow
def test_two_fabrics_for_two_areas_files_are_served_together(
    tmp_path: Path, capsys, spawn_service
) -> None:
    """The issue: two fabrics both numbered parcels from 1 ("parcel_id 1 appears 2 times")
    and the analyst renumbered by hand. Now each is made for its areas, 'serve' takes both,
    and a search of each areas file finds its own fabric's parcels on the one service."""
    tracts = gpd.read_file(TRACTS)
    files = {}
    for name, rows in (("north", [0, 1]), ("south", [7, 8])):
        tracts.iloc[rows].to_file(tmp_path / f"{name}.gpkg")
        files[name] = tmp_path / f"{name}.parquet"
        code, printed, err = run(
            ["parcels", "synth", str(tmp_path / f"{name}.gpkg"), "--out", str(files[name])], capsys
        )
        assert code == 0, err
        made = gpd.read_parquet(files[name])
        assert "estimated" in printed and "2 areas urban" in printed
        assert f"ids from {made.parcel_id.min():,}" in printed
    svc = spawn_service(
        "sqlite",
        parcels=gpd.read_parquet(files["north"]),
        workers=1,
        extra=["--parcels", str(files["south"])],
    )
    key = svc.keys.create("two-fabrics", key_type="production", quota=1_000)
    client = parcelsearch.Client(key, base_url=svc.base_url, ca_bundle=str(svc.ca_path))
    for name, rows in (("north", [0, 1]), ("south", [7, 8])):
        result = parcelsearch.search(
            tracts.iloc[rows], id_column="tract", client=client, progress=False
        )
        found = set(result.ids["group_id"])
        assert result.complete and (result.summary()["parcels"] > 0).all()
        assert found <= set(gpd.read_parquet(files[name]).group_id), name


def test_files_whose_ids_collide_are_refused_naming_both(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    tracts = gpd.read_file(TRACTS)
    for name, rows in (("a", [0]), ("b", [5])):
        made = fabric_for(tracts.iloc[rows])
        made.assign(parcel_id=range(1, len(made) + 1)).to_parquet(f"{name}.parquet")
    code, _, err = run(
        [
            "serve",
            "--parcels",
            "a.parquet",
            "--parcels",
            "b.parquet",
            "--port",
            "0",
            "--keys",
            "keys.sqlite",
            "--cert-dir",
            "certs",
        ],
        capsys,
    )
    assert code == 2 and "parcel_id 1 is in both parcels file a.parquet and b.parquet" in err
    assert "make synthetic fabrics again with 'parcels synth'" in err and "Traceback" not in err
    code, _, err = run(
        [
            "serve",
            "--parcels",
            "a.parquet",
            "--parcels",
            "postgresql://h/db",
            "--port",
            "0",
            "--keys",
            "keys.sqlite",
            "--cert-dir",
            "certs",
        ],
        capsys,
    )
    assert code == 2 and "a postgresql:// URL is served alone" in err


@pytest.mark.slow
def test_the_guide_goes_from_a_fresh_install_to_a_completed_search(tmp_path: Path) -> None:
    """The guide's console session run as written, on four real census tracts as the
    reader's areas.gpkg: synth, serve (kept running), a key whose quota fits, the exports,
    and a search under --budget that completes. The calls are the service's own count."""
    gpd.read_file(TRACTS).iloc[:4].rename(columns={"tract": "area_id"}).to_file(
        tmp_path / "areas.gpkg"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARCELSEARCH_")}
    env["PARCELSEARCH_CACHE_DIR"] = str(tmp_path / "cache")
    serving: subprocess.Popen[str] | None = None
    printed: dict[str, str] = {}
    try:
        for command in console_commands([GUIDE]):
            if command.startswith("pip install"):
                assert " && " not in command  # the install alone: what CI has done
                continue
            if command.startswith("export "):
                name, _, value = command[len("export ") :].partition("=")
                env[name] = {"PARCELSEARCH_API_KEY": printed.get("keys", value)}.get(
                    name, value.replace(":8443", f":{printed.get('port', '8443')}")
                )
                continue
            argv = shlex.split(command)
            assert argv[0] == "parcelsearch", command
            argv = [sys.executable, "-m", "parcelsearch.cli", *argv[1:]]
            if argv[3] == "serve":
                argv[argv.index("--port") + 1] = "0"
                serving = subprocess.Popen(
                    argv,
                    cwd=tmp_path,
                    env=env,
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
                line = serving.stdout.readline() if serving.stdout else ""
                found = re.match(r"serving https://127\.0\.0\.1:(\d+) \(CA: certs/ca\.pem\)", line)
                assert found, line
                assert line.rstrip().endswith("; 1 market from the parcels' market column")
                assert "1 market from the\nparcels' market column" in GUIDE.read_text()
                printed["port"] = found[1]
                continue
            done = subprocess.run(
                argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            printed[argv[3]] = done.stdout.strip()
            printed[argv[3] + " stderr"] = done.stderr
        assert "4 areas urban" in printed["parcels"] and "estimated" in printed["parcels"]
        ids = pd.read_parquet(tmp_path / "group_ids.parquet")
        assert set(ids["area_id"]) == set(gpd.read_file(tmp_path / "areas.gpkg").area_id)
        keys = KeyStore(default_keys_location())
        try:
            row = {r["name"]: r for r in keys.list()}["own-areas"]
        finally:
            keys.close()
        # the guide's figures: 57 calls and the market list's, under the --budget 100 and the
        # key's --quota 1000, which the command line was told (PARCELSEARCH_QUOTA)
        assert row["used_lifetime"] == 57 + 1 and row["quota"] == 1000
        assert printed["markets"].splitlines() == ["Your areas urban 1, CA"]
        assert "quota: it would leave " in printed["search stderr"], printed["search stderr"]
        assert "--budget 100" in GUIDE.read_text() and "take 57 calls" in GUIDE.read_text()
    finally:
        if serving is not None:
            serving.terminate()
            serving.wait(timeout=30)
            if serving.stdout:
                serving.stdout.close()


def test_a_county_on_suburban_lots_is_refused_pointing_to_rural_lots(
    tmp_path: Path, capsys
) -> None:
    county = TRACTS.parent / "statsnz_nelson_region.geojson"  # Stats NZ, CC BY 4.0
    code, _, err = run(
        [
            "parcels",
            "synth",
            str(county),
            "--out",
            str(tmp_path / "p.parquet"),
            "--place",
            "suburban",
        ],
        capsys,
    )
    assert code == 2 and "about 1,438,052 parcels, more than 1,000,000" in err
    assert "lay rural lots of several hectares (--place rural)" in err
    assert not (tmp_path / "p.parquet").exists()


@pytest.mark.slow
@pytest.mark.parametrize("margin", [50.0, 0.0])
def test_fabrics_for_touching_areas_overlap_by_the_margin_only(
    tmp_path: Path, margin: float
) -> None:
    """The guide: fabrics for areas that touch overlap by --margin along the shared edge;
    with --margin 0 a search of one area finds its own fabric's parcels only."""
    from parcelsearch_service.store import combined_parcels

    tracts = gpd.read_file(TRACTS).iloc[[0, 1]]  # two tracts sharing an edge
    assert tracts.geometry.iloc[0].touches(tracts.geometry.iloc[1])
    paths = []
    for k in (0, 1):
        paths.append(tmp_path / f"{k}.parquet")
        fabric_for(tracts.iloc[[k]], margin=margin).to_parquet(paths[-1])
    own = set(gpd.read_parquet(paths[0]).group_id)
    with parcelsearch.local_service(parcels=combined_parcels(paths)) as client:
        result = parcelsearch.search(
            tracts.iloc[[0]], id_column="tract", client=client, progress=False
        )
    found = set(result.ids["group_id"])
    assert result.complete and found
    assert (found <= own) == (margin == 0.0)  # 50 m: the other fabric's edge lots match too


@pytest.mark.slow
def test_a_served_fabric_brings_its_markets(tmp_path: Path, capsys, start_own_service) -> None:
    """Issue 59, point 1: 'parcels synth' names a market for each grid as the vendor names
    markets, 'serve --parcels' serves them, and the market list cached from one service (the
    demo's: no Californian market) never refuses the areas searched on another; where it
    does refuse (its own service), it says which list and how old it is, for 0 calls."""
    areas = gpd.read_file(TRACTS).iloc[:3]  # San Francisco: no state of the demo's markets
    areas.to_file(tmp_path / "tracts.gpkg")
    out = tmp_path / "parcels.parquet"
    code, _, err = run(
        ["parcels", "synth", str(tmp_path / "tracts.gpkg"), "--out", str(out)], capsys
    )
    assert code == 0, err
    brought = sorted(set(gpd.read_parquet(out)["market"]))
    assert brought and all(re.fullmatch(r"Your areas \w+ \d+, CA", m) for m in brought)

    cache = tmp_path / "cache"
    demo = start_own_service()
    demo_client = parcelsearch.Client(
        api_key=demo.keys.create("demo-list", key_type="production", quota=100, per_second=50),
        base_url=demo.base_url,
        ca_bundle=str(demo.ca_path),
        cache_dir=cache,
    )
    assert "Tucson, AZ" in parcelsearch.markets(demo_client)  # the demo's list, cached
    with pytest.raises(parcelsearch.InputError) as refused:
        parcelsearch.search(areas, id_column="tract", client=demo_client, progress=False)
    said = refused.value.message
    assert f"the market list cached from {demo.base_url} (fetched " in said
    assert " s ago;" in said and "delete " in said and "markets-" in said
    assert len(demo.keys.requests("demo-list")) == 1  # the list's call alone

    own = start_own_service(parcels=str(out))
    client = parcelsearch.Client(
        api_key=own.keys.create("own-areas", key_type="production", quota=1_000, per_second=50),
        base_url=own.base_url,
        ca_bundle=str(own.ca_path),
        cache_dir=cache,
        rate=40,
    )
    assert parcelsearch.markets(client) == brought  # served from the parcels
    result = parcelsearch.search(areas, id_column="tract", client=client, progress=False)
    assert result.complete and (result.summary()["parcels"] > 0).all()

    served = subprocess.Popen(  # the command line serves them too, and says so
        [
            sys.executable,
            "-m",
            "parcelsearch.cli",
            "serve",
            "--parcels",
            str(out),
            "--port",
            "0",
            "--keys",
            str(tmp_path / "k.sqlite"),
            "--cert-dir",
            str(tmp_path / "certs"),
        ],
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        line = served.stdout.readline() if served.stdout else ""
    finally:
        served.terminate()
        served.wait(timeout=30)
        if served.stdout:
            served.stdout.close()
    assert (
        f"; {len(brought)} market{'s' * (len(brought) != 1)} from the parcels' market "
        "column" in line
    ), line
