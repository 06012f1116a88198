"""Reading vector files: any path or GDAL virtual path geopandas reads, one layer at a time.

The one reader of the package: the command line reads study areas with it and the reference
service reads parcels with it.

- GeoParquet (``.parquet``, ``.geoparquet``) and Feather (``.feather``) by their suffix;
  everything else through GDAL (GeoPackage, GeoJSON, Shapefile, FlatGeobuf, …), including
  virtual paths such as ``zip://areas.zip!areas.shp`` or ``/vsizip/areas.zip/areas.shp``.
- A file with several layers is read only when the layer is named: silently taking the
  first would search the wrong areas. The error lists the layers.
- ``crs`` declares the CRS the coordinates are in (it does not reproject): for files that
  lack one, or carry a wrong one.

Examples
--------
>>> areas = read_vector("areas.gpkg", layer="districts")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

import geopandas as gpd
from pyproj import CRS
from pyproj.exceptions import CRSError

from parcelsearch.errors import Hint, InputError

__all__ = ["read_vector", "is_virtual_path", "layer_names"]

_PARQUET = (".parquet", ".geoparquet")
_FEATHER = (".feather",)


def is_virtual_path(path: str) -> bool:
    """Whether ``path`` is a URL-style or GDAL virtual path (``zip://…``, ``/vsizip/…``)."""
    return "://" in path or path.startswith("/vsi")


def layer_names(path: str | os.PathLike[str]) -> list[str]:
    """The layers of a file GDAL reads, in the file's order."""
    return [str(name) for name in gpd.list_layers(os.fspath(path))["name"]]


def read_vector(
    source: str | os.PathLike[str],
    *,
    layer: str | None = None,
    crs: str | None = None,
    what: str = "file",
) -> gpd.GeoDataFrame:
    """Read one layer of a vector file into a GeoDataFrame.

    Parameters
    ----------
    source
        A file path or a GDAL virtual path (``zip://a.zip!a.shp``, ``/vsizip/a.zip/a.shp``).
    layer
        The layer to read; required when the file holds more than one.
    crs
        Declare the CRS the coordinates are in (``"EPSG:4326"``), overriding the file's.
    what
        What the file holds, for messages (``"study areas file"``).

    Raises
    ------
    InputError
        The file does not exist, is empty, cannot be read, holds several layers and none
        was named,
        has no such layer, or ``crs`` is not a CRS. The message names the file and the fix.
    """
    text = os.fspath(source)
    virtual = is_virtual_path(text)
    path = text if virtual else str(Path(text).expanduser())
    if not virtual and not Path(path).exists():
        raise InputError(f"{what} {text!r} does not exist", field=what)
    if not virtual and not (Path(path).is_file() or Path(path).is_dir()):  # a FIFO would hang
        raise InputError(
            f"{what} {text!r} is not a regular file (a pipe, socket or device)", field=what
        )
    if not virtual and Path(path).is_file() and Path(path).stat().st_size == 0:
        raise InputError(
            f"{what} {text!r} is empty (0 bytes): nothing was written to it; "
            "write or export the file again, then point to it",
            field=what,
        )
    suffix = Path(text.rstrip("/")).suffix.lower()
    if layer is not None and suffix in _PARQUET + _FEATHER:
        raise InputError(
            f"{what} {text!r} is a {suffix} file: it has no layers to choose from", field="layer"
        )
    try:
        frame = _read(path, suffix, layer, what, text)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes one clear message
        raise InputError(
            f"cannot read {what} {text!r}: {_reason(exc)}. Use a file geopandas reads "
            "(GeoPackage, GeoJSON, Shapefile, GeoParquet, or a zip:// or /vsizip/ path to one)",
            field=what,
        ) from None
    return frame if crs is None else _declare(frame, crs)


def _read(path: str, suffix: str, layer: str | None, what: str, shown: str) -> gpd.GeoDataFrame:
    if suffix in _PARQUET:
        return gpd.read_parquet(path)
    if suffix in _FEATHER:
        return gpd.read_feather(path)
    names = layer_names(path)
    if layer is None and len(names) > 1:
        raise InputError(
            f"{what} {shown!r} holds {len(names)} layers ({', '.join(names)}) and reading "
            "the first silently could search the wrong areas",
            field="layer",
            hints=[Hint("layer", names[0], "choose one with {knob}")],
        )
    if layer is not None and layer not in names:
        raise InputError(
            f"{what} {shown!r} has no layer {layer!r}; its layers are {', '.join(names)}",
            field="layer",
            hints=[Hint("layer", names[0], "choose one with {knob}")],
        )
    if suffix == ".csv":
        return _read_csv(path, layer, what, shown)
    frame = gpd.read_file(path, layer=layer)
    if not isinstance(frame, gpd.GeoDataFrame):  # a layer without geometry
        raise InputError(
            f"{what} {shown!r}: layer {layer or names[0]!r} has no geometry", field="layer"
        )
    return frame


#: Columns of a CSV read as its geometry (WKT), the first one found.
CSV_GEOMETRY_COLUMNS = ("geometry", "wkt", "WKT", "geom", "the_geom")


def _read_csv(path: str, layer: str | None, what: str, shown: str) -> gpd.GeoDataFrame:
    """A CSV whose geometry is a WKT column named as in :data:`CSV_GEOMETRY_COLUMNS`."""
    frame = gpd.read_file(
        path,
        layer=layer,
        GEOM_POSSIBLE_NAMES=",".join(CSV_GEOMETRY_COLUMNS),
        KEEP_GEOM_COLUMNS="NO",
    )
    if isinstance(frame, gpd.GeoDataFrame) and not frame.geometry.isna().all():
        return frame
    names = " or ".join(repr(c) for c in CSV_GEOMETRY_COLUMNS[:2])
    raise InputError(
        f"{what} {shown!r} is a CSV without a geometry column: name its WKT column {names}, "
        "or convert it to a GeoPackage first, e.g. ogr2ogr -f GPKG areas.gpkg areas.csv "
        "-oo GEOM_POSSIBLE_NAMES=<your WKT column> -a_srs EPSG:4326",
        field="geometry",
    )


def _declare(frame: gpd.GeoDataFrame, crs: str) -> gpd.GeoDataFrame:
    """``frame`` with ``crs`` declared (the coordinates are left as they are)."""
    try:
        declared = CRS.from_user_input(crs)
    except CRSError as exc:
        raise InputError(
            f"{crs!r} is not a CRS ({exc})",
            field="crs",
            hints=[Hint("crs", "EPSG:4326", "give one like {knob}")],
        ) from None
    return frame.set_crs(declared, allow_override=True)


def _reason(exc: BaseException) -> str:
    """The first line of an exception's message, without the file path repeated at length."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300].rstrip(".")
