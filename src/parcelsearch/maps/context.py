"""The offline context layer: streets and blocks (or any outlines) under the map's layers.

Without the internet there are no tiles; a small GeoDataFrame of context shapes (for the demo,
the blocks of the service's demo fabric, see :func:`parcelsearch.demo.demo_context`) keeps the
map from being a grey void. Only the shapes near the map's first views are kept, so the page
stays small whatever the context's extent.
"""

from __future__ import annotations

from collections.abc import Sequence

import geopandas as gpd
import shapely

from parcelsearch.maps.features import geometry_json, to_wgs84
from parcelsearch.maps.spec import CONTEXT_STYLE, Bounds, LayerSpec

__all__ = ["CONTEXT_NAME", "context_layer"]

CONTEXT_NAME = "Context (offline)"
#: Context is kept this far around each view, as a share of the view's larger side.
MARGIN = 0.5


def _near(bounds: Bounds) -> shapely.Geometry:
    west, south, east, north = bounds
    pad = max(east - west, north - south, 1e-3) * MARGIN
    return shapely.box(west - pad, south - pad, east + pad, north + pad)


def context_layer(context: gpd.GeoDataFrame, views: Sequence[Bounds]) -> LayerSpec | None:
    """The context shapes near ``views`` as a layer, or None when none is near.

    Parameters
    ----------
    context
        Shapes to draw underneath (any CRS; shown in EPSG:4326), e.g. blocks or outlines.
    views
        The bounds of the map's first views.
    """
    frame = to_wgs84(context)
    if not views or frame.empty:
        return None
    hits = frame.sindex.query(shapely.union_all([_near(b) for b in views]),
                              predicate="intersects")
    if len(hits) == 0:
        return None
    features = [
        {"type": "Feature", "geometry": geometry_json(geom),
         "properties": {"style": dict(CONTEXT_STYLE)}}
        for geom in frame.geometry.iloc[sorted(hits)]
    ]
    return LayerSpec(CONTEXT_NAME, {"type": "FeatureCollection", "features": features})
