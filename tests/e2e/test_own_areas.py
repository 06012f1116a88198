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
