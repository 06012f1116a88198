"""The result's frames: the parcels found, deduplicated once, and the tiles sent, with the
marks of parcels that may lie outside their area or were found in a band two pieces share.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import geopandas as gpd
import pandas as pd
import shapely
import shapely.prepared

from parcelsearch._run.piece_state import PieceState
from parcelsearch.planning.plans import Plan


def _frames(plan: Plan, states: list[PieceState]) -> tuple[pd.DataFrame, gpd.GeoDataFrame]:
    """Deduplicate (area id, group_id) once, and tabulate the tiles sent."""
    id_name = plan.id_name
    areas: list[Hashable] = []
    groups: list[str] = []
    rows = []
    for state in states:
        piece = state.piece
        for data in state.data.values():
            areas.extend([piece.area_id] * len(data))
            groups.extend(data)
        rows.append(
            {
                id_name: piece.area_id,
                "piece_id": piece.piece_id,
                "rows": state.rows,
                "pages": state.pages,
                "pages_fetched": len(state.data),
                "calls": state.calls,
                "cached_pages": state.cached_pages,
                "from_cache": bool(state.data) and state.calls == 0,
                "geometry": piece.geometry,
            }
        )
    id_values = pd.Series(areas, dtype=plan.areas.index.dtype if areas else object)
    ids = (
        pd.DataFrame({id_name: id_values, "group_id": pd.Series(groups, dtype="string")})
        .drop_duplicates()
        .sort_values([id_name, "group_id"], kind="stable")
        .reset_index(drop=True)
    )
    shared = _found_in_shared_band(plan, states, ids)
    if plan.tolerance > 0:
        ids["may_lie_outside"] = _may_lie_outside(plan, states, ids) | shared
    elif shared.any():
        ids["may_lie_outside"] = shared
    columns = [
        id_name,
        "piece_id",
        "rows",
        "pages",
        "pages_fetched",
        "calls",
        "cached_pages",
        "from_cache",
        "geometry",
    ]
    tiles = gpd.GeoDataFrame(
        pd.DataFrame(rows, columns=columns), geometry="geometry", crs="EPSG:4326"
    )
    for column in ("rows", "pages"):
        tiles[column] = tiles[column].astype("Int64")
    for column in ("piece_id", "pages_fetched", "calls", "cached_pages"):
        tiles[column] = tiles[column].astype("int64")
    tiles["from_cache"] = tiles["from_cache"].astype(bool)
    return ids, tiles


#: How far (degrees) a piece may reach beyond its area and still count as inside it: the
#: exact pieces' allowance (two 6-decimal grid steps) and a half.
_INSIDE_REACH = 2.5e-6


def _may_lie_outside(plan: Plan, states: list[PieceState], ids: pd.DataFrame) -> pd.Series:
    """With a tolerance: for each (area, GroupID), whether every piece that found it reaches
    beyond its area (so its parcel may lie up to the tolerance outside); False when a piece
    within the area found it. The search answers GroupIDs, not positions: a True is "may".
    """
    inside: set[tuple[Hashable, str]] = set()
    grown: dict[Hashable, Any] = {}
    for state in states:
        piece = state.piece
        if not state.data:
            continue
        if piece.area_id not in grown:
            grown[piece.area_id] = shapely.prepared.prep(
                plan.areas.geometry.loc[piece.area_id].buffer(_INSIDE_REACH)
            )
        if grown[piece.area_id].contains(piece.geometry):
            inside.update((piece.area_id, g) for data in state.data.values() for g in data)
    keys = zip(ids[plan.id_name], ids["group_id"].astype(str), strict=True)
    return pd.Series([k not in inside for k in keys], index=ids.index, dtype=bool)


def _found_in_shared_band(plan: Plan, states: list[PieceState], ids: pd.DataFrame) -> pd.Series:
    """For each (area, GroupID): True when the GroupID is listed for another area too and
    the pieces that found it do not meet wholly inside this area.

    Under the point rule a parcel's point lies in every piece that found it, so one listed
    for an area it lies beyond (in the band its pieces reach past the boundary, at most two
    grid steps) and for a neighbour is always marked. A True is "may": a parcel a
    millimetre inside is marked too, as the service answers GroupIDs, not positions; where
    areas overlap, a GroupID they share is marked unless the pieces that found it meet
    wholly inside the area.
    """
    areas_per_id = ids.groupby("group_id", sort=False)[plan.id_name].transform("size")
    shared = (areas_per_id > 1).to_numpy(copy=True)
    twice = ids.index[shared]
    if not len(twice):
        return pd.Series(shared, index=ids.index, dtype=bool)
    found = _finders(states, set(ids.loc[twice, "group_id"].astype(str)))
    meets: dict[tuple[int, ...], Any] = {}
    areas: dict[Hashable, Any] = {}
    answers: dict[tuple[Hashable, tuple[int, ...]], bool] = {}
    marks = []
    for area_id, group in zip(
        ids.loc[twice, plan.id_name], ids.loc[twice, "group_id"].astype(str), strict=True
    ):
        found_by = found[group]
        if (area_id, found_by) not in answers:
            if found_by not in meets:
                meets[found_by] = shapely.intersection_all(
                    [states[number].piece.geometry for number in found_by]
                )
            if area_id not in areas:
                areas[area_id] = shapely.prepared.prep(plan.areas.geometry.loc[area_id])
            answers[area_id, found_by] = not areas[area_id].contains(meets[found_by])
        marks.append(answers[area_id, found_by])
    shared[shared] = marks
    return pd.Series(shared, index=ids.index, dtype=bool)


def _finders(states: list[PieceState], groups: set[str]) -> dict[str, tuple[int, ...]]:
    """For each of ``groups``, the numbers (in ``states``) of the pieces that found it."""
    finders: dict[str, set[int]] = {}
    for number, state in enumerate(states):
        for data in state.data.values():
            for group in groups.intersection(data):
                finders.setdefault(group, set()).add(number)
    return {group: tuple(sorted(numbers)) for group, numbers in finders.items()}
