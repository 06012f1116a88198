"""The offline context layer: streets and blocks (or any outlines) under the map's layers.

Without the internet there are no tiles; a small GeoDataFrame of context shapes (for the demo,
the blocks of the service's demo fabric, see :func:`parcelsearch.demo.demo_context`) keeps the
map from being a grey void. Only the shapes near the map's first views are kept, so the page
stays small whatever the context's extent.

Every map draws the bundled context by default (``context="bundled"``: the demo fabric's
blocks, kept only where they are near the areas), so maps read offline with no argument; pass
your own frame, or ``None`` for no context.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Final, Literal, TypeAlias

import geopandas as gpd
import shapely

from parcelsearch._shared import data_path
from parcelsearch.errors import InputError
from parcelsearch.maps.features import geometry_json, to_wgs84
from parcelsearch.maps.spec import CONTEXT_STYLE, Bounds, LayerSpec

__all__ = ["BUNDLED", "CONTEXT_NAME", "Context", "context_layer", "resolve_context"]

#: The default ``context=`` of every map: the context shipped with the package.
BUNDLED: Final = "bundled"
#: What ``context=`` accepts: shapes, the bundled context, or None for none.
Context: TypeAlias = gpd.GeoDataFrame | Literal["bundled"] | None

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
    hits = frame.sindex.query(shapely.union_all([_near(b) for b in views]), predicate="intersects")
    if len(hits) == 0:
        return None
    features = [
        {
            "type": "Feature",
            "geometry": geometry_json(geom),
            "properties": {"style": dict(CONTEXT_STYLE)},
        }
        for geom in frame.geometry.iloc[sorted(hits)]
    ]
    return LayerSpec(CONTEXT_NAME, {"type": "FeatureCollection", "features": features})


@cache
def _bundled() -> gpd.GeoDataFrame:
    """The shipped context (the demo fabric's blocks), read once per process."""
    return gpd.read_file(data_path("demo_context.geojson"))


def resolve_context(context: Context) -> gpd.GeoDataFrame | None:
    """The context frame ``context=`` names: the bundled one for ``"bundled"``.

    Raises
    ------
    parcelsearch.errors.InputError
        When ``context`` is neither a GeoDataFrame, ``"bundled"`` nor None.
    """
    if context is None or isinstance(context, gpd.GeoDataFrame):
        return context
    if isinstance(context, str) and context == BUNDLED:
        return _bundled()
    raise InputError(
        f"context={context!r} is not a map context: pass a GeoDataFrame of "
        'shapes to draw underneath, "bundled" (the default) or None for none',
        field="context",
    )
