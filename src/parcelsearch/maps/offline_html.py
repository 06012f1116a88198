"""The offline renderer: a :class:`~parcelsearch.maps.spec.MapSpec` → one self-contained page.

Leaflet (vendored in ``parcelsearch/_static``), the data and the page's script are inlined, so
the file opens with no network at all. The first view shows the pieces: one map fitted to
them, or — when the areas are far apart — one small map (panel) per group of nearby areas.
The spec's offline context (streets, blocks) is drawn underneath; the optional OpenStreetMap
layer simply stays blank offline.
"""

from __future__ import annotations

import base64
import html
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import geopandas as gpd

from parcelsearch.maps.context import BUNDLED, Context
from parcelsearch.maps.describe import spec_of
from parcelsearch.maps.spec import (
    BACKGROUND,
    MARKER_LABEL,
    MARKERS_NAME,
    Bounds,
    Legend,
    MapSpec,
)

__all__ = ["OSM_ATTRIBUTION", "OSM_TILES", "page_html", "save_html"]

#: OpenStreetMap's tile URL template and the attribution its tile policy asks for.
OSM_TILES = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
OSM_ATTRIBUTION = (
    '&copy; <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors'
)

_STATIC = "_static"
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.MULTILINE)
_JSON_UNSAFE = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)

_CSS = f"""
html, body {{ height: 100%; margin: 0; }}
body {{ display: flex; flex-direction: column;
       font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }}
header {{ padding: 6px 12px; background: #fff; border-bottom: 1px solid #ccc; }}
header h1 {{ font-size: 16px; margin: 0; }}
header p {{ font-size: 13px; margin: 0; color: #555; }}
header .ps-go-to {{ font-size: 13px; color: #333; }}
#map {{ flex: 1; background: {BACKGROUND}; }}
body.panels {{ height: auto; min-height: 100%; }}
#panels {{ flex: 1; display: grid; gap: 8px; padding: 8px; align-content: start;
          grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); background: #f4f4f2; }}
.ps-panel {{ background: #fff; border: 1px solid #ccc; }}
.ps-panel h2 {{ font-size: 13px; font-weight: 600; margin: 0; padding: 3px 8px; }}
.ps-panel-map {{ height: 300px; background: {BACKGROUND}; }}
section.ps-legend {{ justify-self: start; align-self: start; }}
.ps-legend {{ background: #fff; padding: 6px 10px; border-radius: 4px; line-height: 20px;
             box-shadow: 0 1px 5px rgba(0, 0, 0, .4); }}
aside.ps-legend {{ position: fixed; right: 12px; bottom: 12px; z-index: 1000; }}
.ps-legend i {{ display: inline-block; width: 18px; height: 12px; margin-right: 6px;
               vertical-align: middle; border: 1.5px solid #4d4d4d; }}
.ps-legend i.dashed {{ border-style: dashed; }}
.ps-popup th {{ text-align: left; padding-right: 10px; font-weight: 600; color: #444; }}
.ps-popup td {{ text-align: right; }}
"""

# window.psMaps lists every Leaflet map with the bounds it was fitted to and its layers by name
# (the browser tests read it).
_APP_JS = """
(function () {
  "use strict";
  var spec = JSON.parse(document.getElementById("ps-spec").textContent);
  window.psMaps = [];

  function addLayers(map, layers, withControl) {
    var overlays = {};
    if (spec.tiles) {
      var tiles = L.tileLayer(spec.tiles, {maxZoom: 19, attribution: spec.attribution});
      tiles.addTo(map);
      overlays["OpenStreetMap (online only)"] = tiles;
    }
    if (spec.context) {
      overlays[spec.context.name] = L.geoJSON(spec.context.geojson, {
        style: function (f) { return f.properties.style; }, interactive: false
      }).addTo(map);
    }
    layers.forEach(function (layer) {
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
    if (withControl) { L.control.layers(null, overlays, {collapsed: false}).addTo(map); }
    L.control.scale({imperial: false}).addTo(map);
    return overlays;
  }

  // Fit bounds inside what the map's controls and the legend over it leave free: nothing the
  // map opens on lies under them. Each is kept clear by a margin on its own side, across or
  // down, whichever takes the smaller share of the map.
  function padding(map) {
    var box = map.getContainer().getBoundingClientRect();
    var pad = {left: 24, right: 24, top: 24, bottom: 24};
    var covers = Array.prototype.slice.call(map.getContainer().querySelectorAll(
      ".leaflet-control")).concat(Array.prototype.slice.call(
      document.querySelectorAll("aside.ps-legend")));
    covers.forEach(function (c) {
      var r = c.getBoundingClientRect();
      if (!r.width || r.bottom <= box.top || r.top >= box.bottom) { return; }
      var left = r.left + r.right < box.left + box.right;
      var top = r.top + r.bottom < box.top + box.bottom;
      var across = left ? r.right - box.left : box.right - r.left;
      var down = top ? r.bottom - box.top : box.bottom - r.top;
      if (across / box.width < down / box.height) {
        var side = left ? "left" : "right";
        pad[side] = Math.max(pad[side], across + 8);
      } else {
        var end = top ? "top" : "bottom";
        pad[end] = Math.max(pad[end], down + 8);
      }
    });
    return {paddingTopLeft: [pad.left, pad.top], paddingBottomRight: [pad.right, pad.bottom]};
  }

  function fit(map, bounds) {
    if (bounds) { map.fitBounds(bounds, padding(map)); } else { map.setView([20, 0], 2); }
  }

  function show(element, bounds, layers, withControl) {
    var map = L.map(element, {zoomSnap: 0.25});
    var overlays = addLayers(map, layers, withControl);
    fit(map, bounds);
    window.psMaps.push({map: map, bounds: bounds, layers: overlays});
    return map;
  }

  function legendBox() {
    // over a single map, bottom right; on a page of panels, a cell of the grid after them
    var legend = document.createElement(spec.panels.length > 1 ? "section" : "aside");
    legend.className = "ps-legend";
    legend.innerHTML = spec.legend;
    (spec.panels.length > 1 ? document.getElementById("panels") : document.body)
      .appendChild(legend);
  }

  function goTo(map) {
    // the notebook map's list (MapSpec.go_to): the view opened on first; in the header, made
    // before the map is fitted (the header's height is the map's to give)
    var label = L.DomUtil.create("label", "ps-go-to", document.querySelector("header"));
    label.appendChild(document.createTextNode("go to "));
    var chooser = L.DomUtil.create("select", "", label);
    spec.go_to.forEach(function (choice, k) {
      var option = L.DomUtil.create("option", "", chooser);
      option.value = String(k);
      option.innerHTML = choice.title;
      option.selected = k === spec.go_to_start;
    });
    chooser.addEventListener("change", function () {
      fit(map(), spec.go_to[Number(chooser.value)].bounds);
    });
  }

  if (spec.panels.length > 1) {
    var grid = document.getElementById("panels");
    spec.panels.forEach(function (panel) {
      var box = L.DomUtil.create("section", "ps-panel", grid);
      L.DomUtil.create("h2", "", box).innerHTML = panel.title;
      show(L.DomUtil.create("div", "ps-panel-map", box), panel.bounds, spec.layers, false);
    });
    if (spec.legend) { legendBox(); }
  } else {
    var single = null;
    if (spec.legend) { legendBox(); }
    if (spec.go_to.length > 1) { goTo(function () { return single; }); }
    single = show(document.getElementById("map"), spec.focus || spec.bounds, spec.layers, true);
  }
}());
"""


def _legend_html(legend: Legend) -> str:
    """An escaped legend block for the HTML map."""
    items = "".join(
        f'<div><i class="{"dashed" if e.dashed else "solid"}" '
        f'style="background:{html.escape(e.color)}"></i>{html.escape(e.label)}</div>'
        for e in legend.entries
    )
    return f"<strong>{html.escape(legend.title)}</strong>{items}"


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


def _latlng(bounds: Bounds | None) -> list[list[float]] | None:
    if bounds is None:
        return None
    west, south, east, north = bounds
    return [[south, west], [north, east]]


def _html_payload(spec: MapSpec, *, basemap: bool) -> dict[str, Any]:
    """What the page's script reads: layers, panels, legend and bounds; escaped where shown.

    Panels show their areas whole, so a page of panels leaves out the markers of specks.
    """
    panels = len(spec.views) > 1
    shown = [x for x in spec.layers if not (panels and x.name == MARKERS_NAME)]
    legend = spec.legend
    if legend is not None and panels:
        legend = Legend(legend.title, tuple(e for e in legend.entries if e.label != MARKER_LABEL))
    context = spec.context
    return {
        "layers": [{"name": html.escape(x.name), "geojson": x.geojson} for x in shown],
        "panels": [{"title": html.escape(v.title), "bounds": _latlng(v.bounds)} for v in spec.views]
        if panels
        else [],
        "context": (
            None
            if context is None
            else {"name": html.escape(context.name), "geojson": context.geojson}
        ),
        "legend": _legend_html(legend) if legend and legend.entries else None,
        "bounds": _latlng(spec.bounds),
        "focus": _latlng(spec.focus.bounds) if spec.focus is not None else None,
        "go_to": []
        if panels
        else [{"title": html.escape(v.title), "bounds": _latlng(v.bounds)} for v in spec.go_to()],
        "go_to_start": (
            [v.title for v in spec.go_to()].index(spec.focus.title)
            if spec.focus is not None and not panels
            else 0
        ),
        "tiles": OSM_TILES if basemap else None,
        "attribution": OSM_ATTRIBUTION if basemap else None,
    }


def page_html(spec: MapSpec, *, title: str, basemap: bool) -> str:
    """The whole page for ``spec`` (see :func:`save_html`)."""
    subtitle = f"<p>{html.escape(spec.subtitle)}</p>" if spec.subtitle else ""
    panels = len(spec.views) > 1
    body = '<div id="panels"></div>' if panels else '<div id="map"></div>'
    opening = '<body class="panels">' if panels else "<body>"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>\n{_leaflet_css()}\n</style>\n<style>{_CSS}</style>\n</head>\n"
        f"{opening}\n"
        f"<header><h1>{html.escape(title)}</h1>{subtitle}</header>\n{body}\n"
        f"<script>\n{_leaflet_js()}\n</script>\n"
        f'<script id="ps-spec" type="application/json">'
        f"{_script_json(_html_payload(spec, basemap=basemap))}</script>\n"
        f"<script>{_APP_JS}</script>\n</body>\n</html>\n"
    )


def save_html(
    obj: Any,
    path: str | Path,
    *,
    title: str | None = None,
    basemap: bool = False,
    areas: gpd.GeoDataFrame | None = None,
    context: Context = BUNDLED,
) -> Path:
    """Write a map as one self-contained HTML file that opens with no network.

    Leaflet, the data and the map's code are inlined; nothing is fetched but the optional
    OpenStreetMap tiles, which simply stay blank offline. The page opens on the pieces: one
    map fitted to them when the areas are close (on a refresh's map, to the areas whose pieces
    changed), else one small map per group of nearby areas.

    Parameters
    ----------
    obj
        Study areas (GeoDataFrame), a Plan, a SearchResult, or a map made by
        :func:`~parcelsearch.maps.areas_map`, :func:`~parcelsearch.maps.plan_map` or
        :func:`~parcelsearch.maps.result_map`.
    path
        The file to write (parent folders are created).
    title
        Page title and heading; defaults to the map's own ("Study areas (5)", "Plan", ...).
    basemap
        Add the OpenStreetMap tile layer (switchable in the layers control; needs the
        internet). By default none: the page draws offline.
    areas
        For a SearchResult: the study areas searched, to draw the skipped ones.
    context
        Shapes drawn underneath so the page reads offline (streets, blocks, outlines; any CRS);
        only those near the first views are kept. ``"bundled"`` (the default): the context
        shipped with the package (the demo fabric's blocks); ``None``: none. A map made with a
        context keeps it.

    Returns
    -------
    pathlib.Path
        ``path``.

    Examples
    --------
    >>> save_html(result, "out/map.html", areas=areas)  # doctest: +SKIP
    PosixPath('out/map.html')
    """
    spec = spec_of(obj, areas, context)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page_html(spec, title=title or spec.title, basemap=basemap), encoding="utf-8")
    return path
