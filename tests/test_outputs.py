"""Writers of GroupIDs and pieces: formats by extension, types kept, the run's metadata."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyarrow.parquet as pq
import pyogrio
import pytest

import parcelsearch
from parcelsearch import outputs
from parcelsearch.errors import InputError
from parcelsearch.result import SearchResult


@pytest.fixture(scope="module")
def planned() -> parcelsearch.Plan:
    return parcelsearch.plan(parcelsearch.demo_areas(), id_column="area_id")


def _result(
    planned,
    ids: list[tuple[str, str]],
    *,
    complete: bool = True,
    areas_complete: list[str] | None = None,
) -> SearchResult:
    tiles = planned.tiles.assign(
        rows=pd.array([3] * len(planned.tiles), dtype="Int64"),
        pages=pd.array([1] * len(planned.tiles), dtype="Int64"),
        pages_fetched=1,
        calls=1,
        cached_pages=0,
        from_cache=False,
    )
    frame = pd.DataFrame(ids, columns=["area_id", "group_id"]).astype({"group_id": "string"})
    return SearchResult(
        ids=frame,
        tiles=tiles,
        plan=planned,
        calls=len(planned.tiles),
        complete=complete,
        areas_complete=areas_complete,
    )


@pytest.mark.parametrize("suffix", outputs.IDS_FORMATS)
def test_an_empty_result_keeps_its_types(planned, tmp_path: Path, suffix: str) -> None:
    path = outputs.write_ids(_result(planned, []), tmp_path / f"ids{suffix}")
    if suffix == ".parquet":
        ids = pd.read_parquet(path)
        assert ids["group_id"].dtype == "string" and ids["area_id"].dtype != "float64"
    elif suffix == ".gpkg":
        areas = gpd.read_file(path)
        assert len(areas) == 5 and areas["n_group_ids"].tolist() == [0] * 5
        assert areas["group_ids"].tolist() == ["[]"] * 5
    elif suffix == ".geojson":
        features = json.loads(path.read_text())["features"]
        assert [f["properties"]["group_ids"] for f in features] == [[]] * 5
    else:
        assert path.read_text().splitlines() == ["area_id,group_id,name,market"]


def test_ids_are_joined_to_their_areas(planned, tmp_path: Path) -> None:
    result = _result(planned, [("northside", "a1"), ("park-ring", "b2"), ("northside", "c3")])
    ids = pd.read_parquet(outputs.write_ids(result, tmp_path / "ids.parquet"))
    assert ids[["area_id", "group_id", "market"]].values.tolist() == [
        ["northside", "a1", "Abilene, TX"],
        ["park-ring", "b2", "Tarrant County Unincorporated, TX"],
        ["northside", "c3", "Abilene, TX"],
    ]


def test_a_partial_result_says_so_and_which_areas_are_complete(planned, tmp_path: Path) -> None:
    result = _result(
        planned, [("northside", "a1")], complete=False, areas_complete=["northside", "park-ring"]
    )
    for suffix in (".parquet", ".gpkg", ".geojson", ".csv"):
        path = outputs.write_ids(result, tmp_path / f"ids{suffix}")
        if suffix == ".parquet":
            meta = json.loads(pq.read_schema(path).metadata[b"parcelsearch"])
        elif suffix == ".gpkg":
            meta = json.loads(pyogrio.read_info(path)["layer_metadata"]["parcelsearch"])
        elif suffix == ".geojson":
            meta = json.loads(path.read_text())["parcelsearch"]
        else:
            meta = json.loads((tmp_path / "ids.csv.parcelsearch.json").read_text())
        assert meta["complete"] is False and meta["calls"] == len(planned.tiles) == 7, suffix
        assert meta["areas_complete"] == ["northside", "park-ring"], suffix
        assert meta["id_column"] == "area_id" and meta["group_ids"] == 1, suffix


@pytest.mark.parametrize("name", ["ids.txt", "ids", "ids.shp", "ids.parquet.bak"])
def test_unknown_extensions_are_refused(name: str) -> None:
    with pytest.raises(InputError, match="is not one of the formats written") as caught:
        outputs.check_ids_path(name)
    assert "path='group_ids.parquet'" in str(caught.value)
    assert "--out group_ids.parquet" in caught.value.render("cli")


def test_shapefile_columns_are_shortened_explicitly(planned, tmp_path: Path) -> None:
    path = outputs.write_tiles(_result(planned, []).tiles, tmp_path / "t.shp", {"calls": 7})
    columns = gpd.read_file(path).columns.tolist()
    assert "request_by" in columns and "pages_fetc" in columns
    assert json.loads((tmp_path / "t.shp.parcelsearch.json").read_text())["calls"] == 7


@pytest.mark.parametrize("suffix", [".parquet", ".gpkg", ".geojson"])
def test_an_areas_own_group_id_column_is_kept_not_dropped(tmp_path: Path, suffix: str) -> None:
    """An area column named like a column the outputs add is kept as ``area_<name>``."""
    areas = parcelsearch.demo_areas().assign(
        group_id=lambda f: "own-" + f["area_id"], n_group_ids=7
    )
    planned = parcelsearch.plan(areas)
    path = outputs.write_ids(_result(planned, [("northside", "a1")]), tmp_path / f"i{suffix}")
    if suffix == ".parquet":
        written = pd.read_parquet(path)
        assert written.loc[0, "group_id"] == "a1"
        assert written.loc[0, "area_group_id"] == "own-northside"
    elif suffix == ".gpkg":
        written = gpd.read_file(path, layer="areas").set_index("area_id")
        assert written.loc["northside", "area_group_id"] == "own-northside"
        assert written.loc["northside", "area_n_group_ids"] == 7
        assert written.loc["northside", "n_group_ids"] == 1
    else:
        props = json.loads(path.read_text())["features"][0]["properties"]
        assert props["area_group_id"] == "own-northside" and props["group_ids"] == ["a1"]


# -- never destroyed -------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", outputs.IDS_FORMATS)
def test_a_complete_file_is_kept_from_less_complete_results(
    planned, tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"ids{suffix}"
    outputs.write_ids(_result(planned, [("northside", "1" * 17)]), path)
    before = path.read_bytes()
    for less in (
        _result(planned, [], complete=False, areas_complete=[]),  # refused
        _result(planned, []),
    ):  # complete, found nothing
        with pytest.raises(parcelsearch.OutputKeptError, match="kept as it was") as caught:
            outputs.write_ids(less, path)
        assert "force=True" in str(caught.value) and "--force" in caught.value.render("cli")
        assert path.read_bytes() == before
    assert outputs.file_metadata(path)["group_ids"] == 1
    outputs.write_ids(_result(planned, [], complete=False, areas_complete=[]), path, force=True)
    assert outputs.file_metadata(path)["complete"] is False


def test_a_partial_file_gives_way_to_one_at_least_as_complete(planned, tmp_path: Path) -> None:
    path = tmp_path / "ids.gpkg"
    outputs.write_ids(
        _result(
            planned,
            [("northside", "1" * 17)],
            complete=False,
            areas_complete=["northside", "park-ring"],
        ),
        path,
    )
    with pytest.raises(parcelsearch.OutputKeptError):
        outputs.write_ids(_result(planned, [], complete=False, areas_complete=["northside"]), path)
    with pytest.raises(parcelsearch.OutputKeptError):  # as many areas, fewer GroupIDs
        outputs.write_ids(
            _result(planned, [], complete=False, areas_complete=["northside", "park-ring"]), path
        )
    outputs.write_ids(
        _result(
            planned,
            [("northside", "1" * 17)],
            complete=False,
            areas_complete=["northside", "park-ring"],
        ),
        path,
    )
    outputs.write_ids(_result(planned, [("northside", "2" * 17)]), path)
    assert outputs.file_metadata(path)["complete"] is True


def test_pieces_of_a_complete_run_are_kept_too(planned, tmp_path: Path) -> None:
    path = tmp_path / "tiles.shp"
    full = _result(planned, [("northside", "1" * 17)])
    outputs.write_tiles(full.tiles, path, outputs.run_metadata(full))
    refused = _result(planned, [], complete=False, areas_complete=[])
    with pytest.raises(parcelsearch.OutputKeptError):
        outputs.write_tiles(refused.tiles, path, outputs.run_metadata(refused))
    assert outputs.aside_path(path, outputs.run_metadata(refused)).name == "tiles.partial.shp"


def test_geopackages_read_without_naming_a_layer_or_a_warning(planned, tmp_path: Path) -> None:
    """Issue 41: ``gpd.read_file`` on a GeoPackage written here warned "More than one layer
    found"; GroupIDs and pieces are one layer each, the run's metadata the layer's (issue 48:
    not the file's own, which GDAL copied into FILE.gpkg.aux.xml whenever it was read)."""
    result = _result(planned, [("northside", "a1"), ("northside", "c3"), ("park-ring", "b2")])
    ids = outputs.write_ids(result, tmp_path / "ids.gpkg")
    tiles = outputs.write_tiles(result.tiles, tmp_path / "tiles.gpkg", outputs.run_metadata(result))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        areas = gpd.read_file(ids).set_index("area_id")
        pieces = gpd.read_file(tiles)
    for path in (ids, tiles):
        pyogrio.list_layers(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ids.gpkg", "tiles.gpkg"]  # no .aux.xml
    assert json.loads(areas.loc["northside", "group_ids"]) == ["a1", "c3"]
    assert areas["n_group_ids"].to_dict()["park-ring"] == 1
    assert len(pieces) == len(result.tiles)
    for path in (ids, tiles):
        stored = json.loads(pyogrio.read_info(path)["layer_metadata"]["parcelsearch"])
        assert stored["group_ids"] == 3 and outputs.file_metadata(path) == stored


def test_group_ids_that_may_lie_outside_are_listed_per_area(planned, tmp_path: Path) -> None:
    result = _result(planned, [("northside", "a1"), ("northside", "c3")])
    result.ids["may_lie_outside"] = [False, True]
    areas = gpd.read_file(outputs.write_ids(result, tmp_path / "ids.gpkg")).set_index("area_id")
    assert json.loads(areas.loc["northside", "may_lie_outside"]) == ["c3"]
    assert json.loads(areas.loc["park-ring", "may_lie_outside"]) == []
    feature = json.loads(outputs.write_ids(result, tmp_path / "ids.geojson").read_text())
    assert feature["features"][0]["properties"]["may_lie_outside"] == ["c3"]


def test_python_paths_are_checked_and_missing_folders_made(planned, tmp_path: Path) -> None:
    """Issue 46/48 in Python: a folder named as the file is refused in Python's words, naming
    the path given; a file in a folder that does not exist makes it."""
    result = _result(planned, [("northside", "a1")])
    with pytest.raises(parcelsearch.InputError, match="it is a folder") as refused:
        outputs.write_ids(result, tmp_path)
    assert f"path='{tmp_path}/group_ids.parquet'" in refused.value.render("python")
    assert ".tmp" not in str(refused.value)
    written = outputs.write_ids(result, tmp_path / "new" / "deeper" / "ids.parquet")
    assert outputs.file_metadata(written)["group_ids"] == 1
    tiles = outputs.write_tiles(result.tiles, tmp_path / "t" / "pieces.shp")
    assert len(gpd.read_file(tiles)) == len(result.tiles)
