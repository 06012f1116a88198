"""The notebook renderer: a :class:`~parcelsearch.maps.spec.MapSpec` → an ipyleaflet map.

:func:`areas_map`, :func:`plan_map` and :func:`result_map` open fitted to everything, with a
dot on areas too small to see there; when the spec has panels (areas far apart), a "go to"
list in the corner fits the map to each group of areas. Each map keeps its description in
``.parcelsearch_spec`` so :func:`parcelsearch.maps.save_html` writes the same map.
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import ipyleaflet
import ipywidgets

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

__all__ = ["areas_map", "plan_map", "result_map"]

_ALL = "all areas"


def _legend_dict(legend: Legend) -> dict[str, str]:
    """Labels → colours for :class:`ipyleaflet.LegendControl` (dashed swatches say so)."""
    return {(f"{e.label} (dashed)" if e.dashed else e.label): e.color for e in legend.entries}


def _geojson_layer(layer: LayerSpec) -> ipyleaflet.GeoJSON:
    """A GeoJSON layer whose click shows the clicked feature's popup table."""
    popup = ipywidgets.HTML()
    geojson = ipyleaflet.GeoJSON(data=layer.geojson, name=layer.name, hover_style=HOVER_STYLE,
                                 point_style=MARKER_STYLE, popup=popup, popup_min_width=220,
                                 popup_max_width=360)

    def show(**event: Any) -> None:
        properties = event.get("properties") or event.get("feature", {}).get("properties", {})
        popup.value = properties.get("popup", "")

    geojson.on_click(show)
    return geojson


def _context_layer(layer: LayerSpec) -> ipyleaflet.GeoJSON:
    """The offline context: one style, no popups, no hover."""
    return ipyleaflet.GeoJSON(data=layer.geojson, name=layer.name, style=dict(CONTEXT_STYLE))


def _go_to(m: ipyleaflet.Map, spec: MapSpec) -> ipyleaflet.WidgetControl:
    """A list of the spec's panels; choosing one fits the map to it."""
    choices = {_ALL: spec.bounds, **{v.title: v.bounds for v in spec.views}}
    chooser = ipywidgets.Dropdown(options=list(choices), value=_ALL, description="go to",
                                  layout=ipywidgets.Layout(width="260px"))

    def fit(change: dict[str, Any]) -> None:
        centre, zoom = view_of(choices[change["new"]])  # set here: no front-end round trip
        m.center, m.zoom = centre, zoom

    chooser.observe(fit, names="value")
    return ipyleaflet.WidgetControl(widget=chooser, position="topleft")


def _to_ipyleaflet(spec: MapSpec, *, basemap: bool, **map_kwargs: Any) -> ipyleaflet.Map:
    centre, zoom = view_of(spec.bounds)
    options: dict[str, Any] = {"center": centre, "zoom": zoom, "scroll_wheel_zoom": True}
    if not basemap:
        options["layers"] = ()
    m = ipyleaflet.Map(**{**options, **map_kwargs})
    if spec.context is not None:
        m.add(_context_layer(spec.context))
    for layer in spec.layers:
        m.add(_geojson_layer(layer))
    m.add(ipyleaflet.LayersControl(position="topright"))
    if spec.views:
        m.add(_go_to(m, spec))
    if spec.legend is not None and spec.legend.entries:
        m.add(ipyleaflet.LegendControl(_legend_dict(spec.legend), title=spec.legend.title,
                                       position="bottomright"))
    m.add(ipyleaflet.ScaleControl(position="bottomleft", imperial=False))
    m.parcelsearch_spec = spec
    return m


def areas_map(areas: gpd.GeoDataFrame, *, basemap: bool = True, id_name: str | None = None,
              context: gpd.GeoDataFrame | None = None, **map_kwargs: Any) -> ipyleaflet.Map:
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
    context
        Shapes drawn underneath so the map reads offline (streets, blocks, outlines; any CRS),
        e.g. :func:`parcelsearch.demo.demo_context`. Only those near the areas are kept.
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


def plan_map(plan: PlanLike, *, basemap: bool = True, context: gpd.GeoDataFrame | None = None,
             **map_kwargs: Any) -> ipyleaflet.Map:
    """An interactive map of a plan: area outlines over the pieces a search would send.

    Parameters
    ----------
    plan
        A plan (``.areas``, ``.id_name``, ``.tiles``).
    basemap
        Draw OpenStreetMap tiles underneath (blank offline).
    context
        Shapes drawn underneath so the map reads offline (see :func:`areas_map`).
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


def result_map(result: ResultLike, *, areas: gpd.GeoDataFrame | None = None,
               basemap: bool = True, context: gpd.GeoDataFrame | None = None,
               **map_kwargs: Any) -> ipyleaflet.Map:
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
    context
        Shapes drawn underneath so the map reads offline (see :func:`areas_map`).
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
