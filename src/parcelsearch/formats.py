"""The output formats, in one table: a file's suffix → how it is written, how the GroupIDs
and the run's metadata are read back from it.

:data:`FORMATS` has a row (:class:`Format`) per suffix. A row writes one or more of: a table
of rows without geometry (``rows``: the GroupIDs of ``--out``, :meth:`SearchResult.to_parquet
<parcelsearch.SearchResult.to_parquet>`, :meth:`Diff.to_file
<parcelsearch.comparison.Diff.to_file>`), one feature per area with its GroupIDs as lists
(``areas``), pieces (``tiles``); and it reads back the run's metadata (``metadata``, which
:func:`file_metadata` and the never-destroy rule of :mod:`parcelsearch.kept_files` go by) and
the GroupIDs (``read_ids``, what :meth:`Side.of_file <parcelsearch.comparison.Side.of_file>`
compares). :mod:`parcelsearch.outputs` writes through it (whole, never destroyed); adding a
format is adding a row (docs/guide/development.md).

The run's metadata is JSON under one key (:data:`METADATA_KEY`) in each format's natural
place: the parquet schema metadata, a GeoJSON FeatureCollection's top-level member, the
GeoPackage layer's metadata (its ``gpkg_metadata`` table, referenced to the layer), a sidecar
``FILE.EXT.parcelsearch.json`` beside a CSV or a Shapefile. A GeoPackage of GroupIDs is one
layer (:data:`AREAS_LAYER`). Files written by earlier builds are still read: the metadata as
the GeoPackage's own (dataset metadata, which GDAL 3.12 copies into a ``FILE.gpkg.aux.xml``
beside the file whenever it is opened without reading that metadata first), or two more
layers (:data:`OLD_IDS_LAYER`, :data:`OLD_RUN_LAYER`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import geopandas as gpd
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pyogrio

from parcelsearch.errors import InputError

__all__ = [
    "Format",
    "FORMATS",
    "suffixes",
    "file_metadata",
    "sidecar_path",
    "sidecar_text",
    "METADATA_KEY",
    "AREAS_LAYER",
    "OLD_IDS_LAYER",
    "OLD_RUN_LAYER",
    "gpkg_metadata",
    "no_aux_xml",
    "ARROW_STRING",
    "TILES_LAYER",
    "LIST_COLUMNS",
]

#: Key of the run's metadata in parquet schema metadata, GeoJSON and GeoPackage metadata.
METADATA_KEY = "parcelsearch"
#: The one layer of a GeoPackage of GroupIDs.
AREAS_LAYER = "areas"
#: The layer of a GeoPackage of pieces.
TILES_LAYER = "tiles"
#: Layers of GeoPackages written by earlier builds (still read, no longer written): the
#: GroupIDs as a table, and the run's metadata as a one-row table.
OLD_IDS_LAYER, OLD_RUN_LAYER = "group_ids", "parcelsearch_run"
#: Columns of one feature per area that hold lists of GroupIDs.
LIST_COLUMNS = ("group_ids", "may_lie_outside")

#: Writes a table (GroupIDs, a diff's rows) or features (areas, pieces) to a path, with the
#: run's metadata (empty: none).
Writer = Callable[[Any, Path, Mapping[str, Any]], None]
#: Reads a file's GroupIDs back: (one row per area id and ``group_id``, the run's metadata).
IdsReader = Callable[[Path], tuple[pd.DataFrame, dict[str, Any]]]


@dataclass(frozen=True)
class Format:
    """One output format (a row of :data:`FORMATS`).

    Attributes
    ----------
    suffix
        The file name's extension, lower case (``.parquet``).
    metadata
        Reads back the run's metadata (None: the file holds none).
    rows, areas, tiles
        Write a table without geometry (one row per GroupID), one feature per area (its
        GroupIDs as lists in :data:`LIST_COLUMNS`), pieces; None: not in this format.
    read_ids
        Reads the GroupIDs back (for comparisons); None: not read back.
    as_set
        Several files (a Shapefile's): written together in a temporary folder.
    sidecar
        The run's metadata goes beside the file (:func:`sidecar_path`; written there by
        :mod:`parcelsearch.outputs`, not by the writers).
    """

    suffix: str
    metadata: Callable[[Path], dict[str, Any] | None]
    rows: Writer | None = None
    areas: Writer | None = None
    tiles: Writer | None = None
    read_ids: IdsReader | None = None
    as_set: bool = False
    sidecar: bool = False

    def writer(self, kind: Literal["rows", "areas", "tiles"]) -> Writer:
        """The writer of ``kind`` (checked first with :func:`suffixes`)."""
        write = getattr(self, kind)
        if write is None:
            raise InputError(
                f"{self.suffix} files hold no {kind}: use one of {', '.join(suffixes(kind))}"
            )
        return write  # type: ignore[no-any-return]

    def read_back(self, path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The GroupIDs of ``path`` and its run's metadata (``read_ids``)."""
        if self.read_ids is None:
            raise InputError(
                f"{self.suffix} files are not read back: use one of "
                f"{', '.join(suffixes('read_ids'))}"
            )
        return self.read_ids(path)


_PAM = threading.Lock()


@contextlib.contextmanager
def no_aux_xml() -> Iterator[None]:
    """Read GeoPackages here without GDAL's PAM (``GDAL_PAM_ENABLED=NO``): a file written by
    an earlier build, with the run as dataset metadata, then gets no ``FILE.gpkg.aux.xml``
    beside it when read. The setting before is restored."""
    with _PAM:
        before = pyogrio.get_gdal_config_option("GDAL_PAM_ENABLED")
        pyogrio.set_gdal_config_options({"GDAL_PAM_ENABLED": "NO"})
        try:
            yield
        finally:
            pyogrio.set_gdal_config_options({"GDAL_PAM_ENABLED": before})


def gpkg_metadata(path: Path) -> dict[str, Any] | None:
    """The run's metadata in a GeoPackage written here: its first layer's metadata, or (a
    file written by an earlier build) its dataset metadata or its ``parcelsearch_run`` layer;
    None when it holds none of them."""
    with no_aux_xml():
        info = pyogrio.read_info(path, layer=0)
        for where in ("layer_metadata", "dataset_metadata"):
            stored = (info.get(where) or {}).get(METADATA_KEY)
            if stored is not None:
                return dict(json.loads(stored))
        if OLD_RUN_LAYER not in {str(name) for name, _ in pyogrio.list_layers(path)}:
            return None
        run = pyogrio.read_dataframe(path, layer=OLD_RUN_LAYER, read_geometry=False)
    return dict(json.loads(run["metadata"].iloc[0])) if len(run) else None


# -- the run's metadata -------------------------------------------------------------


def _metadata_json(meta: Mapping[str, Any]) -> str:
    """The run's metadata as stored in a file's own metadata (JSON, keys sorted)."""
    return json.dumps(meta, default=str, sort_keys=True)


def sidecar_path(out: Path) -> Path:
    """Where the run's metadata goes beside a file whose format has no place for it."""
    return out.with_name(out.name + f".{METADATA_KEY}.json")


def sidecar_text(meta: Mapping[str, Any]) -> str:
    """The run's metadata as a sidecar holds it."""
    return json.dumps(meta, default=str, indent=2, sort_keys=True) + "\n"


def file_metadata(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run's metadata stored in an output file (any format written here), or None when
    there is no such file or it holds none (not one of ours, or unreadable)."""
    out = Path(path)
    if not out.exists():
        return None
    found = FORMATS.get(out.suffix.lower())
    try:
        return (found.metadata if found is not None else _sidecar_metadata)(out)
    except Exception:  # noqa: BLE001 - any unreadable file: no metadata to go by
        return None


def _parquet_metadata(out: Path) -> dict[str, Any] | None:
    stored = (pq.read_schema(out).metadata or {}).get(METADATA_KEY.encode())
    return None if stored is None else dict(json.loads(stored))


def _geojson_metadata(out: Path) -> dict[str, Any] | None:
    stored = json.loads(out.read_text(encoding="utf-8")).get(METADATA_KEY)
    return None if stored is None else dict(stored)


def _sidecar_metadata(out: Path) -> dict[str, Any] | None:
    side = sidecar_path(out)
    return dict(json.loads(side.read_text(encoding="utf-8"))) if side.exists() else None


# -- writers -------------------------------------------------------------------------------


def _parquet_rows(frame: pd.DataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(_with_metadata(table, meta), temp)


def _with_metadata(table: pa.Table, meta: Mapping[str, Any]) -> pa.Table:
    if not meta:
        return table
    schema_meta = dict(table.schema.metadata or {})
    schema_meta[METADATA_KEY.encode()] = _metadata_json(meta).encode()
    return table.replace_schema_metadata(schema_meta)


def _parquet_tiles(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    tiles.to_parquet(temp, index=False)
    if meta:
        pq.write_table(_with_metadata(pq.read_table(temp), meta), temp)


#: What makes a spreadsheet read a CSV cell as a formula (OWASP's list): such a cell is
#: written with a leading ``'`` (:func:`csv_cell`), which reading back takes off.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _formula_like(text: str) -> bool:
    """Whether ``text`` would be escaped: a formula's start, or ``'`` before an escaped
    text (so that taking one ``'`` off on reading is never ambiguous)."""
    return text.startswith(FORMULA_STARTS) or (text[:1] == "'" and _formula_like(text[1:]))


def csv_cell(value: Any) -> Any:
    """A text cell as written to CSV: ``'`` before one a spreadsheet would run
    (``=HYPERLINK(…)``, ``+SUM(…)``, ``-1+1``, ``@SUM(…)``, a tab or a carriage return
    first); anything else as it is."""
    return "'" + value if isinstance(value, str) and _formula_like(value) else value


def csv_value(value: Any) -> Any:
    """A CSV cell as it was before :func:`csv_cell`."""
    if isinstance(value, str) and value[:1] == "'" and _formula_like(value[1:]):
        return value[1:]
    return value


def _csv_rows(frame: pd.DataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    frame = frame.copy()
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].map(csv_cell, na_action="ignore")
    frame.to_csv(temp, index=False)


def _gpkg_areas(frame: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    frame = frame.copy()  # a GeoPackage has no lists: as JSON text
    for column in (c for c in LIST_COLUMNS if c in frame.columns):
        frame[column] = [json.dumps(v) for v in frame[column]]
    frame.to_file(
        temp, layer=AREAS_LAYER, driver="GPKG", layer_metadata={METADATA_KEY: _metadata_json(meta)}
    )


def _gpkg_tiles(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    stored = {METADATA_KEY: _metadata_json(meta)} if meta else None
    _plain_columns(tiles).to_file(temp, layer=TILES_LAYER, driver="GPKG", layer_metadata=stored)


def _geojson(frame: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    document = frame.to_crs("EPSG:4326").to_geo_dict(drop_id=True)
    if meta:
        document[METADATA_KEY] = meta
    temp.write_text(json.dumps(document, default=str), encoding="utf-8")


def _shapefile_tiles(tiles: gpd.GeoDataFrame, temp: Path, meta: Mapping[str, Any]) -> None:
    _shapefile_columns(tiles).to_file(temp, driver="ESRI Shapefile")


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


# -- GroupIDs read back ------------------------------------------------------------


#: Strings kept in Arrow's buffers (no Python object per GroupID: large files stay small).
ARROW_STRING = pd.StringDtype("pyarrow")


def _arrow_text(kind: pa.DataType) -> bool:
    """Whether an Arrow column type holds text (read before pandas' own metadata could turn
    other values into their text)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)
    )


def _parquet_ids(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    # Only the two columns compared are read (a file may hold many more).
    schema = pq.read_schema(path)
    raw = (schema.metadata or {}).get(METADATA_KEY.encode())
    meta = json.loads(raw) if raw else {}
    id_name = meta.get("id_column") if isinstance(meta, dict) else None
    if not isinstance(id_name, str) and isinstance(meta, dict) and meta:
        id_name = _first_other(schema.names)  # SearchResult.to_parquet: its ids as they are
        meta = {**meta, "id_column": id_name} if id_name is not None else meta
    wanted = [c for c in (id_name, "group_id") if isinstance(c, str) and c in schema.names]
    table = pq.read_table(path, columns=wanted or None)
    if "group_id" in table.column_names and not _arrow_text(table.schema.field("group_id").type):
        raise InputError(
            f"cannot compare {str(path)!r}: its group_id column holds "
            f"{table.schema.field('group_id').type} values, not GroupIDs (text)",
            field="file",
        )
    frame = table.to_pandas(types_mapper={pa.string(): ARROW_STRING}.get)
    if isinstance(id_name, str) and id_name in frame.columns:  # area ids as results hold them
        frame[id_name] = table.column(id_name).to_pandas()
    return frame, meta


def _first_other(names: list[str]) -> str | None:
    """The area id column of a table of GroupIDs whose metadata does not name it (as
    :meth:`SearchResult.to_parquet <parcelsearch.SearchResult.to_parquet>` writes them: the
    id column, then ``group_id``): its first column that is not ``group_id``."""
    return next((n for n in names if n != "group_id" and not n.startswith("__")), None)


def _csv_ids(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    sidecar = sidecar_path(path)
    meta = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.exists() else {}
    if not isinstance(meta, dict):
        raise InputError(f"{str(sidecar)!r}: the run metadata is not a JSON object")
    id_name = meta.get("id_column")
    wanted = {id_name, "group_id"}
    frame = pd.read_csv(path, dtype={"group_id": "string"}, usecols=lambda c: c in wanted)
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            kind = frame[column].dtype
            frame[column] = frame[column].map(csv_value, na_action="ignore").astype(kind)
    if id_name in frame.columns and isinstance(meta.get("areas"), list) and meta["areas"]:
        kinds = {type(a) for a in meta["areas"]}
        if kinds == {str}:
            frame[id_name] = frame[id_name].astype(str)
    return frame, meta


def _gpkg_ids(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    meta = gpkg_metadata(path) or {}
    with no_aux_xml():  # a file of an earlier build: no FILE.gpkg.aux.xml left by reading it
        layers = {str(name) for name, _ in pyogrio.list_layers(path)}
        if OLD_IDS_LAYER in layers:  # written by an earlier build: the GroupIDs as a table
            return pd.DataFrame(pyogrio.read_dataframe(path, layer=OLD_IDS_LAYER)), meta
    if AREAS_LAYER not in layers or not meta:
        raise InputError(
            f"cannot compare {str(path)!r}: it holds no run of 'parcelsearch "
            f"search --out' (no {AREAS_LAYER!r} layer with the run's metadata)",
            field="file",
        )
    id_name = meta.get("id_column", "area_id")
    with no_aux_xml():
        areas = pyogrio.read_dataframe(
            path, layer=AREAS_LAYER, read_geometry=False, columns=[id_name, "group_ids"]
        )
    rows = [
        (area, g)
        for area, listed in zip(areas[id_name], areas["group_ids"], strict=True)
        for g in json.loads(listed or "[]")
    ]
    return pd.DataFrame(rows, columns=[id_name, "group_id"]), meta


def _geojson_ids(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise InputError(f"{str(path)!r} is not a GeoJSON object")
    meta = document.get(METADATA_KEY, {})
    if not isinstance(meta, dict):
        raise InputError(f"{str(path)!r}: its run metadata is not a JSON object")
    id_name = meta.get("id_column", "area_id")
    rows = [
        (f["properties"].get(id_name), g)
        for f in document.get("features", [])
        for g in f["properties"].get("group_ids", [])
    ]
    return pd.DataFrame(rows, columns=[id_name, "group_id"]), meta


# -- the table -----------------------------------------------------------------------------

#: Every output format, by suffix.
FORMATS: dict[str, Format] = {
    f.suffix: f
    for f in (
        Format(".gpkg", gpkg_metadata, areas=_gpkg_areas, tiles=_gpkg_tiles, read_ids=_gpkg_ids),
        Format(
            ".geojson", _geojson_metadata, areas=_geojson, tiles=_geojson, read_ids=_geojson_ids
        ),
        Format(
            ".parquet",
            _parquet_metadata,
            rows=_parquet_rows,
            tiles=_parquet_tiles,
            read_ids=_parquet_ids,
        ),
        Format(".csv", _sidecar_metadata, rows=_csv_rows, read_ids=_csv_ids, sidecar=True),
        Format(".shp", _sidecar_metadata, tiles=_shapefile_tiles, as_set=True, sidecar=True),
    )
}


def suffixes(*kinds: Literal["rows", "areas", "tiles", "read_ids"]) -> tuple[str, ...]:
    """The suffixes of the formats that write (or read back) ``kinds``, as error messages
    list them: those of the first kind in the table's order, then those of the next."""
    return tuple(
        dict.fromkeys(
            s for kind in kinds for s, f in FORMATS.items() if getattr(f, kind) is not None
        )
    )
