"""The description every map renderer consumes: :class:`MapSpec` and its parts.

A spec is plain data — named GeoJSON layers whose features carry their own style, popup table
and tooltip, a legend, the bounds and the first views — so the ipyleaflet widget and the
offline HTML page draw the same map. This module also holds the shared styles and the
web-Mercator arithmetic that decides what a first view can show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import geopandas as gpd
import pandas as pd

__all__ = [
    "Bounds",
    "LayerSpec",
    "Legend",
    "LegendEntry",
    "MapSpec",
    "PlanLike",
    "ResultLike",
    "View",
]

#: ``(west, south, east, north)`` in degrees.
Bounds = tuple[float, float, float, float]

#: Leaflet path options per kind of feature (the same keys in ipyleaflet and in the HTML).
Style = dict[str, Any]
AREA_STYLE: Style = {
    "color": "#1a1a1a",
    "weight": 2,
    "opacity": 1,
    "fillColor": "#6a8caf",
    "fillOpacity": 0.25,
}
OUTLINE_STYLE: Style = {"color": "#1a1a1a", "weight": 2.5, "opacity": 1, "fill": False}
PLAN_PIECE_STYLE: Style = {
    "color": "#2c7fb8",
    "weight": 1,
    "opacity": 1,
    "fillColor": "#41b6c4",
    "fillOpacity": 0.35,
}
PIECE_STYLE: Style = {"color": "#4d4d4d", "weight": 1, "opacity": 1, "fillOpacity": 0.75}
CACHED_DASH = "5 4"
UNSEARCHED_STYLE: Style = {
    "color": "#4d4d4d",
    "weight": 1,
    "opacity": 1,
    "dashArray": "1 4",
    "fillOpacity": 0,
}
SKIPPED_STYLE: Style = {
    "color": "#757575",
    "weight": 2,
    "opacity": 1,
    "dashArray": "6 4",
    "fillColor": "#9e9e9e",
    "fillOpacity": 0.3,
}
HOVER_STYLE: Style = {"weight": 3.5}
#: Dots marking areas smaller than ``MARKER_BELOW_PX`` pixels in a first view.
MARKER_STYLE: Style = {
    "radius": 6,
    "color": "#1a1a1a",
    "weight": 1.5,
    "opacity": 1,
    "fillColor": "#e6550d",
    "fillOpacity": 0.9,
}
MARKER_BELOW_PX = 12
MARKERS_NAME = "Area markers"
MARKER_LABEL = "area marker"
#: Context features (streets and blocks, outlines): quiet, under everything, not clickable.
CONTEXT_STYLE: Style = {
    "color": "#b9b4a8",
    "weight": 0.6,
    "opacity": 1,
    "fillColor": "#fbfaf6",
    "fillOpacity": 1,
    "interactive": False,
}
#: Plain background under the layers (the streets between context blocks show it).
BACKGROUND = "#e8e8e4"

#: Pixel size of the whole map and of one panel of a small-multiples page, for the first view.
MAP_SIZE = (960, 540)
PANEL_SIZE = (440, 300)
#: Pixel size an interactive (ipyleaflet) map is framed for: a notebook cell, 400 px high.
WIDGET_SIZE = (800, 360)


#: The first entry of a go-to list: the whole map.
GO_TO_ALL = "all areas"


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

    Each feature's ``properties`` hold ``style`` (Leaflet path options) and, on every layer
    but the context, ``popup`` (an HTML table, already escaped) and ``tooltip`` (short escaped
    HTML).
    """

    name: str
    geojson: dict[str, Any]


@dataclass(frozen=True)
class View:
    """One first view: a title (escaped by the renderers) and the bounds it must show."""

    title: str
    bounds: Bounds


@dataclass(frozen=True)
class MapSpec:
    """Everything a renderer needs: title, layers (drawn in order), legend, bounds and views.

    ``bounds`` is ``(west, south, east, north)`` in degrees, or ``None`` for an empty map.
    ``views`` holds one :class:`View` per panel when the areas are too far apart to be seen
    in one view (small multiples), and is empty when one view fitted to ``bounds`` shows them.
    ``context`` is an optional offline layer (streets, blocks, outlines) drawn underneath.
    ``focus`` is where a single map opens when that is not ``bounds``: every area but those far
    from all the others (``listed``, one view each), or the areas whose pieces changed on a
    refresh's map. :meth:`go_to` is the list both renderers offer to go to.
    """

    title: str
    layers: tuple[LayerSpec, ...]
    legend: Legend | None
    bounds: Bounds | None
    subtitle: str = ""
    views: tuple[View, ...] = ()
    context: LayerSpec | None = None
    focus: View | None = None
    listed: tuple[View, ...] = ()

    def layer(self, name: str) -> LayerSpec:
        """The layer called ``name``."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r}; layers: {[x.name for x in self.layers]}")

    def feature_counts(self) -> dict[str, int]:
        """Features per layer in drawing order, the context (when any) first.

        Each feature is one shape on the map (a multipart area is one shape), so this is what
        a renderer must draw; the browser tests compare it with what Chromium shows.
        """
        layers = ((self.context,) if self.context is not None else ()) + self.layers
        return {x.name: len(x.geojson["features"]) for x in layers}

    def go_to(self) -> tuple[View, ...]:
        """What a single map offers to go to: all areas, the focus (the view it opens on,
        when not all areas), the panels' groups and the outliers, each title once. One
        entry: no list."""
        if self.bounds is None:
            return ()
        choices = [View(GO_TO_ALL, self.bounds)]
        if self.focus is not None:
            choices.append(self.focus)
        for view in (*self.views, *self.listed):
            if view.title not in {c.title for c in choices}:
                choices.append(view)
        return tuple(choices)

    def first_views(self) -> tuple[View, ...]:
        """The views a renderer opens on: the panels, or one view of the whole map."""
        if self.views:
            return self.views
        return (View(self.title, self.bounds),) if self.bounds is not None else ()


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
# Web-Mercator arithmetic: what a view of a given size shows
# --------------------------------------------------------------------------------------------


def mercator_y(lat: float) -> float:
    """Web-Mercator ``y`` (radians) of a latitude, clamped to ±85°."""
    lat = max(min(lat, 85.0), -85.0)
    return math.log(math.tan(math.pi / 4 + math.radians(lat) / 2))


def view_of(
    bounds: Bounds | None, size: tuple[int, int] = WIDGET_SIZE
) -> tuple[tuple[float, float], int]:
    """Centre (lat, lon) and the largest zoom showing ``bounds`` in ``size`` pixels."""
    if bounds is None:
        return (20.0, 0.0), 2
    west, south, east, north = bounds
    y0, y1 = mercator_y(south), mercator_y(north)
    dx = max(east - west, 1e-9) / 360
    dy = max(y1 - y0, 1e-9) / (2 * math.pi)
    zoom = math.floor(min(math.log2(size[0] / 256 / dx), math.log2(size[1] / 256 / dy)))
    centre_lat = math.degrees(math.atan(math.sinh((y0 + y1) / 2)))
    return (centre_lat, (west + east) / 2), max(1, min(18, zoom))


def pixels(bounds: Bounds, zoom: float) -> float:
    """The larger side of ``bounds``, in screen pixels at ``zoom``."""
    west, south, east, north = bounds
    world = 256 * math.pow(2, zoom)
    return max(
        (east - west) / 360 * world, (mercator_y(north) - mercator_y(south)) / (2 * math.pi) * world
    )


def union(*boxes: Bounds) -> Bounds:
    """The bounds covering every box."""
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
