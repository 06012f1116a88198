"""Maps of study areas, plans and results: ipyleaflet in a notebook, one HTML file on disk.

Every map is first described by a small :class:`MapSpec` (``spec``: named layers of GeoJSON
whose features carry their own style, popup table and tooltip, plus a legend, the bounds and
the first views), built by ``describe`` (with ``classification`` for the colours, ``framing``
for the first views and ``context`` for the offline streets and blocks), then drawn by one of
two renderers:

- ``widget``: :func:`areas_map`, :func:`plan_map`, :func:`result_map` → an
  :class:`ipyleaflet.Map` (GeoJSON layers, a layers control, a legend, a scale);
- ``offline_html``: :func:`save_html` → one self-contained HTML file with Leaflet, the data
  and the map inlined, which opens on the pieces with no network at all.

Each ipyleaflet map keeps its description in ``.parcelsearch_spec``, so
``save_html(result.map(), "map.html")`` writes the same map. Text from user data (area names,
markets) is HTML-escaped in every popup, tooltip and legend.
"""

from parcelsearch.maps.classification import class_breaks
from parcelsearch.maps.describe import areas_spec, plan_spec, result_spec
from parcelsearch.maps.offline_html import save_html
from parcelsearch.maps.spec import LayerSpec, Legend, LegendEntry, MapSpec, View
from parcelsearch.maps.widget import areas_map, plan_map, result_map

__all__ = [
    "Legend",
    "LegendEntry",
    "LayerSpec",
    "MapSpec",
    "View",
    "areas_map",
    "areas_spec",
    "plan_map",
    "plan_spec",
    "result_map",
    "result_spec",
    "save_html",
    "class_breaks",
]
