"""Maps of study areas, plans and results: ipyleaflet in a notebook, one HTML file on disk.

Every map is first described by a small :class:`MapSpec` (named layers of GeoJSON whose
features carry their own style, popup table and tooltip, plus a legend and the bounds), then
drawn by one of two renderers:

- :func:`areas_map`, :func:`plan_map`, :func:`result_map` → an :class:`ipyleaflet.Map`
  (GeoJSON layers, a layers control, a legend, a scale), fitted to the areas;
- :func:`save_html` → one self-contained HTML file with Leaflet, the data and the map inlined.
  It opens with no network at all: outlines on a plain light-grey background; the optional
  OpenStreetMap layer simply stays blank offline.

Each ipyleaflet map keeps its description in ``.parcelsearch_spec``, so
``save_html(result.map(), "map.html")`` writes the same map. Text from user data (area names,
markets) is HTML-escaped in every popup, tooltip and legend.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import geopandas as gpd
import ipyleaflet
import ipywidgets
import numpy as np
import pandas as pd
import shapely
from pyproj import Geod
from shapely.geometry import mapping, shape

from parcelsearch.settings import COORD_DECIMALS

__all__ = [
    "Legend",
    "LegendEntry",
    "LayerSpec",
    "MapSpec",
    "areas_map",
    "plan_map",
    "result_map",
    "save_html",
    "class_breaks",
]

#: OpenStreetMap's tile URL template and the attribution its tile policy asks for.
OSM_TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
OSM_ATTRIBUTION = (
    '&copy; <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors'
)
#: Plain background under the layers (seen offline, or with ``basemap=False``).
BACKGROUND = "#e8e8e4"
#: Sequential palette for parcels matched per piece (ColorBrewer YlGnBu, 5 classes): the first
#: colour is for pieces that matched nothing, the others for up to four classes of counts.
PALETTE = ("#ffffcc", "#a1dab4", "#41b6c4", "#2c7fb8", "#253494")

#: Leaflet path options per kind of feature (the same keys in ipyleaflet and in the HTML).
Style = dict[str, Any]
AREA_STYLE: Style = {"color": "#1a1a1a", "weight": 2, "opacity": 1,
                     "fillColor": "#6a8caf", "fillOpacity": 0.25}
OUTLINE_STYLE: Style = {"color": "#1a1a1a", "weight": 2.5, "opacity": 1, "fill": False}
PLAN_PIECE_STYLE: Style = {"color": "#2c7fb8", "weight": 1, "opacity": 1,
                           "fillColor": "#41b6c4", "fillOpacity": 0.35}
PIECE_STYLE: Style = {"color": "#4d4d4d", "weight": 1, "opacity": 1, "fillOpacity": 0.75}
CACHED_DASH = "5 4"
UNSEARCHED_STYLE: Style = {"color": "#4d4d4d", "weight": 1, "opacity": 1, "dashArray": "1 4",
                           "fillOpacity": 0}
SKIPPED_STYLE: Style = {"color": "#757575", "weight": 2, "opacity": 1, "dashArray": "6 4",
                        "fillColor": "#9e9e9e", "fillOpacity": 0.3}
HOVER_STYLE: Style = {"weight": 3.5}
#: Dots marking areas smaller than ``MARKER_BELOW_PX`` pixels in the first view.
MARKER_STYLE: Style = {"radius": 6, "color": "#1a1a1a", "weight": 1.5, "opacity": 1,
                       "fillColor": "#e6550d", "fillOpacity": 0.9}
MARKER_BELOW_PX = 12

_GEOD = Geod(ellps="WGS84")
_MISSING = "—"


# --------------------------------------------------------------------------------------------
# The description every renderer consumes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LegendEntry:
    """One swatch of a legend: a label, a colour and whether its outline is dashed."""

    label: str
    color: str
    dashed: bool = False


@dataclass(frozen=True)
class Legend:
    """A titled list of swatches."""

    title: str
    entries: tuple[LegendEntry, ...]


@dataclass(frozen=True)
class LayerSpec:
    """One named layer: a GeoJSON FeatureCollection in EPSG:4326.

    Each feature's ``properties`` hold ``style`` (Leaflet path options), ``popup`` (an HTML
    table, already escaped) and ``tooltip`` (short escaped HTML).
    """

    name: str
    geojson: dict[str, Any]


@dataclass(frozen=True)
class MapSpec:
    """Everything a renderer needs: title, layers (drawn in order), legend and bounds.

    ``bounds`` is ``(west, south, east, north)`` in degrees, or ``None`` for an empty map.
    """

    title: str
    layers: tuple[LayerSpec, ...]
    legend: Legend | None
    bounds: tuple[float, float, float, float] | None
    subtitle: str = ""

    def layer(self, name: str) -> LayerSpec:
        """The layer called ``name``."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r}; layers: {[x.name for x in self.layers]}")


class PlanLike(Protocol):
    """What the maps read from a plan."""

    @property
    def areas(self) -> gpd.GeoDataFrame: ...
    @property
    def id_name(self) -> str: ...
    @property
    def tiles(self) -> gpd.GeoDataFrame: ...


class ResultLike(Protocol):
    """What the maps read from a search result."""

    @property
    def plan(self) -> PlanLike: ...
    @property
    def id_name(self) -> str: ...
    @property
    def tiles(self) -> gpd.GeoDataFrame: ...
    @property
    def skipped(self) -> pd.DataFrame: ...


# --------------------------------------------------------------------------------------------
# Formatting and escaping
# --------------------------------------------------------------------------------------------


def _is_missing(value: Any) -> bool:
    return value is None or (pd.api.types.is_scalar(value) and bool(pd.isna(value)))


def _text(value: Any) -> str:
    """A value as display text (not escaped): missing values as a dash."""
    return _MISSING if _is_missing(value) else str(value)


def _flag(value: Any) -> bool:
    """A possibly missing boolean (``pd.NA`` counts as false)."""
    return not _is_missing(value) and bool(value)


def _count(value: Any) -> str:
    """A count with thousands separators; missing as a dash."""
    return _MISSING if _is_missing(value) else f"{int(value):,}"


def _popup_html(rows: Iterable[tuple[str, str]]) -> str:
    """An escaped two-column HTML table of (label, text) rows."""
    body = "".join(
        f"<tr><th>{html.escape(label)}</th><td>{html.escape(text)}</td></tr>"
        for label, text in rows
    )
    return f'<table class="ps-popup">{body}</table>'


def _legend_html(legend: Legend) -> str:
    """An escaped legend block for the HTML map."""
    items = "".join(
        f'<div><i class="{"dashed" if e.dashed else "solid"}" '
        f'style="background:{html.escape(e.color)}"></i>{html.escape(e.label)}</div>'
        for e in legend.entries
    )
    return f"<strong>{html.escape(legend.title)}</strong>{items}"


def _legend_dict(legend: Legend) -> dict[str, str]:
    """Labels → colours for :class:`ipyleaflet.LegendControl` (dashed swatches say so)."""
    return {(f"{e.label} (dashed)" if e.dashed else e.label): e.color for e in legend.entries}


# --------------------------------------------------------------------------------------------
# Geometry → GeoJSON
# --------------------------------------------------------------------------------------------


def _to_wgs84(frame: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """``frame`` in EPSG:4326 without empty geometries; a frame without CRS must be lon/lat."""
    if not isinstance(frame, gpd.GeoDataFrame):
        raise TypeError(f"expected a GeoDataFrame, got {type(frame).__name__}")
    frame = frame[~(frame.geometry.isna() | frame.geometry.is_empty)]
    if frame.crs is None:
        west, south, east, north = frame.total_bounds if len(frame) else (0, 0, 0, 0)
        if west < -180 or east > 180 or south < -90 or north > 90:
            raise ValueError("the frame has no CRS and its coordinates are not lon/lat; "
                             "set one with frame.set_crs(...)")
        return frame
    return frame if frame.crs.equals("EPSG:4326") else frame.to_crs(4326)


def _geometry(geom: Any) -> dict[str, Any]:
    """GeoJSON geometry with coordinates rounded to the toolkit's precision."""
    rounded = shapely.transform(geom, lambda xy: np.round(xy, COORD_DECIMALS))
    return dict(mapping(rounded))


def _layer(
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
            "geometry": _geometry(geom),
            "properties": {
                "style": style(record),
                "popup": _popup_html(popup(record)),
                "tooltip": html.escape(tooltip(record)),
            },
        }
        for record, geom in zip(records.to_dict("records"), frame.geometry, strict=True)
    ]
    return LayerSpec(name, {"type": "FeatureCollection", "features": features})


def _bounds(*frames: gpd.GeoDataFrame) -> tuple[float, float, float, float] | None:
    """(west, south, east, north) over all non-empty frames."""
    boxes = [f.total_bounds for f in frames if len(f)]
    if not boxes:
        return None
    b = np.vstack(boxes)
    return (float(b[:, 0].min()), float(b[:, 1].min()), float(b[:, 2].max()),
            float(b[:, 3].max()))


def _km2(geom: Any) -> str:
    """Geodesic area on the WGS84 ellipsoid, in km²."""
    area, _ = _GEOD.geometry_area_perimeter(geom)
    return f"{abs(area) / 1e6:,.2f}"


# --------------------------------------------------------------------------------------------
# Classes of parcels matched
# --------------------------------------------------------------------------------------------


def class_breaks(values: Iterable[Any], classes: int = len(PALETTE) - 1) -> list[tuple[int, int]]:
    """Integer classes ``(low, high)`` for positive counts, by nearest-rank quantiles.

    Zero (and missing values) get no class here: the maps draw them apart. Every positive
    value falls in exactly one class; classes never overlap and there are at most ``classes``.

    Examples
    --------
    >>> class_breaks([0, 1, 2, 3, 4, 5, 6, 7, 8])
    [(1, 2), (3, 4), (5, 6), (7, 8)]
    >>> class_breaks([5, 5, 5])
    [(1, 5)]
    """
    positive = sorted(int(v) for v in values if not _is_missing(v) and int(v) > 0)
    if not positive:
        return []
    n = len(positive)
    uppers = sorted({positive[math.ceil(n * k / classes) - 1] for k in range(1, classes + 1)})
    lows = [1, *(u + 1 for u in uppers[:-1])]
    return list(zip(lows, uppers, strict=True))


def _class_label(low: int, high: int) -> str:
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def _class_colour(rows: int, breaks: Sequence[tuple[int, int]]) -> str:
    """The palette colour for ``rows``: the first for zero, then spread over the classes."""
    if rows <= 0:
        return PALETTE[0]
    index = next(i for i, (_, high) in enumerate(breaks) if rows <= high)
    return _class_colours(len(breaks))[index]


def _class_colours(n: int) -> tuple[str, ...]:
    """``n`` colours of the palette (after the zero colour), spread from light to dark."""
    ramp = PALETTE[1:]
    if n >= len(ramp):
        return ramp
    return tuple(ramp[round(i * (len(ramp) - 1) / max(n - 1, 1))] for i in range(n))


# --------------------------------------------------------------------------------------------
# Specs: areas, plan, result
# --------------------------------------------------------------------------------------------


def _with_ids(frame: pd.DataFrame, id_name: str | None) -> pd.DataFrame:
    """``frame`` indexed by ``id_name`` when that is one of its columns."""
    if id_name and id_name in frame.columns:
        return frame.set_index(id_name)
    return frame


def _names(areas: pd.DataFrame) -> dict[Hashable, Any]:
    return dict(areas["name"].items()) if "name" in areas.columns else {}


def _area_rows(record: Mapping[str, Any], id_name: str) -> list[tuple[str, str]]:
    rows = [(id_name, _text(record["_id"]))]
    rows += [(column, _text(record[column])) for column in ("name", "market") if column in record]
    return rows


def _area_label(area_id: Any, names: Mapping[Hashable, Any]) -> str:
    name = names.get(area_id)
    return _text(area_id) if _is_missing(name) else f"{name} ({area_id})"


def _areas_layer(areas: gpd.GeoDataFrame, id_name: str, style: dict[str, Any]) -> LayerSpec:
    area_km2 = {key: _km2(geom) for key, geom in areas.geometry.items()}
    names = _names(areas)
    return _layer(
        "Study areas",
        areas,
        popup=lambda r: [*_area_rows(r, id_name), ("area (km²)", area_km2[r["_id"]])],
        style=lambda r: dict(style),
        tooltip=lambda r: _area_label(r["_id"], names),
    )


def areas_spec(areas: gpd.GeoDataFrame, *, id_name: str | None = None) -> MapSpec:
    """The description of a map of study areas (see :func:`areas_map`)."""
    frame = _to_wgs84(_with_ids(areas, id_name))
    name = id_name or frame.index.name or "area"
    legend = Legend("Study areas", (LegendEntry("study area", AREA_STYLE["fillColor"]),))
    return _with_markers(MapSpec(f"Study areas ({len(frame)})",
                                 (_areas_layer(frame, name, AREA_STYLE),), legend, _bounds(frame)))


def _plan_piece_rows(r: Mapping[str, Any], id_name: str, names: Mapping[Hashable, Any]
                     ) -> list[tuple[str, str]]:
    return [
        ("area", _area_label(r[id_name], names)),
        ("piece", _text(r["piece_id"])),
        ("vertices", _count(r.get("vertices"))),
        ("request bytes", _count(r.get("request_bytes"))),
        ("min calls", _count(r.get("min_calls"))),
    ]


def plan_spec(plan: PlanLike) -> MapSpec:
    """The description of a plan's map (see :func:`plan_map`)."""
    areas, tiles, id_name = _to_wgs84(plan.areas), _to_wgs84(plan.tiles), plan.id_name
    names = _names(areas)
    pieces = _layer(
        "Pieces",
        tiles,
        popup=lambda r: _plan_piece_rows(r, id_name, names),
        style=lambda r: dict(PLAN_PIECE_STYLE),
        tooltip=lambda r: f"{_area_label(r[id_name], names)} · piece {_text(r['piece_id'])}",
    )
    legend = Legend("Plan", (LegendEntry("study area outline", OUTLINE_STYLE["color"]),
                             LegendEntry("piece sent", PLAN_PIECE_STYLE["fillColor"])))
    calls = int(pd.to_numeric(tiles.get("min_calls", pd.Series(dtype=int))).sum())
    subtitle = f"{len(areas)} areas · {len(tiles)} pieces · at least {calls:,} calls"
    return _with_markers(MapSpec("Plan", (pieces, _areas_layer(areas, id_name, OUTLINE_STYLE)),
                                 legend, _bounds(areas, tiles), subtitle))


def _cached_text(r: Mapping[str, Any]) -> str:
    if _flag(r.get("from_cache")):
        return "yes"
    cached: Any = r.get("cached_pages")
    if not _is_missing(cached) and int(cached) > 0:
        return f"{int(cached):,} of {_count(r.get('pages_fetched'))} pages"
    return "no"


def _pages_text(r: Mapping[str, Any]) -> str:
    pages: Any = r.get("pages")
    fetched: Any = r.get("pages_fetched")
    if _is_missing(pages) or _is_missing(fetched) or int(fetched) == int(pages):
        return _count(pages)
    return f"{int(fetched):,} of {int(pages):,} fetched"


def _matched_text(rows: Any) -> str:
    return "not searched" if _is_missing(rows) else f"{int(rows):,} parcels"


def _result_piece_rows(r: Mapping[str, Any], id_name: str, names: Mapping[Hashable, Any]
                       ) -> list[tuple[str, str]]:
    return [
        ("area", _area_label(r[id_name], names)),
        ("piece", _text(r["piece_id"])),
        ("parcels matched", "not searched" if _is_missing(r["rows"]) else _count(r["rows"])),
        ("pages", _pages_text(r)),
        ("calls", _count(r.get("calls"))),
        ("cached", _cached_text(r)),
    ]


def _result_piece_style(r: Mapping[str, Any], breaks: Sequence[tuple[int, int]]
                        ) -> dict[str, Any]:
    if _is_missing(r["rows"]):
        return dict(UNSEARCHED_STYLE)
    style = {**PIECE_STYLE, "fillColor": _class_colour(int(r["rows"]), breaks)}
    if _flag(r.get("from_cache")):
        style["dashArray"] = CACHED_DASH
    return style


def _result_legend(tiles: pd.DataFrame, breaks: Sequence[tuple[int, int]], skipped: int
                   ) -> Legend:
    rows = tiles["rows"]
    entries = [LegendEntry("0", PALETTE[0])] if (rows.fillna(-1) == 0).any() else []
    colours = _class_colours(len(breaks))
    entries += [LegendEntry(_class_label(lo, hi), c) for (lo, hi), c in zip(breaks, colours,
                                                                             strict=True)]
    if rows.isna().any():
        entries.append(LegendEntry("not searched", "#ffffff", dashed=True))
    if tiles.get("from_cache", pd.Series(dtype=bool)).fillna(False).astype(bool).any():
        entries.append(LegendEntry("all pages from cache", "#ffffff", dashed=True))
    if skipped:
        entries.append(LegendEntry("skipped area", SKIPPED_STYLE["fillColor"], dashed=True))
    return Legend("Parcels matched per piece", tuple(entries))


def _skipped_areas(skipped: pd.DataFrame, areas: gpd.GeoDataFrame | None, id_name: str
                   ) -> gpd.GeoDataFrame:
    """The rows of ``areas`` (in EPSG:4326, indexed by area id) that were skipped."""
    if areas is None or skipped.empty:
        return gpd.GeoDataFrame(geometry=[], crs=4326)
    frame = _to_wgs84(_with_ids(areas, id_name))
    return frame[frame.index.isin(skipped.index)]


def _skipped_layer(skipped: pd.DataFrame, frame: gpd.GeoDataFrame, id_name: str) -> LayerSpec:
    """Skipped areas (geometry from the study areas), with why they were skipped."""
    frame = frame.drop(columns=[c for c in skipped.columns if c in frame.columns])
    frame = frame.join(skipped, how="left")
    names = _names(frame)
    rows = ("market", "reason", "suggestion")
    return _layer(
        "Skipped areas",
        frame,
        popup=lambda r: [(id_name, _text(r["_id"])),
                         *[(c, _text(r[c])) for c in ("name", *rows) if c in r]],
        style=lambda r: dict(SKIPPED_STYLE),
        tooltip=lambda r: f"{_area_label(r['_id'], names)}: skipped",
    )


def result_spec(result: ResultLike, *, areas: gpd.GeoDataFrame | None = None) -> MapSpec:
    """The description of a result's map (see :func:`result_map`)."""
    id_name = result.id_name
    plan_areas, tiles = _to_wgs84(result.plan.areas), _to_wgs84(result.tiles)
    names = _names(plan_areas)
    breaks = class_breaks(tiles["rows"])
    pieces = _layer(
        "Pieces",
        tiles,
        popup=lambda r: _result_piece_rows(r, id_name, names),
        style=lambda r: _result_piece_style(r, breaks),
        tooltip=lambda r: (f"{_area_label(r[id_name], names)} · piece {_text(r['piece_id'])}: "
                           f"{_matched_text(r['rows'])}"),
    )
    layers = [pieces, _areas_layer(plan_areas, id_name, OUTLINE_STYLE)]
    skipped = result.skipped
    if areas is None and isinstance(skipped, gpd.GeoDataFrame) and not skipped.empty:
        areas = skipped[[skipped.geometry.name]]  # the result kept the skipped areas' shapes
        skipped = pd.DataFrame(skipped.drop(columns=skipped.geometry.name))
    drawn = _skipped_areas(skipped, areas, id_name)
    if len(drawn):
        layers.append(_skipped_layer(skipped, drawn, id_name))
    calls = int(pd.to_numeric(tiles.get("calls", pd.Series(dtype=int))).sum())
    subtitle = (f"{len(plan_areas)} areas · {len(tiles)} pieces · {calls:,} calls"
                f" · {len(skipped)} skipped")
    return _with_markers(MapSpec("Search result", tuple(layers),
                                 _result_legend(tiles, breaks, len(drawn)),
                                 _bounds(plan_areas, tiles, drawn), subtitle))


def _pixels(geometry: dict[str, Any], zoom: int) -> float:
    """The larger side, in screen pixels at ``zoom``, of a GeoJSON geometry's bounding box."""
    west, south, east, north = (float(v) for v in shape(geometry).bounds)
    world = 256 * math.pow(2, zoom)
    return max((east - west) / 360 * world,
               (_mercator_y(north) - _mercator_y(south)) / (2 * math.pi) * world)


def _with_markers(spec: MapSpec) -> MapSpec:
    """``spec`` plus an "Area markers" layer when some area is too small to see at first.

    Areas far apart (several towns, states) fit in one view only as specks; a dot on each
    (with the area's popup) keeps them findable. Areas that fill the view get no markers.
    """
    colours = {"Study areas": MARKER_STYLE["fillColor"],
               "Skipped areas": SKIPPED_STYLE["fillColor"]}
    areas = [(f, colours[x.name]) for x in spec.layers if x.name in colours
             for f in x.geojson["features"]]
    _, zoom = _view(spec.bounds)
    if not any(_pixels(f["geometry"], zoom) < MARKER_BELOW_PX for f, _ in areas):
        return spec
    features = [
        {"type": "Feature",
         "geometry": _geometry(shape(f["geometry"]).representative_point()),
         "properties": {**f["properties"], "style": {**MARKER_STYLE, "fillColor": colour}}}
        for f, colour in areas
    ]
    markers = LayerSpec("Area markers", {"type": "FeatureCollection", "features": features})
    legend = spec.legend or Legend("Study areas", ())
    legend = Legend(legend.title, (*legend.entries,
                                   LegendEntry("area marker", MARKER_STYLE["fillColor"])))
    return dataclasses.replace(spec, layers=(*spec.layers, markers), legend=legend)


def _spec_of(obj: Any, areas: gpd.GeoDataFrame | None = None) -> MapSpec:
    """The spec for anything :func:`save_html` accepts."""
    if isinstance(obj, MapSpec):
        return obj
    spec = getattr(obj, "parcelsearch_spec", None)
    if isinstance(spec, MapSpec):
        return spec
    if isinstance(obj, ipyleaflet.Map):
        raise TypeError("this ipyleaflet.Map was not made by parcelsearch.maps; "
                        "save one from areas_map(), plan_map() or result_map()")
    if isinstance(obj, gpd.GeoDataFrame):
        return areas_spec(obj)
    if hasattr(obj, "skipped") and hasattr(obj, "plan"):
        return result_spec(obj, areas=areas)
    if hasattr(obj, "tiles") and hasattr(obj, "areas"):
        return plan_spec(obj)
    raise TypeError(f"cannot map a {type(obj).__name__}: pass study areas (GeoDataFrame), "
                    "a Plan, a SearchResult or a map made by parcelsearch.maps")


# --------------------------------------------------------------------------------------------
# Renderer 1: ipyleaflet
# --------------------------------------------------------------------------------------------


def _mercator_y(lat: float) -> float:
    lat = max(min(lat, 85.0), -85.0)
    return math.log(math.tan(math.pi / 4 + math.radians(lat) / 2))


def _view(bounds: tuple[float, float, float, float] | None, size: tuple[int, int] = (800, 360)
          ) -> tuple[tuple[float, float], int]:
    """Centre (lat, lon) and the largest zoom showing ``bounds`` in ``size`` pixels."""
    if bounds is None:
        return (20.0, 0.0), 2
    west, south, east, north = bounds
    y0, y1 = _mercator_y(south), _mercator_y(north)
    dx = max(east - west, 1e-9) / 360
    dy = max(y1 - y0, 1e-9) / (2 * math.pi)
    zoom = math.floor(min(math.log2(size[0] / 256 / dx), math.log2(size[1] / 256 / dy)))
    centre_lat = math.degrees(math.atan(math.sinh((y0 + y1) / 2)))
    return (centre_lat, (west + east) / 2), max(1, min(18, zoom))


def _geojson_layer(layer: LayerSpec) -> ipyleaflet.GeoJSON:
    """A GeoJSON layer whose click shows the clicked feature's popup table."""
    popup = ipywidgets.HTML()
    geojson = ipyleaflet.GeoJSON(data=layer.geojson, name=layer.name, hover_style=HOVER_STYLE,
                                 point_style=MARKER_STYLE, popup=popup, popup_max_width=360)

    def show(**event: Any) -> None:
        properties = event.get("properties") or event.get("feature", {}).get("properties", {})
        popup.value = properties.get("popup", "")

    geojson.on_click(show)
    return geojson


def _to_ipyleaflet(spec: MapSpec, *, basemap: bool, **map_kwargs: Any) -> ipyleaflet.Map:
    centre, zoom = _view(spec.bounds)
    options: dict[str, Any] = {"center": centre, "zoom": zoom, "scroll_wheel_zoom": True}
    if not basemap:
        options["layers"] = ()
    m = ipyleaflet.Map(**{**options, **map_kwargs})
    for layer in spec.layers:
        m.add(_geojson_layer(layer))
    m.add(ipyleaflet.LayersControl(position="topright"))
    if spec.legend is not None and spec.legend.entries:
        m.add(ipyleaflet.LegendControl(_legend_dict(spec.legend), title=spec.legend.title,
                                       position="bottomright"))
    m.add(ipyleaflet.ScaleControl(position="bottomleft", imperial=False))
    m.parcelsearch_spec = spec
    return m


def areas_map(areas: gpd.GeoDataFrame, *, basemap: bool = True, id_name: str | None = None,
              **map_kwargs: Any) -> ipyleaflet.Map:
    """An interactive map of study areas, with a popup per area.

    Parameters
    ----------
    areas
        Study areas, one row per area, indexed by area id (or name the id column with
        ``id_name``). Any CRS; shown in EPSG:4326. ``name`` and ``market`` columns, when
        present, go into the popups.
    basemap
        Draw OpenStreetMap tiles under the areas (blank offline). ``False``: outlines on a plain
        background.
    id_name
        Column holding the area id, if the index does not.
    **map_kwargs
        Passed on to :class:`ipyleaflet.Map` (e.g. ``layout``, ``zoom``).

    Returns
    -------
    ipyleaflet.Map
        The map; its description is kept in ``.parcelsearch_spec`` for :func:`save_html`.

    Examples
    --------
    >>> areas.parcels.map()  # doctest: +SKIP
    """
    return _to_ipyleaflet(areas_spec(areas, id_name=id_name), basemap=basemap, **map_kwargs)


def plan_map(plan: PlanLike, *, basemap: bool = True, **map_kwargs: Any) -> ipyleaflet.Map:
    """An interactive map of a plan: area outlines over the pieces a search would send.

    Parameters
    ----------
    plan
        A plan (``.areas``, ``.id_name``, ``.tiles``).
    basemap
        Draw OpenStreetMap tiles underneath (blank offline).
    **map_kwargs
        Passed on to :class:`ipyleaflet.Map`.

    Returns
    -------
    ipyleaflet.Map
        Layers "Pieces" (popup: area, piece, vertices, request bytes, min calls) and
        "Study areas"; the description is kept in ``.parcelsearch_spec``.

    Examples
    --------
    >>> plan.map()  # doctest: +SKIP
    """
    return _to_ipyleaflet(plan_spec(plan), basemap=basemap, **map_kwargs)


def result_map(result: ResultLike, *, areas: gpd.GeoDataFrame | None = None,
               basemap: bool = True, **map_kwargs: Any) -> ipyleaflet.Map:
    """An interactive map of a search: pieces coloured by parcels matched, with a legend.

    Parameters
    ----------
    result
        A search result (``.plan``, ``.id_name``, ``.tiles``, ``.skipped``).
    areas
        The study areas as given to the search: areas in ``result.skipped`` are drawn from it,
        grey and dashed, with a popup saying why they were skipped. By default the shapes
        the result kept for its skipped areas (``result.skipped`` is a GeoDataFrame).
    basemap
        Draw OpenStreetMap tiles underneath (blank offline).
    **map_kwargs
        Passed on to :class:`ipyleaflet.Map`.

    Returns
    -------
    ipyleaflet.Map
        Layers "Pieces" (popup: area, piece, parcels matched, pages, calls, cached; pieces
        whose pages all came from the cache have a dashed outline), "Study areas" and, when
        any, "Skipped areas"; the description is kept in ``.parcelsearch_spec``.

    Examples
    --------
    >>> result.map(areas=areas)  # doctest: +SKIP
    """
    return _to_ipyleaflet(result_spec(result, areas=areas), basemap=basemap, **map_kwargs)


# --------------------------------------------------------------------------------------------
# Renderer 2: self-contained HTML
# --------------------------------------------------------------------------------------------

_STATIC = "_static"
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.MULTILINE)
_JSON_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                              "\u2028": "\\u2028", "\u2029": "\\u2029"})

_CSS = f"""
html, body {{ height: 100%; margin: 0; }}
body {{ display: flex; flex-direction: column;
       font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }}
header {{ padding: 6px 12px; background: #fff; border-bottom: 1px solid #ccc; }}
header h1 {{ font-size: 16px; margin: 0; }}
header p {{ font-size: 13px; margin: 0; color: #555; }}
#map {{ flex: 1; background: {BACKGROUND}; }}
.ps-legend {{ background: #fff; padding: 6px 10px; border-radius: 4px; line-height: 20px;
             box-shadow: 0 1px 5px rgba(0, 0, 0, .4); }}
.ps-legend i {{ display: inline-block; width: 18px; height: 12px; margin-right: 6px;
               vertical-align: middle; border: 1.5px solid #4d4d4d; }}
.ps-legend i.dashed {{ border-style: dashed; }}
.ps-popup th {{ text-align: left; padding-right: 10px; font-weight: 600; color: #444; }}
.ps-popup td {{ text-align: right; }}
"""

_APP_JS = """
(function () {
  "use strict";
  var spec = JSON.parse(document.getElementById("ps-spec").textContent);
  var map = L.map("map", {zoomSnap: 0.25});
  var overlays = {};
  if (spec.tiles) {
    var tiles = L.tileLayer(spec.tiles, {maxZoom: 19, attribution: spec.attribution});
    tiles.addTo(map);
    overlays["OpenStreetMap (online only)"] = tiles;
  }
  spec.layers.forEach(function (layer) {
    overlays[layer.name] = L.geoJSON(layer.geojson, {
      style: function (f) { return f.properties.style; },
      pointToLayer: function (f, latlng) { return L.circleMarker(latlng, f.properties.style); },
      onEachFeature: function (f, l) {
        l.bindPopup(f.properties.popup, {maxWidth: 360});
        l.bindTooltip(f.properties.tooltip, {sticky: true});
        l.on("mouseover", function () { l.setStyle({weight: 3.5}); });
        l.on("mouseout", function () { l.setStyle(f.properties.style); });
      }
    }).addTo(map);
  });
  if (spec.bounds) {
    map.fitBounds(spec.bounds, {padding: [24, 24]});
  } else {
    map.setView([20, 0], 2);
  }
  L.control.layers(null, overlays, {collapsed: false}).addTo(map);
  L.control.scale({imperial: false}).addTo(map);
  if (spec.legend) {
    var legend = L.control({position: "bottomright"});
    legend.onAdd = function () {
      var div = L.DomUtil.create("div", "ps-legend");
      div.innerHTML = spec.legend;
      return div;
    };
    legend.addTo(map);
  }
}());
"""


def _asset(name: str) -> bytes:
    return (resources.files("parcelsearch") / _STATIC / name).read_bytes()


def _data_uri(name: str, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(_asset(name)).decode('ascii')}"


@cache
def _leaflet_css() -> str:
    """Leaflet's CSS: control icons inlined, unused marker-icon URL and comments removed."""
    css = _asset("leaflet.css").decode("utf-8")
    for icon in ("layers.png", "layers-2x.png"):
        css = css.replace(f"url(images/{icon})", f"url({_data_uri(icon)})")
    css = css.replace("url(images/marker-icon.png)", "none")
    return _CSS_COMMENT.sub("", css)


@cache
def _leaflet_js() -> str:
    """Leaflet's JavaScript without its source-map comment (nothing to fetch)."""
    return _SOURCE_MAP.sub("", _asset("leaflet.js").decode("utf-8"))


def _script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>``, no HTML comments)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.translate(_JSON_UNSAFE)


def _html_payload(spec: MapSpec, *, basemap: bool) -> dict[str, Any]:
    """What the page's script reads: layers, legend and bounds; escaped where shown as HTML."""
    bounds = None
    if spec.bounds is not None:
        west, south, east, north = spec.bounds
        bounds = [[south, west], [north, east]]
    return {
        "layers": [{"name": html.escape(x.name), "geojson": x.geojson} for x in spec.layers],
        "legend": _legend_html(spec.legend) if spec.legend and spec.legend.entries else None,
        "bounds": bounds,
        "tiles": OSM_TILES if basemap else None,
        "attribution": OSM_ATTRIBUTION if basemap else None,
    }


def _to_html(spec: MapSpec, *, title: str, basemap: bool) -> str:
    subtitle = f"<p>{html.escape(spec.subtitle)}</p>" if spec.subtitle else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>\n{_leaflet_css()}\n</style>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<header><h1>{html.escape(title)}</h1>{subtitle}</header>\n<div id=\"map\"></div>\n"
        f"<script>\n{_leaflet_js()}\n</script>\n"
        f'<script id="ps-spec" type="application/json">'
        f"{_script_json(_html_payload(spec, basemap=basemap))}</script>\n"
        f"<script>{_APP_JS}</script>\n</body>\n</html>\n"
    )


def save_html(obj: Any, path: str | Path, *, title: str | None = None, basemap: bool = True,
              areas: gpd.GeoDataFrame | None = None) -> Path:
    """Write a map as one self-contained HTML file that opens with no network.

    Leaflet, the data and the map's code are inlined; nothing is fetched but the optional
    OpenStreetMap tiles, which simply stay blank offline.

    Parameters
    ----------
    obj
        Study areas (GeoDataFrame), a Plan, a SearchResult, or a map made by
        :func:`areas_map`, :func:`plan_map` or :func:`result_map`.
    path
        The file to write (parent folders are created).
    title
        Page title and heading; defaults to the map's own ("Study areas (5)", "Plan", ...).
    basemap
        Add the OpenStreetMap tile layer (switchable in the layers control).
    areas
        For a SearchResult: the study areas searched, to draw the skipped ones.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> save_html(result, "out/map.html", areas=areas)  # doctest: +SKIP
    PosixPath('out/map.html')
    """
    spec = _spec_of(obj, areas)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_to_html(spec, title=title or spec.title, basemap=basemap), encoding="utf-8")
    return path
