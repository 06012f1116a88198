"""Writing what a run produced: GroupIDs and pieces, in the format the file name asks for.

GroupIDs (:func:`write_ids`), by extension:

- ``.parquet`` / ``.csv``: one row per (area id, ``group_id``), joined to the area's
  attributes (no geometry);
- ``.gpkg``: one layer, ``areas`` (one feature per area: its id, attributes,
  ``n_group_ids``, its GroupIDs as a JSON list in the text field ``group_ids``, and
  geometry), so that ``geopandas.read_file`` reads it without naming a layer;
- ``.geojson``: one feature per area (id, attributes, ``n_group_ids``), its GroupIDs as a
  ``group_ids`` list property.

From a search with a tolerance, the GroupIDs found only by pieces reaching beyond the area
(so possibly up to the tolerance outside it) are marked, and from any search those listed
for two areas whose pieces found them where they meet across a boundary (within 22 cm of
both): a boolean ``may_lie_outside``
column of the parquet and CSV rows, a ``may_lie_outside`` list beside ``group_ids`` in a
GeoPackage or GeoJSON feature.

Pieces (:func:`write_tiles`): ``.gpkg``, ``.geojson``, ``.parquet``, ``.shp``.

Every file carries the run's metadata (:func:`run_metadata`: ``complete``, ``calls``,
``cached_pages``, ``areas_complete``, …) in its format's natural place: the parquet schema
metadata under the key ``parcelsearch`` (JSON), the GeoPackage layer's metadata under the same
key (its ``gpkg_metadata`` table: ``pyogrio.read_info(path)["layer_metadata"]``, QGIS's layer
properties; not the GeoPackage's own, which GDAL copies into a ``FILE.gpkg.aux.xml`` when a
reader opens the file), a top-level ``parcelsearch`` member of a GeoJSON FeatureCollection,
and a sidecar ``FILE.csv.parcelsearch.json`` beside a CSV (or a Shapefile).

An empty result keeps its column types (``group_id`` is text, never float64).

Where a file goes is checked before a search spends anything (:func:`prepare_path`): not a
folder, its folder made when missing and proven writable; an error names the path given,
never a temporary file.

Files are never destroyed: each is written to a temporary file beside it and renamed (a
Shapefile's set of files in a temporary folder, moved in once whole), temporary files a killed
run left are removed by the next write there, and an
existing file is replaced only by something at least as complete (:func:`replaces`): a
partial or refused run, or a complete one that found no GroupID, beside a complete file that
found some raises :class:`~parcelsearch.errors.OutputKeptError` and leaves the file as it was
(``force=True`` replaces it anyway; the command line writes such a run beside it instead,
:func:`aside_path`).
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pyogrio.errors import DataSourceError

from parcelsearch._shared import package_version
from parcelsearch.errors import Hint, InputError
from parcelsearch.kept_files import (
    AREAS_LAYER,
    METADATA_KEY,
    aside_path,
    atomically,
    atomically_as_set,
    check_replace,
    file_metadata,
    remove_stale,
    replaces,
)
from parcelsearch.result import SearchResult

__all__ = [
    "IDS_FORMATS",
    "TILES_FORMATS",
    "check_ids_path",
    "check_tiles_path",
    "check_map_path",
    "prepare_path",
    "write_map",
    "terminal_table",
    "ids_table",
    "run_metadata",
    "write_ids",
    "write_tiles",
    "file_metadata",
    "replaces",
    "check_replace",
    "aside_path",
    "atomically",
]

#: Extensions :func:`write_ids` writes.
IDS_FORMATS = (".parquet", ".csv", ".gpkg", ".geojson")
#: Extensions :func:`write_tiles` writes.
TILES_FORMATS = (".gpkg", ".geojson", ".parquet", ".shp")
#: Extensions :func:`write_map` writes.
MAP_FORMATS = (".html",)


#: Per option: its formats and an example file name (for hints).
_KNOBS = {"out": (IDS_FORMATS, "group_ids.parquet"), "out_tiles": (TILES_FORMATS, "tiles.gpkg"),
          "out_map": (MAP_FORMATS, "map.html")}


def check_ids_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if :func:`write_ids` can write it; else an error naming the formats."""
    return _check(path, "out")


def check_tiles_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if :func:`write_tiles` can write it."""
    return _check(path, "out_tiles")


def check_map_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path if :func:`write_map` can write it (``.html``)."""
    return _check(path, "out_map")


def write_map(obj: Any, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """A plan's or a result's offline HTML map (:func:`parcelsearch.maps.save_html`: the
    pieces, what each found, the pieces a refresh found changed), written whole."""
    from parcelsearch.maps import save_html  # the maps only when a map is asked for

    out = prepare_path(check_map_path(path), "out_map")
    _writing(out, "out_map", lambda: atomically(out, lambda temp: save_html(obj, temp,
                                                                            title=title)))
    return out


def _check(path: str | os.PathLike[str], knob: str) -> Path:
    """``path`` if a file of a format ``knob`` writes can be written there (its folder may be
    missing: :func:`prepare_path` makes it); nothing is created."""
    formats, example = _KNOBS[knob]
    out = Path(path).expanduser()
    if out.is_dir():
        raise InputError(
            f"cannot write {str(out)!r}: it is a folder; name a file in it",
            field=knob, hints=[Hint(knob, str(out / example), "for example {knob}")])
    if out.suffix.lower() not in formats:
        shown = out.suffix or "no extension"
        raise InputError(
            f"cannot write {str(out)!r}: {shown} is not one of the formats written "
            f"({', '.join(formats)})",
            field=knob,
            hints=[Hint(knob, example, "name a file such as {knob}")],
        )
    folder = _existing_ancestor(out.parent)
    if not folder.is_dir():
        raise InputError(
            f"cannot write {str(out)!r}: {str(folder)!r} is a file, not a folder",
            field=knob, hints=[Hint(knob, example, "name a file in a folder, e.g. {knob}")])
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _cannot_write(out, knob, PermissionError(errno.EACCES, os.strerror(errno.EACCES)),
                            folder)
    return out


def _existing_ancestor(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def prepare_path(out: Path, knob: str = "out") -> Path:
    """Make ready to write ``out`` (checked by ``check_*_path``) before anything is spent: its
    folder made when missing, a file created and removed there to prove it writable (a
    read-only folder fails here, not after the search), and the temporary files a killed run
    left there removed (:func:`~parcelsearch.kept_files.remove_stale`).

    Raises
    ------
    InputError
        The folder cannot be made or written; the message names ``out`` and the fix.
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=f".{out.stem}-", suffix=".probe", dir=out.parent)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise _cannot_write(out, knob, exc, _existing_ancestor(out.parent)) from None
    remove_stale(out.parent)
    return out


def _cannot_write(out: Path, knob: str, exc: OSError, folder: Path | None = None
                  ) -> InputError:
    """The error of a file that cannot be written, naming the user's path (never a
    temporary file's) and the fix."""
    reason = exc.strerror or str(exc)
    where = f" (the folder {str(folder)!r})" if folder is not None else ""
    return InputError(
        f"cannot write {str(out)!r}{where}: {reason}",
        field=knob,
        hints=[Hint(knob, _KNOBS[knob][1], "name a file in a folder you can write to, e.g. "
                                          "{knob}")])


def _writing(out: Path, knob: str, write: Callable[[], object]) -> None:
    """Run ``write``; a failure to write is said about ``out`` (the user's path)."""
    try:
        write()
    except (OSError, DataSourceError) as exc:
        error = exc if isinstance(exc, OSError) else OSError(str(exc))
        raise _cannot_write(out, knob, error) from None


# -- tables on a terminal ------------------------------------------------------------------

#: Rows of a table printed on a terminal; the rest are counted on a "… N more" line.
TERMINAL_ROWS = 20


def terminal_table(frame: pd.DataFrame, *, rows: int = TERMINAL_ROWS, noun: str = "row",
                   where: str = "") -> str:
    """``frame`` as text for a terminal: at most ``rows`` rows, then ``… N more <noun>s``
    (and ``where`` to find them all); geometry columns are left out (never polygons as
    text)."""
    shown = pd.DataFrame(frame).drop(
        columns=[c for c in frame.columns if isinstance(frame[c].dtype, gpd.array.GeometryDtype)])
    with pd.option_context("display.width", 120, "display.max_columns", 20,
                           "display.max_colwidth", 40):
        text = shown.head(rows).to_string()
    more = len(shown) - rows
    if more > 0:
        text += f"\n… {more:,} more {noun}{'s' * (more != 1)}{f' ({where})' if where else ''}"
    return text


# -- metadata ------------------------------------------------------------------------------


def run_metadata(result: SearchResult) -> dict[str, Any]:
    """What a file must say about the run that produced it (JSON-ready).

    :attr:`SearchResult.metadata` (``complete``, ``calls``, ``cached_pages``,
    ``areas_complete``, …) plus the id column, the number of GroupIDs, the areas skipped and
    the version of parcelsearch.
    """
    meta: dict[str, Any] = dict(result.metadata)
    meta.setdefault("id_column", result.id_name)
    meta.setdefault("group_ids", int(len(result.group_ids)))
    meta.setdefault("skipped", [_plain(a) for a in result.skipped.index])
    meta.setdefault("parcelsearch_version", package_version())
    return {key: _plain(value) for key, value in meta.items()}


def _plain(value: Any) -> Any:
    """numpy scalars and tuples as plain JSON values."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _metadata_json(meta: Mapping[str, Any]) -> str:
    return json.dumps(meta, default=str, sort_keys=True)


# -- GroupIDs ------------------------------------------------------------------------------


def write_ids(result: SearchResult, path: str | os.PathLike[str], *, force: bool = False
              ) -> Path:
    """Write a result's GroupIDs, joined to their areas, in the format ``path`` names.

    Parameters
    ----------
    result
        A (possibly partial) :class:`~parcelsearch.SearchResult`.
    path
        Where to write; the extension chooses the format (see the module docstring).
    force
        Replace an existing file even when it is more complete than ``result``.

    Returns
    -------
    Path
        The file written (written whole or not at all: a temporary file is renamed).

    Raises
    ------
    InputError
        The extension is not one of :data:`IDS_FORMATS`.
    OutputKeptError
        ``path`` holds a more complete result (see :func:`replaces`); it is left as it was.
    """
    out = prepare_path(check_ids_path(path), "out")
    meta = run_metadata(result)
    check_replace(out, meta, force=force)
    writer = {".parquet": _ids_parquet, ".csv": _ids_csv, ".gpkg": _ids_gpkg,
              ".geojson": _ids_geojson}[out.suffix.lower()]
    _writing(out, "out", lambda: atomically(out, lambda temp: writer(result, temp, meta)))
    if out.suffix.lower() == ".csv":
        _writing(out, "out", lambda: _sidecar(out, meta))
    return out


def ids_table(result: SearchResult) -> pd.DataFrame:
    """One row per (area id, ``group_id``) with the area's attributes, typed even when empty."""
    ids = _typed_ids(result)
    attributes = _attributes(result)
    return ids.merge(attributes, how="left", left_on=result.id_name, right_index=True)


def _typed_ids(result: SearchResult) -> pd.DataFrame:
    """Area id and ``group_id`` (and ``may_lie_outside`` when the search marked any: found
    only by pieces reaching beyond the area, or listed for two areas across a boundary)."""
    id_name = result.id_name
    flag = [c for c in ("may_lie_outside",) if c in result.ids.columns]
    ids = result.ids[[id_name, "group_id", *flag]].copy()
    ids[id_name] = ids[id_name].astype(result.plan.areas.index.dtype)
    ids["group_id"] = ids["group_id"].astype("string")
    return ids.reset_index(drop=True)


#: Columns the outputs add; an area's own column of the same name is kept as ``area_<name>``.
ADDED_COLUMNS = ("group_id", "n_group_ids", "group_ids", "may_lie_outside")


def _attributes(result: SearchResult) -> pd.DataFrame:
    """The areas' own columns (not geometry), by area id; one named like a column the
    outputs add (:data:`ADDED_COLUMNS`) or like the id is kept as ``area_<name>``."""
    areas = result.plan.areas
    own = pd.DataFrame(areas.drop(columns=areas.geometry.name))
    clashes = {c: f"area_{c}" for c in own.columns if c in (*ADDED_COLUMNS, result.id_name)}
    return own.rename(columns=clashes)


def _per_area(result: SearchResult) -> gpd.GeoDataFrame:
    """One row per area: id, attributes, number of GroupIDs, geometry."""
    areas = result.plan.areas
    counts = result.ids.groupby(result.id_name)["group_id"].nunique()
    frame = gpd.GeoDataFrame(_attributes(result), geometry=areas.geometry, crs=areas.crs)
    frame.insert(len(frame.columns) - 1, "n_group_ids",
                 counts.reindex(areas.index).fillna(0).astype("int64").to_numpy())
    return frame.rename_axis(result.id_name).reset_index()


def _ids_parquet(result: SearchResult, temp: Path, meta: Mapping[str, Any]) -> None:
    table = pa.Table.from_pandas(ids_table(result), preserve_index=False)
    schema_meta = dict(table.schema.metadata or {})
    schema_meta[METADATA_KEY.encode()] = _metadata_json(meta).encode()
    pq.write_table(table.replace_schema_metadata(schema_meta), temp)


def _ids_csv(result: SearchResult, temp: Path, meta: Mapping[str, Any]) -> None:
    ids_table(result).to_csv(temp, index=False)


def _ids_gpkg(result: SearchResult, temp: Path, meta: Mapping[str, Any]) -> None:
    frame = _with_lists(result, json.dumps)
    frame.to_file(temp, layer=AREAS_LAYER, driver="GPKG",
                  layer_metadata={METADATA_KEY: _metadata_json(meta)})


def _with_lists(result: SearchResult, shown: Callable[[list[str]], Any]
                ) -> gpd.GeoDataFrame:
    """One row per area (:func:`_per_area`) with its GroupIDs, sorted, as ``shown(list)`` in
    ``group_ids`` (and those that may lie outside in ``may_lie_outside``)."""
    frame = _per_area(result)
    ids = result.ids
    columns = {"group_ids": ids}
    if "may_lie_outside" in ids.columns:
        columns["may_lie_outside"] = ids[ids["may_lie_outside"].astype(bool)]
    at = len(frame.columns) - 1  # before the geometry
    for column, rows in columns.items():
        lists = rows.groupby(result.id_name)["group_id"].agg(lambda s: sorted(set(map(str, s))))
        frame.insert(at, column, [shown(lists.get(a, [])) for a in frame[result.id_name]])
        at += 1
    return frame


def _ids_geojson(result: SearchResult, temp: Path, meta: Mapping[str, Any]) -> None:
    frame = _with_lists(result, list).to_crs("EPSG:4326")
    document = frame.to_geo_dict(drop_id=True)
    document[METADATA_KEY] = meta
    temp.write_text(json.dumps(document, default=str), encoding="utf-8")


# -- pieces --------------------------------------------------------------------------------


def write_tiles(
    tiles: gpd.GeoDataFrame, path: str | os.PathLike[str],
    metadata: Mapping[str, Any] | None = None, *, force: bool = False,
) -> Path:
    """Write pieces (a plan's or a result's ``tiles``) in the format ``path`` names.

    A Shapefile keeps column names of at most 10 characters: longer ones are shortened
    (``request_bytes`` → ``request_by``), as every Shapefile writer does, but explicitly. Its
    files (and the run's metadata beside them) are written whole in a temporary folder and
    moved in together: the set already there stays readable until then.

    With ``metadata`` (a run's), an existing file of a more complete run is kept as for
    :func:`write_ids` unless ``force``.

    Raises
    ------
    InputError
        The extension is not one of :data:`TILES_FORMATS`.
    OutputKeptError
        ``path`` holds the pieces of a more complete run; it is left as it was.
    """
    out = prepare_path(check_tiles_path(path), "out_tiles")
    meta = dict(metadata or {})
    if meta:
        check_replace(out, meta, force=force)
    writer = {".parquet": _tiles_parquet, ".geojson": _tiles_geojson,
              ".gpkg": _tiles_gpkg}.get(out.suffix.lower())
    if writer is not None:
        _writing(out, "out_tiles", lambda: atomically(out, lambda temp: writer(tiles, temp, meta)))
    else:
        _writing(out, "out_tiles", lambda: atomically_as_set(out, lambda temp: _tiles_shapefile(
            tiles, temp, meta)))
    return out


def _tiles_geojson(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    document = tiles.to_crs("EPSG:4326").to_geo_dict(drop_id=True)
    if meta:
        document[METADATA_KEY] = meta
    temp.write_text(json.dumps(document, default=str), encoding="utf-8")


def _tiles_gpkg(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    stored = {METADATA_KEY: _metadata_json(meta)} if meta else None
    _plain_columns(tiles).to_file(temp, layer="tiles", driver="GPKG", layer_metadata=stored)


def _tiles_shapefile(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    _shapefile_columns(tiles).to_file(temp, driver="ESRI Shapefile")
    if meta:
        _sidecar(temp, meta)


def _tiles_parquet(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    tiles.to_parquet(temp, index=False)
    if meta:
        table = pq.read_table(temp)
        schema_meta = dict(table.schema.metadata or {})
        schema_meta[METADATA_KEY.encode()] = _metadata_json(meta).encode()
        pq.write_table(table.replace_schema_metadata(schema_meta), temp)


def _plain_columns(tiles: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """Nullable integer and text columns in types every GDAL driver writes."""
    out = tiles.copy()
    for column in out.columns:
        if column == out.geometry.name:
            continue
        if str(out[column].dtype) == "Int64":
            out[column] = out[column].astype("float64" if out[column].isna().any() else "int64")
        elif str(out[column].dtype) in ("string", "str"):
            out[column] = out[column].astype(object)
        elif out[column].dtype == bool:
            out[column] = out[column].astype("int64")
    return out


def _shapefile_columns(tiles: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    out = _plain_columns(tiles)
    names: dict[str, str] = {}
    taken: set[str] = set()
    for column in out.columns:
        if column == out.geometry.name:
            continue
        short = str(column)[:10]
        k = 1
        while short in taken:
            short = f"{str(column)[:8]}_{k}"
            k += 1
        taken.add(short)
        names[column] = short
    return out.rename(columns=names)



def _sidecar(out: Path, meta: Mapping[str, Any]) -> None:
    """The run's metadata beside a file whose format has no place for it."""
    side = out.with_name(out.name + f".{METADATA_KEY}.json")
    side.write_text(json.dumps(meta, default=str, indent=2, sort_keys=True) + "\n",
                    encoding="utf-8")
