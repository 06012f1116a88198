"""The notebook renderer: a :class:`~parcelsearch.maps.spec.MapSpec` → an ipyleaflet map.

:func:`areas_map`, :func:`plan_map` and :func:`result_map` open fitted to everything, with a
dot on areas too small to see there (areas far from all the others are left out of the first
view); a "go to" list in the corner (:meth:`MapSpec.go_to
<parcelsearch.maps.spec.MapSpec.go_to>`, the same as the offline HTML map's) fits the map to
all areas, each group of areas and each area left out. Each map keeps its description in
``.parcelsearch_spec`` so :func:`parcelsearch.maps.save_html` writes the same map.
"""

from __future__ import annotations

import html
from typing import Any

import geopandas as gpd
import ipyleaflet
import ipywidgets

from parcelsearch.maps.context import BUNDLED, Context
from parcelsearch.maps.describe import areas_spec, plan_spec, result_spec
from parcelsearch.maps.spec import (
    CONTEXT_STYLE,
    HOVER_STYLE,
    MARKER_STYLE,
    LayerSpec,
    Legend,
    MapSpec,
    PlanLike,
    ResultLike,
    view_of,
)

__all__ = ["LEGEND_CLASS", "LEGEND_OPEN_MAX_PX", "areas_map", "plan_map", "result_map"]

#: CSS class of the legend's box (the browser tests find it by this).
LEGEND_CLASS = "ps-legend"
#: The legend starts open only when it is at most this tall: 40 % of a 400 px map.
LEGEND_OPEN_MAX_PX = 160
_LEGEND_LINE_PX = 15
_LEGEND_CHARS_PER_LINE = 34
_LEGEND_CSS = (
    "font:11px/15px sans-serif;background:rgba(255,255,255,.92);padding:3px 7px;"
    "border-radius:4px;box-shadow:0 1px 4px rgba(0,0,0,.35);max-width:250px;"
    f"max-height:{LEGEND_OPEN_MAX_PX + _LEGEND_LINE_PX}px;overflow-y:auto"
)


def legend_height(legend: Legend) -> int:
    """The open legend's height in pixels, estimated from its lines (title, wrapped labels)."""
    lines = 1 + sum(-(-len(e.label) // _LEGEND_CHARS_PER_LINE) for e in legend.entries)
    return lines * _LEGEND_LINE_PX + 6


def legend_html(legend: Legend) -> str:
    """The legend as a ``<details>`` block: compact, and folded when it would be too tall.

    The browser opens and folds it with no round trip through the kernel.
    """
    items = "".join(
        f'<div><i style="display:inline-block;width:14px;height:9px;margin-right:5px;'
        f"vertical-align:middle;background:{html.escape(e.color)};border:1.5px "
        f'{"dashed" if e.dashed else "solid"} #4d4d4d"></i>{html.escape(e.label)}</div>'
        for e in legend.entries
    )
    state = " open" if legend_height(legend) <= LEGEND_OPEN_MAX_PX else ""
    return (
        f'<details class="{LEGEND_CLASS}" style="{_LEGEND_CSS}"{state}>'
        f'<summary style="cursor:pointer;font-weight:600">{html.escape(legend.title)}'
        f"</summary>{items}</details>"
    )


def _legend_control(legend: Legend) -> ipyleaflet.WidgetControl:
    return ipyleaflet.WidgetControl(
        widget=ipywidgets.HTML(legend_html(legend), layout=ipywidgets.Layout(margin="0")),
        position="bottomright",
    )


def _geojson_layer(layer: LayerSpec) -> ipyleaflet.GeoJSON:
    """A GeoJSON layer whose click shows the clicked feature's popup table."""
    popup = ipywidgets.HTML()
    geojson = ipyleaflet.GeoJSON(
        data=layer.geojson,
        name=layer.name,
        hover_style=HOVER_STYLE,
        point_style=MARKER_STYLE,
        popup=popup,
        popup_min_width=220,
        popup_max_width=360,
    )

    def show(**event: Any) -> None:
        properties = event.get("properties") or event.get("feature", {}).get("properties", {})
        popup.value = properties.get("popup", "")

    geojson.on_click(show)
    return geojson


def _context_layer(layer: LayerSpec) -> ipyleaflet.GeoJSON:
    """The offline context: one style, no popups, no hover."""
    return ipyleaflet.GeoJSON(data=layer.geojson, name=layer.name, style=dict(CONTEXT_STYLE))


def _go_to(m: ipyleaflet.Map, spec: MapSpec) -> ipyleaflet.WidgetControl:
    """The spec's go-to list (:meth:`MapSpec.go_to`, as the offline HTML map offers it);
    choosing one fits the map to it. It starts on the view the map opened on."""
    choices = {v.title: v.bounds for v in spec.go_to()}
    start = spec.focus.title if spec.focus is not None else next(iter(choices))
    chooser = ipywidgets.Dropdown(
        options=list(choices),
        value=start,
        description="go to",
        layout=ipywidgets.Layout(width="260px"),
    )

    def fit(change: dict[str, Any]) -> None:
        centre, zoom = view_of(choices[change["new"]])  # set here: no front-end round trip
        m.center, m.zoom = centre, zoom

    chooser.observe(fit, names="value")
    return ipyleaflet.WidgetControl(widget=chooser, position="topleft")


def _to_ipyleaflet(spec: MapSpec, *, basemap: bool, **map_kwargs: Any) -> ipyleaflet.Map:
    centre, zoom = view_of(spec.focus.bounds if spec.focus is not None else spec.bounds)
    options: dict[str, Any] = {"center": centre, "zoom": zoom, "scroll_wheel_zoom": True}
    if not basemap:
        options["layers"] = ()
    m = ipyleaflet.Map(**{**options, **map_kwargs})
    if spec.context is not None:
        m.add(_context_layer(spec.context))
    for layer in spec.layers:
        m.add(_geojson_layer(layer))
    m.add(ipyleaflet.LayersControl(position="topright"))
    if len(spec.go_to()) > 1:
        m.add(_go_to(m, spec))
    if spec.legend is not None and spec.legend.entries:
        m.add(_legend_control(spec.legend))
    m.add(ipyleaflet.ScaleControl(position="bottomleft", imperial=False))
    m.parcelsearch_spec = spec
    return m


def areas_map(
    areas: gpd.GeoDataFrame,
    *,
    basemap: bool = False,
    id_name: str | None = None,
    context: Context = BUNDLED,
    **map_kwargs: Any,
) -> ipyleaflet.Map:
    """An interactive map of study areas, with a popup per area.

    Parameters
    ----------
    areas
        Study areas, one row per area, indexed by area id (or name the id column with
        ``id_name``). Any CRS; shown in EPSG:4326. ``name`` and ``market`` columns, when
        present, go into the popups.
    basemap
        Draw OpenStreetMap tiles under the areas (needs the internet: blank offline). By
        default none: the map draws offline.
    id_name
        Column holding the area id, if the index does not.
    context
        Shapes drawn underneath so the map reads offline (streets, blocks, outlines; any CRS).
        Only those near the areas are kept. ``"bundled"`` (the default): the context shipped
        with the package (the demo fabric's blocks, :func:`parcelsearch.demo.demo_context`);
        ``None``: none.
    **map_kwargs
        Passed on to :class:`ipyleaflet.Map` (e.g. ``layout``, ``zoom``).

    Returns
    -------
    ipyleaflet.Map
        The map; its description is kept in ``.parcelsearch_spec`` for
        :func:`~parcelsearch.maps.save_html`.

    Examples
    --------
    >>> areas.parcels.map()  # doctest: +SKIP
    """
    spec = areas_spec(areas, id_name=id_name, context=context)
    return _to_ipyleaflet(spec, basemap=basemap, **map_kwargs)


def plan_map(
    plan: PlanLike, *, basemap: bool = False, context: Context = BUNDLED, **map_kwargs: Any
) -> ipyleaflet.Map:
    """An interactive map of a plan: area outlines over the pieces a search would send.

    Parameters
    ----------
    plan
        A plan (``.areas``, ``.id_name``, ``.tiles``).
    basemap
        Draw OpenStreetMap tiles underneath (needs the internet; by default none).
    context
        Shapes drawn underneath so the map reads offline; by default the bundled context (see
        :func:`areas_map`).
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
    return _to_ipyleaflet(plan_spec(plan, context=context), basemap=basemap, **map_kwargs)


def result_map(
    result: ResultLike,
    *,
    areas: gpd.GeoDataFrame | None = None,
    basemap: bool = False,
    context: Context = BUNDLED,
    **map_kwargs: Any,
) -> ipyleaflet.Map:
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
        Draw OpenStreetMap tiles underneath (needs the internet; by default none).
    context
        Shapes drawn underneath so the map reads offline; by default the bundled context (see
        :func:`areas_map`).
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
    spec = result_spec(result, areas=areas, context=context)
    return _to_ipyleaflet(spec, basemap=basemap, **map_kwargs)
