"""``gdf.parcels``: the toolkit as a GeoDataFrame accessor (thin: it calls the functions).

Importing this module registers the accessor; ``parcelsearch`` does so on first use of any
of its names, or at once when geopandas was imported first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import geopandas as gpd
import pandas as pd

from parcelsearch import maps, market_list
from parcelsearch._run import search_run as pipeline
from parcelsearch.client import Client
from parcelsearch.errors import Hint, InputError
from parcelsearch.planning import plans as planning
from parcelsearch.planning.areas import index_by_id

if TYPE_CHECKING:
    import ipyleaflet

    from parcelsearch.result import SearchResult

__all__ = ["ParcelsAccessor"]

P = ParamSpec("P")
R = TypeVar("R")


def _takes_as(
    function: Callable[Concatenate[Any, P], R],
) -> Callable[[Callable[..., R]], Callable[Concatenate[Any, P], R]]:
    """A method that hands its keywords on to ``function``, whose first argument (the areas)
    the accessor gives: typed for type checkers as ``function`` is (the ParamSpec), and
    signed as it is for :func:`inspect.signature` and :func:`help` (``__signature__``), the
    first parameter standing for ``self``. Its keywords are declared once, on ``function``."""
    signature = inspect.signature(function)
    first, *rest = signature.parameters.values()
    itself = first.replace(name="self", annotation=inspect.Parameter.empty)

    def sign(method: Callable[..., R]) -> Callable[Concatenate[Any, P], R]:
        method.__signature__ = signature.replace(parameters=[itself, *rest])  # type: ignore[attr-defined]
        return method

    return sign


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

    def plan(self, tolerance: float = 0.0, **kwargs: Any) -> planning.Plan:
        """The pieces a search would send, spending nothing; see :func:`parcelsearch.plan`."""
        return planning.plan(self._areas, tolerance, **kwargs)

    @_takes_as(pipeline.search)
    def search(self, **kwargs: Any) -> SearchResult:
        """Every GroupID inside each area; see :func:`parcelsearch.search`."""
        return pipeline.search(self._areas, **kwargs)

    def check_markets(
        self,
        column: str = "market",
        markets: Sequence[str] | None = None,
        client: Client | None = None,
    ) -> gpd.GeoDataFrame:
        """A copy with ``market_active`` and ``market_suggestion`` for each area's market.

        Give the active market names (``markets=``), or the ``client`` to ask for them: that
        spends one call (then the list is reused from the cache for a day).

        Raises
        ------
        InputError
            Neither ``markets`` nor ``client`` was given.
        """
        if markets is not None:
            return market_list.check_markets(self._areas, column, markets)
        if client is None:
            raise InputError(
                "checking markets needs the list of active markets",
                hints=[Hint("markets", phrase="give it with {knob} (one call, cached a day)")],
            )
        return market_list.check_markets(self._areas, column, market_list.markets(client))

    def map(self, id_column: str | None = None, **kwargs: Any) -> ipyleaflet.Map:
        """An ipyleaflet map of the study areas, labelled by their ids (``id_column``, else
        the rule of :func:`parcelsearch.plan`: an ``area_id`` column, else the index)."""
        frame, name = index_by_id(self._areas, id_column)
        return maps.areas_map(frame, id_name=name, **kwargs)
