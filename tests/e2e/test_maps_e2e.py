"""Maps of a real search (the reference service on 127.0.0.1), with no map arguments.

Issue 48, points 8 and 11: ``result.map()`` and ``save_html(result, …)`` draw offline — no
tile layer, the bundled context under the pieces; the notebook map opens fitted to every area
(issue 59), dots on the specks, its go-to list reaching each group at a readable scale, and
the offline page shows each group in a panel.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import ipyleaflet
import pytest
import shapely

import parcelsearch
from parcelsearch.maps import save_html
from parcelsearch.maps.context import CONTEXT_NAME
from parcelsearch.maps.features import box
from parcelsearch.maps.framing import MIN_PX
from parcelsearch.maps.spec import pixels, view_of


def test_a_result_map_opens_on_readable_areas_and_draws_offline(make_client,
                                                                demo_areas) -> None:
    result = parcelsearch.search(demo_areas, client=make_client(), active_markets_only=True,
                                 progress=False)
    m = result.map(areas=demo_areas)
    assert not [x for x in m.layers if isinstance(x, ipyleaflet.TileLayer)]  # nothing fetched
    layers = {x.name: x for x in m.layers if isinstance(x, ipyleaflet.GeoJSON)}
    context = shapely.union_all([shapely.geometry.shape(f["geometry"])
                                 for f in layers[CONTEXT_NAME].data["features"]])
    pieces = [shapely.geometry.shape(f["geometry"]) for f in layers["Pieces"].data["features"]]
    assert all(context.intersects(p) for p in pieces)  # streets and blocks under the pieces
    # Issue 59: opens fitted to every area (none is 10 times farther from the others' middle
    # than they typically are), each speck marked by a dot; the go-to list reaches each group
    # at a readable scale (issue 48: not 1,900 km of specks alone).
    spec = m.parcelsearch_spec
    assert spec.focus is None and spec.listed == ()
    centre, zoom = view_of(spec.bounds)
    assert m.center == pytest.approx(list(centre)) and m.zoom == zoom
    dots = layers["Area markers"].data["features"]
    assert len(dots) == len(demo_areas)  # the four searched and the one skipped
    for group in spec.views:
        _, readable = view_of(group.bounds)
        shown = [a for a in demo_areas.geometry if group.bounds[0] <= a.centroid.x
                 <= group.bounds[2] and group.bounds[1] <= a.centroid.y <= group.bounds[3]]
        assert shown and min(pixels(box(a), readable) for a in shown) >= MIN_PX


def test_a_saved_map_draws_offline_by_default(make_client, demo_areas, tmp_path: Path) -> None:
    result = parcelsearch.search(demo_areas, client=make_client(), active_markets_only=True,
                                 progress=False)
    page = save_html(result, tmp_path / "map.html", areas=demo_areas).read_text()
    data = json.loads(re.search(r'<script id="ps-spec" type="application/json">(.*?)</script>',
                                page, re.S)[1])  # type: ignore[index]
    assert data["tiles"] is None and "tile.openstreetmap.org" not in page
    assert data["context"]["name"] == CONTEXT_NAME and data["context"]["geojson"]["features"]
