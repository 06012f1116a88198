"""Last month's file is never destroyed: a refused, stopped or empty run beside a complete
output leaves it as it was (issue 41, point 1), on the command line and in Python."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from _cli import run

import parcelsearch
from parcelsearch import outputs


def _meta(path: Path) -> dict:
    return json.loads(pq.read_schema(path).metadata[b"parcelsearch"])


def test_a_refused_refresh_keeps_last_months_file(env, service, tmp_path, capsys) -> None:
    areas = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(areas)
    keep, tiles = tmp_path / "keep.parquet", tmp_path / "tiles.gpkg"
    base = [
        "search",
        str(areas),
        "--id-column",
        "area_id",
        "--quiet",
        "--out",
        str(keep),
        "--out-tiles",
        str(tiles),
    ]
    code, _, err = run(base, capsys)
    assert code == 0, err
    before, tiles_before = keep.read_bytes(), tiles.read_bytes()
    found = _meta(keep)["group_ids"]
    assert found > 1000

    code, _, err = run([*base, "--refresh", "changed", "--budget", "2"], capsys)
    assert code == 3 and "nothing was spent" in err
    assert keep.read_bytes() == before and tiles.read_bytes() == tiles_before
    aside = tmp_path / "keep.partial.parquet"
    assert f"kept as it was; this run was written beside it, to {aside}" in err
    assert _meta(aside)["complete"] is False and _meta(aside)["calls"] == 0
    assert (tmp_path / "tiles.partial.gpkg").exists()

    code, _, err = run([*base, "--refresh", "changed", "--budget", "2", "--force"], capsys)
    assert code == 3
    assert _meta(keep)["complete"] is False  # --force: replaced, as asked


def test_python_keeps_a_complete_file_from_a_refused_run(make_client, demo_areas, tmp_path) -> None:
    client = make_client()
    path = parcelsearch.search(demo_areas, client=client, progress=False).to_parquet(
        tmp_path / "keep.parquet"
    )
    before = path.read_bytes()
    with pytest.raises(parcelsearch.QuotaWouldExceedError) as refused:
        parcelsearch.search(demo_areas, client=client, refresh="changed", budget=3, progress=False)
    with pytest.raises(parcelsearch.OutputKeptError, match="complete result") as kept:
        refused.value.result.to_parquet(path)
    assert "force=True" in str(kept.value)
    assert path.read_bytes() == before
    refused.value.result.to_parquet(path, force=True)
    assert _meta(path)["complete"] is False


def test_tolerance_outputs_mark_group_ids_that_may_lie_outside(
    make_client, demo_areas, tmp_path
) -> None:
    """Issue 41: a search with a tolerance marks, in Python and in its files, the GroupIDs
    found only by pieces reaching beyond the area; every GroupID the exact search does not
    find (outside the area) is among them."""
    client = make_client()
    exact = parcelsearch.search(demo_areas, client=client, progress=False)
    loose = parcelsearch.search(demo_areas, client=client, tolerance=100, progress=False)
    assert "may_lie_outside" not in exact.ids.columns
    inside = set(zip(exact.ids["area_id"], exact.ids["group_id"], strict=True))
    outside = [
        k not in inside for k in zip(loose.ids["area_id"], loose.ids["group_id"], strict=True)
    ]
    assert any(outside)
    assert loose.ids.loc[outside, "may_lie_outside"].all()
    written = outputs.write_ids(loose, tmp_path / "loose.csv")
    assert pd.read_csv(written)["may_lie_outside"].sum() == loose.ids["may_lie_outside"].sum()
