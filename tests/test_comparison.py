"""Diffs between two searches: rows, summary, changed pieces, refusals, files and run ids
(built from real plans, no network)."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import pandas as pd
import pyogrio
import pytest
import shapely

import parcelsearch
from parcelsearch import outputs
from parcelsearch.comparison import NotComparableError, Side, compare
from parcelsearch.result import SearchResult

A, B, C, D = "a" * 17, "b" * 17, "c" * 17, "d" * 17


def _areas(offset: float = 0.0) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {"area": ["x", "y"]},
        geometry=[
            shapely.box(-97.0, 32.0, -96.99 + offset, 32.01),
            shapely.box(-96.0, 32.0, -95.99, 32.01),
        ],
        crs="EPSG:4326",
    )


def _result(
    pairs: list[tuple[str, str]],
    rows: list[int],
    *,
    tolerance: float = 0.0,
    areas: gpd.GeoDataFrame | None = None,
    **tiles: list[object],
) -> SearchResult:
    plan = parcelsearch.plan(_areas() if areas is None else areas, tolerance, id_column="area")
    ids = pd.DataFrame(pairs, columns=["area", "group_id"]).astype({"group_id": "string"})
    table = plan.tiles.assign(
        rows=rows,
        pages=[1] * len(rows),
        pages_fetched=[1] * len(rows),
        calls=[1] * len(rows),
        cached_pages=[0] * len(rows),
        from_cache=[False] * len(rows),
        **tiles,
    )
    return SearchResult(ids=ids, tiles=table, plan=plan, calls=len(rows))


def test_rows_and_summary_name_what_appeared_and_vanished() -> None:
    old = _result([("x", A), ("x", B), ("y", C)], [2, 1])
    new = _result(
        [("x", A), ("x", D), ("y", C)], [2, 1], status=["read", "inferred"], changed=[True, False]
    )
    diff = new.diff(old)
    assert diff.rows.to_dict("records") == [
        {"area": "x", "group_id": B, "change": "removed"},
        {"area": "x", "group_id": D, "change": "added"},
    ]
    assert diff.summary.loc["x", ["before", "after", "added", "removed"]].tolist() == [2, 2, 1, 1]
    assert diff.summary.loc["y", ["read", "inferred", "changed_pieces"]].tolist() == [0, 1, 0]
    assert diff.pieces is not None and list(diff.pieces["area"]) == ["x"]
    assert (diff.added, diff.removed) == (1, 1)


def test_a_piece_whose_rows_differ_is_changed_without_flags() -> None:
    old = _result([("x", A), ("y", C)], [1, 1])
    new = _result([("x", A), ("y", C), ("y", D)], [1, 2])
    diff = new.diff(old)
    assert diff.pieces is not None and list(diff.pieces["area"]) == ["y"]


def test_no_change_is_an_empty_diff() -> None:
    old = _result([("x", A), ("y", C)], [1, 1])
    diff = _result([("x", A), ("y", C)], [1, 1]).diff(old)
    assert diff.rows.empty and diff.summary["comparable"].all()
    assert "0 added, 0 removed" in repr(diff)


def test_different_tolerance_is_refused_saying_why() -> None:
    old = _result([("x", A)], [1, 1])
    new = _result([("x", A)], [1, 1], tolerance=5.0)
    with pytest.raises(NotComparableError, match="tolerance 0 m.*5 m") as caught:
        new.diff(old)
    assert "--tolerance 0" in caught.value.render("cli")


def test_different_areas_are_refused_naming_the_common_ones() -> None:
    old = _result([("x", A)], [1, 1])
    one = _areas().iloc[[0]]
    plan = parcelsearch.plan(one, id_column="area")
    new = SearchResult(
        ids=pd.DataFrame({"area": ["x"], "group_id": [A]}),
        tiles=plan.tiles.assign(
            rows=[1], pages=[1], pages_fetched=[1], calls=[1], cached_pages=[0], from_cache=[False]
        ),
        plan=plan,
    )
    with pytest.raises(
        NotComparableError,
        match=r"only the previous result has areas 'y'.*"
        r"comparable on 1 common areas \('x'\)",
    ):
        new.diff(old)


def test_same_ids_other_geometries_are_refused() -> None:
    old = _result([("x", A)], [1, 1])
    new = _result([("x", A)], [1, 1], areas=_areas(offset=0.001))
    with pytest.raises(NotComparableError, match="different geometries"):
        new.diff(old)


def test_areas_an_incomplete_side_did_not_finish_are_left_out() -> None:
    old = _result([("x", A), ("y", C)], [1, 1])
    partial = _result([("x", B)], [1, 1])
    partial = SearchResult(
        ids=partial.ids,
        tiles=partial.tiles,
        plan=partial.plan,
        complete=False,
        areas_complete=["x"],
    )
    diff = partial.diff(old)
    assert set(diff.rows["area"]) == {"x"}
    assert diff.summary["comparable"].to_dict() == {"x": True, "y": False}


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".gpkg", ".geojson"])
def test_outputs_compare_like_results(tmp_path: Path, suffix: str) -> None:
    old = _result([("x", A), ("x", B), ("y", C)], [2, 1])
    new = _result([("x", A), ("y", C), ("y", D)], [1, 2])
    paths = [outputs.write_ids(r, tmp_path / f"{n}{suffix}") for n, r in (("o", old), ("n", new))]
    diff = compare(Side.of_file(paths[0]), Side.of_file(paths[1]))
    expected = new.diff(old).rows
    assert diff.rows.astype({"group_id": str}).equals(expected.astype({"group_id": str}))


def test_a_file_that_is_not_an_output_is_refused(tmp_path: Path) -> None:
    with pytest.raises(parcelsearch.InputError, match="does not exist"):
        Side.of_file(tmp_path / "missing.parquet")
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(parcelsearch.InputError, match=r"\.txt is not one of"):
        Side.of_file(tmp_path / "x.txt")
    pd.DataFrame({"area": ["x"], "group_id": [A]}).to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(parcelsearch.InputError, match="no run metadata"):
        Side.of_file(tmp_path / "plain.parquet")


def test_diff_rows_are_written(tmp_path: Path) -> None:
    old = _result([("x", A), ("y", C)], [1, 1])
    diff = _result([("x", B), ("y", C)], [1, 1]).diff(old)
    written = pd.read_csv(diff.to_file(tmp_path / "d.csv"))
    assert written[["group_id", "change"]].values.tolist() == [[A, "removed"], [B, "added"]]
    with pytest.raises(parcelsearch.InputError, match="use .parquet or .csv"):
        diff.to_file(tmp_path / "d.gpkg")


def test_result_maps_outline_the_pieces_that_changed() -> None:
    from parcelsearch.maps.describe import CHANGED_NAME, result_spec

    changed = _result([("x", A), ("y", C)], [1, 1], changed=pd.array([True, None], dtype="boolean"))
    spec = result_spec(changed)
    assert spec.feature_counts()[CHANGED_NAME] == 1
    assert "1 changed" in spec.subtitle
    assert any(e.label == "changed since the last run" for e in spec.legend.entries)
    plain = result_spec(_result([("x", A), ("y", C)], [1, 1]))
    assert CHANGED_NAME not in plain.feature_counts()


@pytest.mark.parametrize("suffix", [".gpkg", ".geojson"])
def test_areas_read_back_from_a_file_compare_with_the_originals(
    tmp_path: Path, suffix: str
) -> None:
    from parcelsearch.stores.history import areas_fingerprint

    areas = parcelsearch.demo_areas()  # one area is a MultiPolygon: a GPKG makes all multi
    areas.to_file(tmp_path / f"areas{suffix}")
    back = gpd.read_file(tmp_path / f"areas{suffix}")
    assert (back.geom_type == "MultiPolygon").any()
    assert areas_fingerprint(parcelsearch.plan(back, id_column="area_id")) == areas_fingerprint(
        parcelsearch.plan(areas, id_column="area_id")
    )


def _hostile_files(tmp_path: Path, good: Path) -> dict[str, Path]:
    """Files a careless or hostile colleague might hand over as a search's output."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    data = good.read_bytes()
    meta = pq.read_schema(good).metadata
    files: dict[str, Path] = {}

    def put(name: str, content: bytes | str) -> None:
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        files[name] = path

    put("empty.parquet", b"")
    put("truncated.parquet", data[: len(data) // 2])
    put("random.parquet", bytes(range(256)) * 40)
    table = pq.read_table(good)
    for name, raw in (
        ("badjson.parquet", b"{not json"),
        ("listmeta.parquet", b"[1, 2]"),
        (
            "badareas.parquet",
            json.dumps({"id_column": "area", "areas": 7, "tolerance": 0}).encode(),
        ),
        (
            "badtol.parquet",
            json.dumps({"id_column": "area", "areas": ["x"], "tolerance": "far"}).encode(),
        ),
    ):
        pq.write_table(
            table.replace_schema_metadata({**meta, b"parcelsearch": raw}), tmp_path / name
        )
        files[name] = tmp_path / name
    wrong = pa.table({"area": [1.5, 2.5], "group_id": [[1], [2]]})
    pq.write_table(wrong.replace_schema_metadata(meta), tmp_path / "types.parquet")
    files["types.parquet"] = tmp_path / "types.parquet"
    put("broken.csv", '"area,group_id\n"x' + "\x00" * 10)
    put("broken.csv.parcelsearch.json", "{")
    put("list.geojson", "[1, 2, 3]")
    put("broken.geojson", '{"type": "FeatureCollection", "features": [{"properties": 5}]}')
    put("random.gpkg", bytes(range(256)) * 10)
    _areas().to_file(tmp_path / "nolayer.gpkg", layer="other")  # no group_ids layer
    files["nolayer.gpkg"] = tmp_path / "nolayer.gpkg"
    (tmp_path / "dir.parquet").mkdir()
    files["dir.parquet"] = tmp_path / "dir.parquet"
    return files


def test_hostile_files_are_input_errors_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39, finding 9: damaged or foreign files given to ``parcelsearch diff`` are
    input errors (exit 2) naming the file, never "a bug in parcelsearch"."""
    from _cli import run

    good = outputs.write_ids(_result([("x", A), ("y", C)], [1, 1]), tmp_path / "good.parquet")
    for name, path in _hostile_files(tmp_path, good).items():
        if name.endswith(".json"):
            continue
        code, _, err = run(["diff", str(good), str(path)], capsys)
        assert code == 2, (name, err)
        assert name in err and "a bug" not in err and "Traceback" not in err, (name, err)


def test_rows_without_ids_are_ignored_with_a_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Null GroupIDs (or area ids) are not counted as added: they are left out, and said."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from _cli import run

    old = outputs.write_ids(_result([("x", A), ("y", C)], [1, 1]), tmp_path / "old.parquet")
    table = pq.read_table(old)
    nulls = pa.table({"area": ["x", "y", None], "group_id": [A, None, B]})
    pq.write_table(
        pa.concat_tables(
            [
                table.select(["area", "group_id"]),
                nulls.cast(table.select(["area", "group_id"]).schema),
            ]
        ).replace_schema_metadata(table.schema.metadata),
        tmp_path / "new.parquet",
    )
    code, out, err = run(["diff", str(old), str(tmp_path / "new.parquet")], capsys)
    assert code == 0, err
    assert "0 GroupIDs added, 0 GroupIDs removed" in out
    assert "2 rows without an area id or group_id are ignored" in err


def test_files_of_group_ids_leave_the_piece_counts_unknown_not_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: ``diff`` of two output files said 0 pieces, 0 read, 0 inferred per area."""
    from parcelsearch.cli import main

    old = _result([("x", A), ("y", C)], [1, 1])
    new = _result([("x", B), ("y", C)], [1, 1])
    paths = [outputs.write_ids(r, tmp_path / f"{n}.parquet") for n, r in (("o", old), ("n", new))]
    diff = compare(Side.of_file(paths[0]), Side.of_file(paths[1]))
    pieces = ["pieces", "read", "inferred", "sampled", "changed_pieces"]
    assert diff.summary[pieces].isna().all().all()
    assert diff.summary[["added", "removed"]].sum().tolist() == [1, 1]
    assert "pieces unknown" in repr(diff)
    known = new.diff(old)  # results know their pieces: counts, zeros included
    assert known.summary.loc["y", pieces].tolist() == [1, 1, 0, 0, 0]
    assert main(["diff", str(paths[0]), str(paths[1])]) == 0
    printed = capsys.readouterr().out
    assert "changed_pieces: unknown (<NA>)" in printed and "1 GroupID added" in printed


def _old_layout(result: SearchResult, path: Path) -> Path:
    """A GeoPackage as earlier builds wrote it: layers ``areas``, ``group_ids`` (a table) and
    ``parcelsearch_run`` (the metadata, one row) — last month's files."""
    meta = outputs.run_metadata(result)
    result.plan.areas.reset_index().to_file(path, layer="areas", driver="GPKG")
    ids = result.ids[["area", "group_id"]].astype({"group_id": object})
    pyogrio.write_dataframe(ids, path, layer="group_ids", driver="GPKG", append=False)
    run = pd.DataFrame(
        {"complete": [True], "calls": [meta["calls"]], "metadata": [json.dumps(meta, default=str)]}
    )
    pyogrio.write_dataframe(run, path, layer="parcelsearch_run", driver="GPKG", append=False)
    return path


def test_a_geopackage_of_an_earlier_build_still_compares(tmp_path: Path) -> None:
    """Issue 41: the GeoPackage became one layer; last month's three-layer files are still
    read (GroupIDs and run metadata), by diff and by the never-destroyed check."""
    old = _result([("x", A), ("x", B), ("y", C)], [2, 1])
    new = _result([("x", A), ("y", C), ("y", D)], [1, 2])
    before = _old_layout(old, tmp_path / "before.gpkg")
    assert outputs.file_metadata(before)["group_ids"] == 3
    after = outputs.write_ids(new, tmp_path / "after.gpkg")
    diff = compare(Side.of_file(before), Side.of_file(after))
    assert diff.rows.astype({"group_id": str}).equals(new.diff(old).rows.astype({"group_id": str}))


def test_a_geopackage_with_the_run_as_its_own_metadata_compares_leaving_no_aux_xml(
    tmp_path: Path,
) -> None:
    """Issue 48: files of the previous build kept the run as the GeoPackage's own metadata,
    which GDAL copied into FILE.gpkg.aux.xml whenever a reader opened the file; they are still
    read, and reading them here leaves nothing beside them."""
    old = _result([("x", A), ("x", B), ("y", C)], [2, 1])
    written = outputs.write_ids(old, tmp_path / "new.gpkg")
    frame = pyogrio.read_dataframe(written)
    before = tmp_path / "before.gpkg"
    pyogrio.write_dataframe(
        frame,
        before,
        layer="areas",
        driver="GPKG",
        dataset_metadata={"parcelsearch": json.dumps(outputs.run_metadata(old), default=str)},
    )
    written.unlink()
    assert outputs.file_metadata(before)["group_ids"] == 3
    assert set(Side.of_file(before).ids["group_id"].astype(str)) == {A, B, C}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["before.gpkg"]


def test_a_geopackage_without_our_run_is_refused_naming_it(tmp_path: Path) -> None:
    _areas().to_file(tmp_path / "areas.gpkg", layer="areas")  # ours in name only
    with pytest.raises(parcelsearch.InputError, match="holds no run of 'parcelsearch search"):
        Side.of_file(tmp_path / "areas.gpkg")
