"""Rows of a GeoDataFrame → GeoJSON features carrying their style, popup and tooltip.

Text from user data (area names, markets) is HTML-escaped here, once, for every renderer.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from pyproj import Geod
from shapely.geometry import mapping

from parcelsearch.errors import InputError
from parcelsearch.maps.spec import Bounds, LayerSpec
from parcelsearch.settings import COORD_DECIMALS

__all__ = ["bounds_of", "feature_layer", "geometry_json", "to_wgs84"]

_GEOD = Geod(ellps="WGS84")
MISSING = "—"


def is_missing(value: Any) -> bool:
    """``None``, ``NaN``, ``pd.NA`` and friends."""
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def text(value: Any) -> str:
    """A value as display text (not escaped): missing values as a dash."""
    return MISSING if is_missing(value) else str(value)


def flag(value: Any) -> bool:
    """A possibly missing boolean (``pd.NA`` counts as false)."""
    return not is_missing(value) and bool(value)


def count(value: Any) -> str:
    """A count with thousands separators; missing as a dash."""
    return MISSING if is_missing(value) else f"{int(value):,}"


def popup_html(rows: Iterable[tuple[str, str]]) -> str:
    """An escaped two-column HTML table of (label, text) rows."""
    body = "".join(
        f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>"
        for label, value in rows
    )
    return f'<table class="ps-popup">{body}</table>'


def to_wgs84(frame: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """``frame`` in EPSG:4326 without empty geometries; a frame without CRS must be lon/lat."""
    if not isinstance(frame, gpd.GeoDataFrame):
        raise TypeError(f"expected a GeoDataFrame, got {type(frame).__name__}")
    frame = frame[~(frame.geometry.isna() | frame.geometry.is_empty)]
    if frame.crs is None:
        west, south, east, north = frame.total_bounds if len(frame) else (0, 0, 0, 0)
        if west < -180 or east > 180 or south < -90 or north > 90:
            raise InputError(
                "the frame has no CRS and its coordinates are not lon/lat; "
                "set one with frame.set_crs(...)",
                field="geometry",
            )
        return frame
    return frame if frame.crs.equals("EPSG:4326") else frame.to_crs(4326)


def geometry_json(geom: Any) -> dict[str, Any]:
    """GeoJSON geometry with coordinates rounded to the toolkit's precision."""
    rounded = shapely.transform(geom, lambda xy: np.round(xy, COORD_DECIMALS))
    return dict(mapping(rounded))


def feature_layer(
    name: str,
    frame: gpd.GeoDataFrame,
    *,
    popup: Callable[[Mapping[str, Any]], list[tuple[str, str]]],
    style: Callable[[Mapping[str, Any]], dict[str, Any]],
    tooltip: Callable[[Mapping[str, Any]], str],
) -> LayerSpec:
    """One layer from a frame whose rows (with the index as ``_id``) feed the three callables."""
    records = frame.drop(columns=frame.geometry.name).assign(_id=frame.index)
    features = [
        {
            "type": "Feature",
            "geometry": geometry_json(geom),
            "properties": {
                "style": style(record),
                "popup": popup_html(popup(record)),
                "tooltip": html.escape(tooltip(record)),
            },
        }
        for record, geom in zip(records.to_dict("records"), frame.geometry, strict=True)
    ]
    return LayerSpec(name, {"type": "FeatureCollection", "features": features})


def bounds_of(*frames: gpd.GeoDataFrame) -> Bounds | None:
    """(west, south, east, north) over all non-empty frames."""
    boxes = [f.total_bounds for f in frames if len(f)]
    if not boxes:
        return None
    b = np.vstack(boxes)
    return (float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()), float(b[:, 3].max()))


def box(geom: Any) -> Bounds:
    """(west, south, east, north) of one geometry."""
    west, south, east, north = (float(v) for v in geom.bounds)
    return (west, south, east, north)


def km2(geom: Any) -> str:
    """Geodesic area on the WGS84 ellipsoid, in km²."""
    area, _ = _GEOD.geometry_area_perimeter(geom)
    return f"{abs(area) / 1e6:,.2f}"
