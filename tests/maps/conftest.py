"""Stand-ins for the maps tests: study areas, a plan and a result, without a service."""

from __future__ import annotations

from types import SimpleNamespace

import geopandas as gpd
import pandas as pd
import pytest
from shapely.geometry import MultiPolygon, Polygon, box

from ._helpers import EVIL


@pytest.fixture
def areas() -> gpd.GeoDataFrame:
    """Four study areas: a square, one with a hole, a two-part one and one to be skipped."""
    holed = Polygon(box(1, 0, 2, 1).exterior.coords, [box(1.4, 0.4, 1.6, 0.6).exterior.coords])
    return gpd.GeoDataFrame(
        {
            "name": ["North", EVIL, "Twin sites", "Ranch"],
            "market": ["Abilene", "Abilene", "Boise", "Marfa"],
        },
        geometry=[
            box(0, 0, 1, 1),
            holed,
            MultiPolygon([box(3, 0, 3.5, 0.5), box(4, 0, 4.5, 0.5)]),
            box(6, 6, 7, 7),
        ],
        index=pd.Index(["a1", "a2", "a3", "a4"], name="area_id"),
        crs=4326,
    )


@pytest.fixture
def plan(areas: gpd.GeoDataFrame) -> SimpleNamespace:
    """A plan over the first three areas: a1 in two halves, a2 whole, a3 one piece per part."""
    geometry = [
        box(0, 0, 0.5, 1),
        box(0.5, 0, 1, 1),
        areas.geometry["a2"],
        box(3, 0, 3.5, 0.5),
        box(4, 0, 4.5, 0.5),
    ]
    tiles = gpd.GeoDataFrame(
        {
            "area_id": ["a1", "a1", "a2", "a3", "a3"],
            "piece_id": [0, 1, 0, 0, 1],
            "vertices": [5, 5, 10, 5, 5],
            "request_bytes": [310, 312, 6840, 309, 311],
            "min_calls": [1, 1, 1, 1, 1],
        },
        geometry=geometry,
        crs=4326,
    )
    return SimpleNamespace(areas=areas.loc[["a1", "a2", "a3"]], id_name="area_id", tiles=tiles)


@pytest.fixture
def result(plan: SimpleNamespace) -> SimpleNamespace:
    """Matched 0, 12, 250 (3 pages, 1 cached), 40 (all cached) parcels; one piece not searched."""
    tiles = plan.tiles[["area_id", "piece_id", "geometry"]].copy()
    tiles["rows"] = pd.array([0, 12, 250, 40, None], dtype="Int64")
    tiles["pages"] = pd.array([1, 1, 3, 1, None], dtype="Int64")
    tiles["pages_fetched"] = [1, 1, 3, 1, 0]
    tiles["calls"] = [1, 1, 2, 0, 0]
    tiles["cached_pages"] = [0, 0, 1, 1, 0]
    tiles["from_cache"] = [False, False, False, True, False]
    skipped = pd.DataFrame(
        {"market": ["Marfa"], "reason": ["market not active"], "suggestion": ["Alpine"]},
        index=pd.Index(["a4"], name="area_id"),
    )
    return SimpleNamespace(plan=plan, id_name="area_id", tiles=tiles, skipped=skipped)
