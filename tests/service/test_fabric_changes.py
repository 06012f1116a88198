"""Next month's fabric: deterministic edits, the truth they return, clustered or scattered."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from parcelsearch_service import synth
from parcelsearch_service.fabric_changes import EDITS, next_month
from parcelsearch_service.store import ParcelStore, load_parcels


@pytest.fixture(scope="module")
def demo() -> object:
    return load_parcels(None)


def test_the_truth_is_exactly_the_groups_that_appeared_and_vanished(demo: object) -> None:
    month = next_month(demo, 0.02, swaps=4, seed=5)
    before, after = set(demo.group_id), set(month.parcels.group_id)
    truth = month.truth
    assert set(truth.loc[truth.change == "removed", "group_id"]) == before - after
    assert set(truth.loc[truth.change == "added", "group_id"]) == after - before
    assert set(truth.edit) == {*EDITS, "swap"}  # four neighbourhoods, one edit each
    assert (truth.edit == "swap").sum() == 8  # 4 swaps: one removed, one added each
    load_parcels(month.parcels)  # the new fabric passes the service's checks


def test_same_arguments_same_fabric(demo: object) -> None:
    one, two = (next_month(demo, 0.01, layout="scattered", seed=9) for _ in range(2))
    assert one.truth.equals(two.truth)
    assert one.parcels.geometry.geom_equals_exact(two.parcels.geometry, 0).all()
    assert not next_month(demo, 0.01, layout="scattered", seed=10).truth.equals(one.truth)


def test_each_edit_changes_counts_as_it_says(demo: object) -> None:
    # (edit, parcels gained per edit, the change counted once per edit)
    for edit, delta, once in (
        ("split", 1, "removed"),
        ("merge", -1, "added"),
        ("remove", -1, "removed"),
        ("add", 1, "added"),
    ):
        month = next_month(demo, 0.002, edits=[edit], layout="scattered", seed=2)
        edits = int((month.truth.change == once).sum())
        assert edits == round(0.002 * len(demo))
        assert len(month.parcels) - len(demo) == delta * edits, edit
        assert set(month.truth.edit) == {edit}


def test_split_halves_cover_the_lot(demo: object) -> None:
    month = next_month(demo, 0.001, edits=["split"], layout="scattered", seed=3)
    removed, first, second = month.truth.iloc[:3].itertuples()  # one split, in order
    lot = demo.set_index("parcel_id").geometry[removed.parcel_id]
    new = month.parcels.set_index("group_id").geometry
    halves = [new[first.group_id], new[second.group_id]]
    assert first.parcel_id == removed.parcel_id and second.parcel_id > demo.parcel_id.max()
    assert halves[0].area == pytest.approx(lot.area / 2, rel=1e-6)
    assert shapely.union_all(halves).symmetric_difference(lot).area < 1e-9 * lot.area


def test_clustered_edits_are_closer_together_than_scattered(demo: object) -> None:
    def spread(layout: str) -> float:
        month = next_month(demo, 0.02, layout=layout, clusters=2, seed=4)
        ids = month.truth[month.truth.change == "removed"].parcel_id
        points = shapely.point_on_surface(demo.set_index("parcel_id").geometry[ids].array)
        xy = shapely.get_coordinates(points)
        gaps = np.hypot(*(xy[:, None, :] - xy[None, :, :]).transpose(2, 0, 1))
        np.fill_diagonal(gaps, np.inf)
        return float(np.median(gaps.min(axis=1)))  # degrees to the nearest other edit

    assert spread("clustered") < spread("scattered")


def test_swaps_land_on_the_parcels_asked(demo: object) -> None:
    single = demo[~demo.group_id.duplicated(keep=False)].parcel_id.iloc[[10, 20]].tolist()
    month = next_month(demo, 0.0, swap_parcels=single)
    assert sorted(month.truth.parcel_id.unique()) == sorted(single)
    assert len(month.parcels) == len(demo)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate": 1.5}, "rate must be between 0 and 1"),
        ({"layout": "ring"}, "layout must be one of clustered, scattered"),
        ({"edits": ["burn"]}, "edits must be some of"),
        ({"swap_parcels": [-1]}, "swap parcel -1 is not a parcel alone in its group"),
    ],
)
def test_bad_arguments_say_the_fix(demo: object, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        next_month(demo, **{"rate": 0.01, **kwargs})


def test_a_running_store_serves_the_new_fabric(demo: object) -> None:
    example = synth.example_fabric()
    store = ParcelStore(example.parcels)
    month = next_month(example.parcels, 0.05, seed=1)
    import json

    from parcelsearch_service.polygon import parse_polygon

    parsed = parse_polygon(json.dumps(example.ring))
    before = len(store.hits(parsed))
    assert store.replace(month.parcels) == len(month.parcels)
    after = store.hits(parsed)
    assert len(after) != before or month.truth.empty
    assert sorted(store.group_ids[after]) == sorted(
        month.parcels.set_index("parcel_id").group_id[store.parcel_ids[after]]
    )
