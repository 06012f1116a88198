"""Maps of a real search (the reference service on 127.0.0.1), with no map arguments.

Issue 48, points 8 and 11: ``result.map()`` and ``save_html(result, …)`` open on the areas at
a readable scale (not on the 1,900 km between the demo's towns) and draw offline — no tile
layer, the bundled context under the pieces.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import ipyleaflet
import shapely

import parcelsearch
from parcelsearch.maps import save_html
from parcelsearch.maps.context import CONTEXT_NAME
from parcelsearch.maps.features import box
from parcelsearch.maps.framing import MIN_PX
from parcelsearch.maps.spec import pixels


def test_a_result_map_opens_on_readable_areas_and_draws_offline(make_client, demo_areas) -> None:
    result = parcelsearch.search(
        demo_areas, client=make_client(), active_markets_only=True, progress=False
    )
    m = result.map(areas=demo_areas)
    assert not [x for x in m.layers if isinstance(x, ipyleaflet.TileLayer)]  # nothing fetched
    layers = {x.name: x for x in m.layers if isinstance(x, ipyleaflet.GeoJSON)}
    context = shapely.union_all(
        [shapely.geometry.shape(f["geometry"]) for f in layers[CONTEXT_NAME].data["features"]]
    )
    pieces = [shapely.geometry.shape(f["geometry"]) for f in layers["Pieces"].data["features"]]
    assert all(context.intersects(p) for p in pieces)  # streets and blocks under the pieces
    # opens on a group of areas each at least MIN_PX across (the whole extent: zoom 4, specks)
    centre = shapely.Point(m.center[1], m.center[0])  # (lon, lat)
    shown = [a for a in demo_areas.geometry if centre.distance(a.centroid) < 0.1]
    assert shown and m.zoom >= 12
    assert min(pixels(box(a), m.zoom) for a in shown) >= MIN_PX


def test_a_saved_map_draws_offline_by_default(make_client, demo_areas, tmp_path: Path) -> None:
    result = parcelsearch.search(
        demo_areas, client=make_client(), active_markets_only=True, progress=False
    )
    page = save_html(result, tmp_path / "map.html", areas=demo_areas).read_text()
    data = json.loads(
        re.search(r'<script id="ps-spec" type="application/json">(.*?)</script>', page, re.S)[1]
    )  # type: ignore[index]
    assert data["tiles"] is None and "tile.openstreetmap.org" not in page
    assert data["context"]["name"] == CONTEXT_NAME and data["context"]["geojson"]["features"]
