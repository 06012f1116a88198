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

The formats are the rows of one table, :data:`parcelsearch.formats.FORMATS`: each row writes
(and reads back) its files; this module checks where they go, writes them whole and keeps
what is more complete.

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
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import geopandas as gpd
import pandas as pd
from pyogrio.errors import DataSourceError

from parcelsearch._shared import package_version, terminal_text
from parcelsearch.errors import Hint, InputError
from parcelsearch.formats import (
    FORMATS,
    Format,
    file_metadata,
    sidecar_path,
    sidecar_text,
    suffixes,
)
from parcelsearch.kept_files import (
    aside_path,
    atomically,
    atomically_as_set,
    check_replace,
    remove_stale,
    replaces,
)

__all__ = [
    "Searched",
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

#: Extensions :func:`write_ids` writes (the rows of :data:`parcelsearch.formats.FORMATS` that
#: write rows of GroupIDs or one feature per area).
IDS_FORMATS = suffixes("rows", "areas")
#: Extensions :func:`write_tiles` writes (the rows that write pieces).
TILES_FORMATS = suffixes("tiles")
#: Extensions :func:`write_map` writes.
MAP_FORMATS = (".html",)


#: Per option: its formats (read from the table when a path is checked) and an example file
#: name (for hints).
_KNOBS: dict[str, tuple[Callable[[], tuple[str, ...]], str]] = {
    "out": (lambda: suffixes("rows", "areas"), "group_ids.parquet"),
    "out_tiles": (lambda: suffixes("tiles"), "tiles.gpkg"),
    "out_map": (lambda: MAP_FORMATS, "map.html"),
}


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
    _writing(
        out, "out_map", lambda: atomically(out, lambda temp: save_html(obj, temp, title=title))
    )
    return out


def _check(path: str | os.PathLike[str], knob: str) -> Path:
    """``path`` if a file of a format ``knob`` writes can be written there (its folder may be
    missing: :func:`prepare_path` makes it); nothing is created."""
    listed, example = _KNOBS[knob]
    formats = listed()
    out = Path(path).expanduser()
    if out.is_dir():
        raise InputError(
            f"cannot write {str(out)!r}: it is a folder; name a file in it",
            field=knob,
            hints=[Hint(knob, str(out / example), "for example {knob}")],
        )
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
            field=knob,
            hints=[Hint(knob, example, "name a file in a folder, e.g. {knob}")],
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _cannot_write(
            out, knob, PermissionError(errno.EACCES, os.strerror(errno.EACCES)), folder
        )
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


def _cannot_write(out: Path, knob: str, exc: OSError, folder: Path | None = None) -> InputError:
    """The error of a file that cannot be written, naming the user's path (never a
    temporary file's) and the fix."""
    reason = exc.strerror or str(exc)
    where = f" (the folder {str(folder)!r})" if folder is not None else ""
    return InputError(
        f"cannot write {str(out)!r}{where}: {reason}",
        field=knob,
        hints=[
            Hint(knob, _KNOBS[knob][1], "name a file in a folder you can write to, e.g. {knob}")
        ],
    )


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


def terminal_table(
    frame: pd.DataFrame, *, rows: int = TERMINAL_ROWS, noun: str = "row", where: str = ""
) -> str:
    """``frame`` as text for a terminal: at most ``rows`` rows, then ``… N more <noun>s``
    (and ``where`` to find them all); geometry columns are left out (never polygons as
    text)."""
    shown = pd.DataFrame(frame).drop(
        columns=[c for c in frame.columns if isinstance(frame[c].dtype, gpd.array.GeometryDtype)]
    )
    shown = shown.head(rows + 1).rename(columns=lambda c: terminal_text(str(c)))
    for column in shown.columns:  # what a store or a vendor wrote is shown, never run
        if not pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = shown[column].map(
                lambda v: terminal_text(v) if isinstance(v, str) else v
            )
    with pd.option_context(
        "display.width", 120, "display.max_columns", 20, "display.max_colwidth", 40
    ):
        text = shown.head(rows).to_string()
    more = len(frame) - rows
    if more > 0:
        text += f"\n… {more:,} more {noun}{'s' * (more != 1)}{f' ({where})' if where else ''}"
    return text


# -- metadata ------------------------------------------------------------------------------


class Searched(Protocol):
    """What the writers read of a :class:`~parcelsearch.SearchResult` (which is one): its
    GroupIDs, areas and run, as that class documents them."""

    @property
    def ids(self) -> pd.DataFrame: ...
    @property
    def id_name(self) -> str: ...
    @property
    def plan(self) -> _Planned: ...
    @property
    def metadata(self) -> dict[str, Any]: ...
    @property
    def group_ids(self) -> pd.Index: ...
    @property
    def skipped(self) -> gpd.GeoDataFrame: ...


class _Planned(Protocol):
    @property
    def areas(self) -> gpd.GeoDataFrame: ...


def run_metadata(result: Searched) -> dict[str, Any]:
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


# -- GroupIDs ------------------------------------------------------------------------------


def write_ids(result: Searched, path: str | os.PathLike[str], *, force: bool = False) -> Path:
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
    found = FORMATS[out.suffix.lower()]  # rows of GroupIDs, else one feature per area
    frame, write = (
        (ids_table(result), found.writer("rows"))
        if found.rows is not None
        else (_with_lists(result), found.writer("areas"))
    )
    _write_whole(found, out, "out", lambda temp: write(frame, temp, meta), meta)
    return out


def ids_table(result: Searched) -> pd.DataFrame:
    """One row per (area id, ``group_id``) with the area's attributes, typed even when empty."""
    ids = _typed_ids(result)
    attributes = _attributes(result)
    return ids.merge(attributes, how="left", left_on=result.id_name, right_index=True)


def _typed_ids(result: Searched) -> pd.DataFrame:
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


def _attributes(result: Searched) -> pd.DataFrame:
    """The areas' own columns (not geometry), by area id; one named like a column the
    outputs add (:data:`ADDED_COLUMNS`) or like the id is kept as ``area_<name>``."""
    areas = result.plan.areas
    own = pd.DataFrame(areas.drop(columns=areas.geometry.name))
    clashes = {c: f"area_{c}" for c in own.columns if c in (*ADDED_COLUMNS, result.id_name)}
    return own.rename(columns=clashes)


def _per_area(result: Searched) -> gpd.GeoDataFrame:
    """One row per area: id, attributes, number of GroupIDs, geometry."""
    areas = result.plan.areas
    counts = result.ids.groupby(result.id_name)["group_id"].nunique()
    frame = gpd.GeoDataFrame(_attributes(result), geometry=areas.geometry, crs=areas.crs)
    frame.insert(
        len(frame.columns) - 1,
        "n_group_ids",
        counts.reindex(areas.index).fillna(0).astype("int64").to_numpy(),
    )
    return frame.rename_axis(result.id_name).reset_index()


def _with_lists(result: Searched) -> gpd.GeoDataFrame:
    """One row per area (:func:`_per_area`) with its GroupIDs, sorted, as a list in
    ``group_ids`` (and those that may lie outside in ``may_lie_outside``)."""
    frame = _per_area(result)
    ids = result.ids
    columns = {"group_ids": ids}
    if "may_lie_outside" in ids.columns:
        columns["may_lie_outside"] = ids[ids["may_lie_outside"].astype(bool)]
    at = len(frame.columns) - 1  # before the geometry
    for column, rows in columns.items():
        lists = rows.groupby(result.id_name)["group_id"].agg(lambda s: sorted(set(map(str, s))))
        frame.insert(at, column, [lists.get(a, []) for a in frame[result.id_name]])
        at += 1
    return frame


# -- pieces --------------------------------------------------------------------------------


def write_tiles(
    tiles: gpd.GeoDataFrame,
    path: str | os.PathLike[str],
    metadata: Mapping[str, Any] | None = None,
    *,
    force: bool = False,
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
    found = FORMATS[out.suffix.lower()]
    write = found.writer("tiles")
    _write_whole(found, out, "out_tiles", lambda temp: write(tiles, temp, meta), meta)
    return out


def _write_whole(
    found: Format, out: Path, knob: str, write: Callable[[Path], object], meta: Mapping[str, Any]
) -> None:
    """Write ``out`` whole through ``write`` (a set of files: in a temporary folder, moved
    in together), and the run's metadata beside it where its format keeps it there."""
    side = found.sidecar and bool(meta)

    def whole(temp: Path) -> None:
        write(temp)
        if side and found.as_set:  # in the set: moved in with it, last
            sidecar_path(temp).write_text(sidecar_text(meta), encoding="utf-8")

    if found.as_set:
        _writing(out, knob, lambda: atomically_as_set(out, whole))
        return
    _writing(out, knob, lambda: atomically(out, whole))
    if side:
        _writing(
            out,
            knob,
            lambda: atomically(
                sidecar_path(out),
                lambda temp: temp.write_text(sidecar_text(meta), encoding="utf-8"),
            ),
        )
