"""The table of output formats: each row writes and reads back its own files, every writer
goes through it, and a new format is one row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pyarrow.parquet as pq
import pytest

import parcelsearch
from parcelsearch import formats, outputs
from parcelsearch.comparison import Side
from parcelsearch.errors import InputError, OutputKeptError
from parcelsearch.formats import FORMATS, Format, file_metadata
from parcelsearch.result import SearchResult


@pytest.fixture(scope="module")
def result() -> SearchResult:
    planned = parcelsearch.plan(parcelsearch.demo_areas(), id_column="area_id")
    tiles = planned.tiles.assign(
        rows=pd.array([3] * len(planned.tiles), dtype="Int64"),
        pages=pd.array([1] * len(planned.tiles), dtype="Int64"),
        pages_fetched=1,
        calls=1,
        cached_pages=0,
        from_cache=False,
    )
    ids = pd.DataFrame(
        [("northside", "a1"), ("park-ring", "b2"), ("northside", "c3")],
        columns=["area_id", "group_id"],
    ).astype({"group_id": "string"})
    return SearchResult(ids=ids, tiles=tiles, plan=planned, calls=len(planned.tiles))


def _pairs(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return {(str(a), str(g)) for a, g in zip(frame["area_id"], frame["group_id"], strict=True)}


@pytest.mark.parametrize("suffix", outputs.IDS_FORMATS)
def test_every_out_format_reads_back_its_group_ids_and_run(
    result: SearchResult, tmp_path: Path, suffix: str
) -> None:
    path = outputs.write_ids(result, tmp_path / f"ids{suffix}")
    ids, meta = FORMATS[suffix].read_back(path)
    assert _pairs(ids) == _pairs(result.ids)
    expected = json.loads(json.dumps(outputs.run_metadata(result), default=str))
    assert meta == expected and file_metadata(path) == expected
    assert Side.of_file(path).ids.shape[0] == 3  # what `parcelsearch diff` reads


@pytest.mark.parametrize("suffix", outputs.IDS_FORMATS)
def test_to_file_writes_the_files_of_out(result: SearchResult, tmp_path: Path, suffix: str) -> None:
    """``result.to_file(path)``, as GeoPandas users expect: the extension chooses the
    format, and the file is the one ``--out`` writes (the CLI calls ``write_ids``)."""
    mine = result.to_file(tmp_path / f"mine{suffix}")
    cli = outputs.write_ids(result, tmp_path / f"cli{suffix}")
    if suffix == ".gpkg":
        pd.testing.assert_frame_equal(gpd.read_file(mine), gpd.read_file(cli))
    elif suffix == ".parquet":
        assert pq.read_table(mine).equals(pq.read_table(cli))
        assert pq.read_schema(mine).metadata == pq.read_schema(cli).metadata
    else:
        assert mine.read_bytes() == cli.read_bytes()
    assert file_metadata(mine) == file_metadata(cli)
    with pytest.raises(InputError, match="not one of the formats written"):
        result.to_file(tmp_path / "ids.xlsx")
    empty = SearchResult(ids=result.ids.iloc[:0], tiles=result.tiles, plan=result.plan)
    with pytest.raises(OutputKeptError):  # never destroyed, as --out
        empty.to_file(mine)


def test_to_parquet_keeps_its_documented_schema(result: SearchResult, tmp_path: Path) -> None:
    """``to_parquet`` goes through the parquet row but keeps its own schema: the ids as they
    are (``--out`` joins the areas' columns)."""
    path = result.to_parquet(tmp_path / "ids.parquet")
    assert pq.read_schema(path).names == ["area_id", "group_id"]
    assert "market" in pq.read_schema(outputs.write_ids(result, tmp_path / "out.parquet")).names
    assert file_metadata(path) == {**result.metadata, "group_ids": 3}


def test_the_formats_each_option_names_come_from_the_table() -> None:
    assert outputs.IDS_FORMATS == (".parquet", ".csv", ".gpkg", ".geojson")
    assert outputs.TILES_FORMATS == (".gpkg", ".geojson", ".parquet", ".shp")
    assert formats.suffixes("rows") == (".parquet", ".csv")  # Diff.to_file
    assert all(FORMATS[s].read_ids is not None for s in outputs.IDS_FORMATS)


# The row of docs/guide/development.md ("Adding an output format"), as written there.
def _flatgeobuf_tiles(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    formats._plain_columns(tiles).to_file(temp, driver="FlatGeobuf")


FLATGEOBUF = Format(".fgb", formats._sidecar_metadata, tiles=_flatgeobuf_tiles, sidecar=True)


def test_a_new_format_is_one_row(
    result: SearchResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the guide's row in the table, ``write_tiles`` (and ``--out-tiles``' check)
    writes FlatGeobuf: whole, the run's metadata beside it, never destroyed."""
    path = tmp_path / "pieces.fgb"
    with pytest.raises(InputError, match=r"\.fgb is not one of the formats written"):
        outputs.check_tiles_path(path)
    monkeypatch.setitem(FORMATS, ".fgb", FLATGEOBUF)
    meta = outputs.run_metadata(result)
    assert outputs.write_tiles(result.tiles, path, meta) == path
    assert len(gpd.read_file(path)) == len(result.tiles)
    assert file_metadata(path) == json.loads(json.dumps(meta, default=str))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "pieces.fgb",
        "pieces.fgb.parcelsearch.json",
    ]
    with pytest.raises(OutputKeptError):
        outputs.write_tiles(result.tiles, path, {**meta, "complete": False})


def test_asking_a_row_for_what_it_does_not_hold_names_the_formats_that_do(tmp_path: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"\.csv files hold no tiles: use one of \.gpkg, "
        r"\.geojson, \.parquet, \.shp",
    ):
        FORMATS[".csv"].writer("tiles")
    with pytest.raises(InputError, match=r"\.shp files are not read back: use one of \.gpkg"):
        FORMATS[".shp"].read_back(tmp_path / "pieces.shp")


FORMULAS = [
    '=HYPERLINK("http://x","y")',
    "+SUM(1+1)*cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "-2+3",
    "\tlead",
    "'=already quoted",
    "plain",
    "'plain",
]


def test_csv_cells_a_spreadsheet_would_run_are_escaped_and_read_back(
    result: SearchResult, tmp_path: Path
) -> None:
    """Issue 58, point 9 (docs/guide/files.md): ids such as ``=HYPERLINK(…)`` from the
    vendor or the input's id column were written verbatim. Now each is written with a
    leading ``'``; reading the file back (``diff``, ``compare``) gives the values as found."""
    ids = pd.DataFrame({"area_id": FORMULAS, "group_id": FORMULAS}).astype({"group_id": "string"})
    formulas = SearchResult(ids=ids, tiles=result.tiles, plan=result.plan, calls=1)
    path = outputs.write_ids(formulas, tmp_path / "ids.csv")
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    for column in ("area_id", "group_id"):
        cells = list(raw[column])
        assert all(not c.startswith(formats.FORMULA_STARTS) for c in cells), cells
        assert cells[FORMULAS.index("plain")] == "plain"
        assert cells[FORMULAS.index("'plain")] == "'plain"
        assert cells[FORMULAS.index("@SUM(1+1)")] == "'@SUM(1+1)"
    back, _ = FORMATS[".csv"].read_back(path)
    assert list(back["group_id"]) == FORMULAS and list(back["area_id"]) == FORMULAS
    assert back["group_id"].dtype == "string"
    assert formats.csv_cell("\rlead") == "'\rlead" and formats.csv_value("'\rlead") == "\rlead"
