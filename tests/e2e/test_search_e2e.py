"""search() end to end against the reference service over HTTPS on 127.0.0.1."""

from __future__ import annotations

import pandas as pd
import pytest
import shapely

import parcelsearch
from parcelsearch.errors import QuotaExhaustedError, QuotaWouldExceedError
from parcelsearch_service.server import RunningService


def _groups_covering(service: RunningService, geom: shapely.Geometry) -> set[str]:
    """Ground truth from the parcels themselves: representative point inside or on ``geom``."""
    store = service.store
    return set(store.group_ids[shapely.intersects_xy(geom, store.x, store.y)])


#: Coordinates go out rounded to 6 decimals, grown so nothing inside is lost: parcels whose
#: representative point lies within this many degrees outside an area may be included.
ROUNDING = 2e-6


def test_search_returns_every_group_once(service, make_client, demo_areas) -> None:
    active = demo_areas.drop(index="marfa-ranch")
    result = parcelsearch.search(active, client=make_client(), progress=False)
    assert not result.ids.duplicated().any()
    assert result.ids.equals(result.ids.sort_values(["area_id", "group_id"]))
    for area_id, geom in active.geometry.items():
        got = set(result.ids.loc[result.ids["area_id"] == area_id, "group_id"])
        inside = _groups_covering(service, geom)
        maybe_in = _groups_covering(service, geom.buffer(ROUNDING))
        assert inside <= got <= maybe_in, area_id  # rounding never drops a parcel inside
        assert len(inside) > 50
    assert result.calls == int(result.tiles["pages"].sum())


def test_rerun_makes_zero_calls(service, make_client, demo_areas) -> None:
    client = make_client()
    first = parcelsearch.search(demo_areas, client=client, progress=False)
    again = parcelsearch.search(demo_areas, client=client, progress=False)
    assert again.calls == 0
    assert again.cached_pages == first.calls  # spike-arrest refusals are not calls
    pd.testing.assert_frame_equal(again.ids, first.ids)
    log = service.keys.requests(client.key_name)
    assert len(log) == again.cached_pages  # each page fetched once


def test_summary_and_tiles_add_up(make_client, demo_areas) -> None:
    result = parcelsearch.search(demo_areas, client=make_client(), progress=False)
    summary = result.summary()
    assert summary["calls"].sum() == result.calls
    assert (summary["group_ids"] <= summary["parcels"]).all()
    expected = {"area_id", "piece_id", "rows", "pages", "calls", "geometry"}
    assert set(result.tiles.columns) >= expected
    assert result.tiles.crs.to_epsg() == 4326
    assert result.zoning_cost("premium") == round(len(result.group_ids) * 0.69, 2)


def test_inactive_market_is_skipped_before_spending(service, make_client, demo_areas) -> None:
    client = make_client()
    result = parcelsearch.search(
        demo_areas, client=client, active_markets_only=True, progress=False
    )
    assert list(result.skipped.index) == ["marfa-ranch"]
    assert "marfa-ranch" not in set(result.ids["area_id"])
    log = service.keys.requests(client.key_name)
    assert (log["path"] == "/v1/markets").sum() == 1
    assert len(log) == result.calls  # the service log lists admitted requests only


def test_budget_stops_after_phase_one_and_resume_spends_nothing_twice(
    service, make_client, demo_areas
) -> None:
    client = make_client()
    pieces = len(parcelsearch.plan(demo_areas).pieces)
    with pytest.raises(
        QuotaWouldExceedError, match=r"needs exactly \d+ more calls to finish"
    ) as stopped:
        parcelsearch.search(demo_areas, client=client, budget=pieces, progress=False)
    partial = stopped.value.result
    assert partial is not None and not partial.complete
    log = service.keys.requests(client.key_name)
    assert int(log["counted"].sum()) == pieces == partial.calls  # page 1 of every piece
    assert (log["page"] == 1).all()
    final = parcelsearch.search(demo_areas, client=client, progress=False)
    assert final.cached_pages == pieces
    log = service.keys.requests(client.key_name)
    assert not log[log["counted"]].duplicated(["polygon_sha256", "page"]).any()
    assert int(log["counted"].sum()) == pieces + stopped.value.needed == pieces + final.calls


def test_budget_below_the_plan_is_refused_before_spending(service, make_client, demo_areas) -> None:
    client = make_client()
    with pytest.raises(QuotaWouldExceedError, match="nothing was spent") as refused:
        parcelsearch.search(demo_areas, client=client, budget=2, progress=False)
    assert refused.value.needed > 2
    assert service.keys.requests(client.key_name).empty


def test_known_quota_refuses_a_run_that_cannot_fit(service, make_client, demo_areas) -> None:
    client = make_client()
    with pytest.raises(QuotaWouldExceedError, match="has 3 left of its quota.*never resets"):
        parcelsearch.search(demo_areas, client=client, quota="3/lifetime", progress=False)
    assert service.keys.requests(client.key_name).empty


def test_accessor_matches_function(make_client, demo_areas) -> None:
    client = make_client()
    via_accessor = demo_areas.parcels.search(client=client, progress=False)
    via_function = parcelsearch.search(demo_areas, client=client, progress=False)
    pd.testing.assert_frame_equal(via_accessor.ids, via_function.ids)
    assert via_function.calls == 0


def test_result_writes_parquet(tmp_path, make_client, demo_areas) -> None:
    result = parcelsearch.search(demo_areas, client=make_client(), progress=False)
    back = pd.read_parquet(result.to_parquet(tmp_path / "ids.parquet"))
    assert list(back.columns) == ["area_id", "group_id"]
    assert len(back) == len(result.ids)
    assert "unique GroupIDs" in result._repr_html_()


def test_quota_violation_stops_the_run_and_keeps_what_was_fetched(
    service, make_client, demo_areas
) -> None:
    client = make_client("demo", key_overrides={"quota": 4})
    with pytest.raises(QuotaExhaustedError, match="Quota limit exceeded") as stopped:
        parcelsearch.search(demo_areas, client=client, progress=False)
    partial = stopped.value.result
    assert not partial.complete and partial.ids["group_id"].nunique() > 0
    log = service.keys.requests(client.key_name)
    assert int(log["counted"].sum()) == 4
    assert (~log["counted"]).sum() <= 2  # nothing is started once the refusal is seen


def test_result_map_draws_skipped_areas_from_the_result(make_client, demo_areas) -> None:
    result = parcelsearch.search(
        demo_areas, client=make_client(), active_markets_only=True, progress=False
    )
    names = [layer.name for layer in result.map(basemap=False).parcelsearch_spec.layers]
    assert "Skipped areas" in names and "Pieces" in names
