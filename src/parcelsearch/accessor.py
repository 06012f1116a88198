"""``gdf.parcels``: the toolkit as a GeoDataFrame accessor (thin: it calls the functions)."""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import pandas as pd

__all__ = ["ParcelsAccessor"]


@pd.api.extensions.register_dataframe_accessor("parcels")
class ParcelsAccessor:
    """Plan, search, check markets and map study areas straight from a GeoDataFrame.

    Examples
    --------
    >>> import parcelsearch  # registers the accessor
    >>> areas.parcels.plan()  # doctest: +SKIP
    >>> areas.parcels.search(client=client)  # doctest: +SKIP
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        if not isinstance(frame, gpd.GeoDataFrame):
            raise AttributeError(
                "the .parcels accessor needs a GeoDataFrame of study areas; "
                "make one with geopandas.GeoDataFrame(df, geometry=..., crs=...)"
            )
        self._areas = frame

    def plan(self, tolerance: float = 0.0, **kwargs: Any) -> Any:
        """The pieces a search would send, spending nothing; see :func:`parcelsearch.plan`."""
        from parcelsearch.planning import plan

        return plan(self._areas, tolerance, **kwargs)

    def search(self, **kwargs: Any) -> Any:
        """Every GroupID inside each area; see :func:`parcelsearch.search`."""
        from parcelsearch.pipeline import search

        return search(self._areas, **kwargs)

    def check_markets(self, column: str = "market", markets: list[str] | None = None,
                      client: Any = None) -> gpd.GeoDataFrame:
        """A copy with ``market_active`` and ``market_suggestion`` for each area's market."""
        from parcelsearch.market_list import check_markets
        from parcelsearch.market_list import markets as fetch_markets

        names = markets if markets is not None else fetch_markets(client)
        return check_markets(self._areas, column, names)

    def map(self, id_column: str | None = None, **kwargs: Any) -> Any:
        """An ipyleaflet map of the study areas (``id_column`` names them, else the index)."""
        from parcelsearch.maps import areas_map

        return areas_map(self._areas, id_name=id_column, **kwargs)
