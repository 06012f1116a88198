"""Your own areas on the reference service (issue 41, point 5): 'parcels synth' lays a fabric
under any areas file, the service serves it, and a search finds parcels in every area."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import pytest
from _cli import run

import parcelsearch
from parcelsearch_service.synth import fabric_for

TRACTS = Path(__file__).resolve().parents[1] / "data" / "sf_tracts_2020.geojson"


@pytest.mark.slow
def test_synth_on_the_command_line_then_served_and_searched(tmp_path: Path, capsys) -> None:
    areas = gpd.read_file(TRACTS).iloc[:3].to_crs("EPSG:2227")  # a state plane, in feet
    areas.to_file(tmp_path / "tracts.gpkg")
    out = tmp_path / "parcels.parquet"
    code, printed, err = run(["parcels", "synth", str(tmp_path / "tracts.gpkg"),
                              "--out", str(out)], capsys)
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


@pytest.mark.parametrize(("argv", "message"), [
    (["--out", "parcels.txt"], ".txt is not one of the formats written"),
    (["--out", "parcels.parquet", "--max-parcels", "10"], "raise --max-parcels"),
])
def test_synth_refuses_what_it_cannot_make(tmp_path: Path, capsys, argv, message,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    gpd.read_file(TRACTS).iloc[:2].to_file(tmp_path / "tracts.gpkg")
    code, _, err = run(["parcels", "synth", "tracts.gpkg", *argv], capsys)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.slow
def test_two_fabrics_for_two_areas_files_are_served_together(tmp_path: Path, capsys,
                                                             spawn_service) -> None:
    """The issue: two fabrics both numbered parcels from 1 ("parcel_id 1 appears 2 times")
    and the analyst renumbered by hand. Now each is made for its areas, 'serve' takes both,
    and a search of each areas file finds its own fabric's parcels on the one service."""
    tracts = gpd.read_file(TRACTS)
    files = {}
    for name, rows in (("north", [0, 1]), ("south", [7, 8])):
        tracts.iloc[rows].to_file(tmp_path / f"{name}.gpkg")
        files[name] = tmp_path / f"{name}.parquet"
        code, printed, err = run(["parcels", "synth", str(tmp_path / f"{name}.gpkg"),
                                  "--out", str(files[name])], capsys)
        assert code == 0, err
        made = gpd.read_parquet(files[name])
        assert "estimated" in printed and "2 areas urban" in printed
        assert f"ids from {made.parcel_id.min():,}" in printed
    svc = spawn_service("sqlite", parcels=gpd.read_parquet(files["north"]), workers=1,
                        extra=["--parcels", str(files["south"])])
    key = svc.keys.create("two-fabrics", key_type="production", quota=1_000)
    client = parcelsearch.Client(key, base_url=svc.base_url, ca_bundle=str(svc.ca_path))
    for name, rows in (("north", [0, 1]), ("south", [7, 8])):
        result = parcelsearch.search(tracts.iloc[rows], id_column="tract", client=client,
                                     progress=False)
        found = set(result.ids["group_id"])
        assert result.complete and (result.summary()["parcels"] > 0).all()
        assert found <= set(gpd.read_parquet(files[name]).group_id), name


def test_files_whose_ids_collide_are_refused_naming_both(tmp_path: Path, capsys,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.chdir(tmp_path)
    tracts = gpd.read_file(TRACTS)
    for name, rows in (("a", [0]), ("b", [5])):
        made = fabric_for(tracts.iloc[rows])
        made.assign(parcel_id=range(1, len(made) + 1)).to_parquet(f"{name}.parquet")
    code, _, err = run(["serve", "--parcels", "a.parquet", "--parcels", "b.parquet",
                        "--port", "0", "--keys", "keys.sqlite", "--cert-dir", "certs"], capsys)
    assert code == 2 and "parcel_id 1 is in both parcels file a.parquet and b.parquet" in err
    assert "make synthetic fabrics again with 'parcels synth'" in err and "Traceback" not in err
