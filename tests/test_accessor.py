"""``gdf.parcels``: the same answers as the functions it wraps."""

from __future__ import annotations

import pandas as pd
import pytest

import parcelsearch


def test_plan_matches_function() -> None:
    areas = parcelsearch.demo_areas()
    via_accessor = areas.parcels.plan(id_column="area_id")
    via_function = parcelsearch.plan(areas, id_column="area_id")
    assert [p.polygon_json for p in via_accessor.pieces] == [
        p.polygon_json for p in via_function.pieces
    ]


def test_plain_dataframe_is_told_what_to_do() -> None:
    with pytest.raises(AttributeError, match="needs a GeoDataFrame"):
        _ = pd.DataFrame({"a": [1]}).parcels


def test_check_markets_with_a_given_list() -> None:
    areas = parcelsearch.demo_areas()
    checked = areas.parcels.check_markets("market", markets=["Abilene, TX", "Boise, ID"])
    assert checked["market_active"].tolist() == [True, True, False, True, False]


def test_the_accessors_search_is_signed_as_search_without_the_areas() -> None:
    """``gdf.parcels.search`` takes what :func:`parcelsearch.search` takes but the areas:
    its signature (what ``help`` and editors show) is search's, read from it, never
    repeated; and what it is given reaches the search (a keyword search has not: refused
    by name)."""
    import inspect

    areas = parcelsearch.demo_areas()
    searched = inspect.signature(parcelsearch.search)
    areas_parameter, *rest = searched.parameters.values()
    assert areas_parameter.name == "areas"
    assert inspect.signature(areas.parcels.search) == searched.replace(parameters=rest)
    with pytest.raises(TypeError, match="budgett"):
        areas.parcels.search(budgett=3)
