"""Refresh and diff against the reference service over HTTPS, its request log the witness.

The service starts on the demo parcels; "next month" is derived with known changes
(:func:`parcelsearch_service.fabric_changes.next_month`) and swapped in while it runs
(:meth:`ParcelStore.replace`), keys and counters kept.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest

import parcelsearch
import parcelsearch.comparison
import parcelsearch.stores.local.history
from parcelsearch.notices import PartialResultWarning
from parcelsearch_service.fabric_changes import EDITS, NextMonth, next_month
from parcelsearch_service.polygon import parse_polygon
from parcelsearch_service.server import RunningService
from parcelsearch_service.store import ParcelStore, load_parcels

PieceKey = tuple[Hashable, int]


class Month:
    """One service, one key, a client per cache folder, and the request log."""

    def __init__(self, svc: RunningService, folder: Path, name: str) -> None:
        self.svc, self.folder, self.name = svc, folder, name
        self.key = svc.keys.create(name, key_type="production", quota=100_000)

    def client(self, cache: str) -> parcelsearch.Client:
        return parcelsearch.Client(
            api_key=self.key,
            base_url=self.svc.base_url,
            ca_bundle=str(self.svc.ca_path),
            cache_dir=self.folder / cache,
        )

    def log(self) -> pd.DataFrame:
        return self.svc.keys.requests(self.name)

    def search(self, cache: str, **kwargs: Any) -> parcelsearch.SearchResult:
        kwargs.setdefault("progress", False)
        return parcelsearch.search(AREAS(), client=self.client(cache), **kwargs)


def AREAS() -> gpd.GeoDataFrame:  # noqa: N802 - reads like the constant it is
    return parcelsearch.demo_areas().set_index("area_id")


def _store(svc: RunningService) -> ParcelStore:
    assert isinstance(svc.store, ParcelStore)
    return svc.store


def piece_parcels(
    store: ParcelStore, result: parcelsearch.SearchResult
) -> dict[PieceKey, list[int]]:
    """The parcel ids each piece matches now, in the service's order."""
    return {
        (p.area_id, p.piece_id): [
            int(i) for i in store.parcel_ids[store.hits(parse_polygon(p.polygon_json))]
        ]
        for p in result.plan.pieces
    }


@pytest.fixture
def month(
    start_own_service: Callable[..., RunningService], tmp_path: Path, request: pytest.FixtureRequest
) -> Month:
    return Month(start_own_service(), tmp_path, request.node.name[:40])


@pytest.fixture(scope="module")
def demo_parcels() -> gpd.GeoDataFrame:
    return load_parcels(None)


def _changed_month(
    demo_parcels: gpd.GeoDataFrame, first: parcelsearch.SearchResult, store: ParcelStore
) -> tuple[NextMonth, set[PieceKey]]:
    """Clustered edits of every kind (four neighbourhoods), plus swaps deep (page 2+) in two
    multi-page pieces that no other edit touches; returns the month and those two pieces."""
    edits = next_month(demo_parcels, 0.02, layout="clustered", seed=0)
    touched = set(edits.truth["parcel_id"])
    swaps: list[int] = []
    quiet: set[PieceKey] = set()
    for key, ids in piece_parcels(store, first).items():
        if len(ids) > 100 and not touched & set(ids) and len(quiet) < 2:
            swaps.append(ids[150 if len(ids) > 150 else 120])
            quiet.add(key)
    assert len(quiet) == 2, "the seed leaves two multi-page pieces untouched"
    return next_month(demo_parcels, 0.02, layout="clustered", seed=0, swap_parcels=swaps), quiet


def _map_layers(path: Path) -> dict[str, Any]:
    """The GeoJSON of each layer of an offline HTML map, by name."""
    page = path.read_text(encoding="utf-8")
    data = json.loads(
        page.split('<script id="ps-spec" type="application/json">')[1].split("</script>")[0]
    )
    return {layer["name"]: layer["geojson"] for layer in data["layers"]}


def _rows(diff: Any) -> set[tuple[Any, str, str]]:
    return {(a, str(g), c) for a, g, c in diff.rows.itertuples(index=False)}


@pytest.mark.slow
def test_no_change_costs_one_call_per_piece_and_returns_the_same_ids(month: Month) -> None:
    first = month.search("cache")
    pieces = len(first.plan.pieces)
    assert len(month.log()) == first.calls > pieces  # some pieces have several pages
    again = month.search("cache", refresh="changed", verify_sample=0)
    log = month.log().iloc[first.calls :]
    assert len(log) == again.calls == pieces and (log["page"] == 1).all()
    assert again.ids.equals(first.ids)
    assert not again.tiles["changed"].any()
    assert set(again.tiles["status"]) <= {"read", "inferred"}  # one-page pieces are read whole
    assert again.diff(first).rows.empty
    history = parcelsearch.runs(month.folder / "cache")
    assert history["mode"].tolist() == ["changed", "cached"]
    assert history["key"].iloc[0] == month.client("cache").fingerprint
    assert month.key not in history.to_json()  # the key's fingerprint, never the key


@pytest.mark.slow
def test_the_default_refresh_keeps_its_promise_and_prices_the_sample(
    month: Month, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: with no change, the default --refresh changed (no --verify-sample) spends
    exactly one call per piece, in Python and on the command line; a sample asked for is
    priced before spending."""
    from parcelsearch.cli import main

    first = month.search("cache")
    pieces = len(first.plan.pieces)
    again = month.search("cache", refresh="changed")  # the default: no verify sample
    assert again.calls == pieces == len(month.log()) - first.calls
    assert again.verification["sampled"] == 0
    AREAS().to_file(month.folder / "areas.gpkg")
    monkeypatch.setenv("PARCELSEARCH_API_KEY", month.key)
    spent = len(month.log())
    base = [
        "search",
        str(month.folder / "areas.gpkg"),
        "--id-column",
        "area_id",
        "--out",
        str(month.folder / "new.parquet"),
        "--refresh",
        "changed",
        "--base-url",
        month.svc.base_url,
        "--ca-bundle",
        str(month.svc.ca_path),
        "--cache-dir",
        str(month.folder / "cache"),
    ]
    assert main(base) == 0
    err = capsys.readouterr().err
    assert len(month.log()) - spent == pieces
    worst = int((first.tiles["pages"] - 1).clip(lower=0).sum())
    assert (
        f"price: about {pieces} calls\nexact: {pieces} for page 1 of {pieces} pieces\n"
        f"estimated: about 0 for later pages, from what earlier runs found; {worst} if "
        "every piece changed\n" in err
    )
    spent = len(month.log())
    assert main([*base, "--verify-sample", "1"]) == 0
    err = capsys.readouterr().err
    assert "of the later pages are the verify sample, dropped first when short" in err
    assert len(month.log()) - spent == pieces + worst  # every inferred piece sampled


@pytest.mark.slow
def test_without_a_history_the_cached_pages_are_the_last_record(month: Month) -> None:
    first = month.search("cache", ledger=False)  # cached, but recorded nowhere
    assert first.run_id == "" and not (month.folder / "cache" / "ledger.sqlite").exists()
    again = month.search("cache", refresh="changed", verify_sample=0)
    assert again.calls == len(first.plan.pieces) == len(month.log()) - first.calls
    assert again.ids.equals(first.ids) and "inferred" in set(again.tiles["status"])


@pytest.mark.slow
def test_the_verify_sample_spends_exactly_what_it_reports(month: Month) -> None:
    first = month.search("cache")
    again = month.search("cache", refresh="changed", verify_sample=1.0)
    sampled = again.tiles[again.tiles["status"] == "sampled"]
    assert len(sampled) == again.verification["sampled"] > 0
    assert again.calls == len(first.plan.pieces) + int((sampled["pages"] - 1).sum())
    assert len(month.log()) == first.calls + again.calls
    assert again.verification["found_changed"] == 0
    assert again.verification["missed_interval"] == [0.0, 0.0]  # every inferred piece sampled


@pytest.mark.slow
def test_known_changes_are_found_except_swaps_inference_missed(
    month: Month, demo_parcels: gpd.GeoDataFrame
) -> None:
    first = month.search("cache")
    for copy in ("sampled", "truth"):
        shutil.copytree(month.folder / "cache", month.folder / copy)
    changes, quiet = _changed_month(demo_parcels, first, _store(month.svc))
    used_before = month.svc.keys.get(month.name)["used_lifetime"]
    _store(month.svc).replace(changes.parcels)
    assert month.svc.keys.get(month.name)["used_lifetime"] == used_before  # counters kept

    spent = len(month.log())
    inferred = month.search("cache", refresh="changed", verify_sample=0)
    assert len(month.log()) - spent == inferred.calls
    truth = month.search("truth", refresh="all")
    exact = _rows(truth.diff(first))
    assert {g for _, g, _ in exact} <= changes.changed  # the fabric's truth, seen in the areas
    assert {g for _, g, _ in exact} & changes.of_edits(EDITS)  # count-changing edits in areas

    found = _rows(inferred.diff(first))
    assert found <= exact
    missed = exact - found
    swapped = changes.of_edits(["swap"])
    assert missed and {g for _, g, _ in missed} <= swapped
    tiles = inferred.tiles.set_index(["area_id", "piece_id"])
    assert all(tiles.loc[key, "status"] == "inferred" for key in quiet)
    missed_pieces = len(quiet)
    low, high = inferred.verification["missed_interval"]
    assert low <= missed_pieces <= high  # within the run's own estimate (no sample: 0..all)
    # Every change in a re-read piece is in the diff: the pieces re-read hold none missed.
    reread = tiles.index[tiles["status"] == "read"]
    now = piece_parcels(_store(month.svc), first)
    by_parcel = changes.parcels.set_index("parcel_id")["group_id"]
    missed_ids = {g for _, g, _ in missed}
    for key in reread:
        assert not missed_ids & set(by_parcel[now[key]])

    sampled = month.search("sampled", refresh="changed", verify_sample=1.0)
    assert _rows(sampled.diff(first)) == exact  # every inferred piece re-read: nothing missed
    assert sampled.verification["found_changed"] == len(quiet)
    assert sampled.verification["missed_interval"] == [0.0, 0.0]
    assert sampled.ids.equals(truth.ids)


@pytest.mark.slow
def test_a_budget_too_small_for_phase_2_refuses_and_loses_nothing(
    month: Month, demo_parcels: gpd.GeoDataFrame
) -> None:
    first = month.search("cache")
    pieces = len(first.plan.pieces)
    changes = next_month(demo_parcels, 0.02, layout="clustered", seed=0)  # no swaps: all seen
    _store(month.svc).replace(changes.parcels)
    shutil.copytree(month.folder / "cache", month.folder / "sampled")
    spent = len(month.log())
    with pytest.raises(
        parcelsearch.QuotaWouldExceedError, match="needs exactly .* more call.* to finish"
    ) as refused:
        month.search("cache", refresh="changed", verify_sample=0, budget=pieces + 1)
    needed = refused.value.needed
    assert len(month.log()) - spent == pieces  # phase 1 only, as a first search
    assert needed > 1
    # Resuming spends exactly the calls said: page 1s cached, stale later pages unused.
    resumed = month.search("cache", budget=needed)
    assert resumed.calls == needed == len(month.log()) - spent - pieces
    truth = month.search("truth", refresh="all")
    assert resumed.ids.equals(truth.ids)
    assert _rows(resumed.diff(first)) == _rows(truth.diff(first))
    # With a verify sample that does not fit, the sample goes first and the refresh finishes.
    spent = len(month.log())
    sampled = month.search("sampled", refresh="changed", verify_sample=1.0, budget=pieces + needed)
    assert sampled.calls == pieces + needed == len(month.log()) - spent
    assert "budget" in sampled.verification["sample_dropped"]
    assert sampled.verification["sampled"] == 0 and sampled.ids.equals(truth.ids)


@pytest.mark.slow
def test_allow_partial_finishes_whole_areas_as_a_first_search_does(
    month: Month, demo_parcels: gpd.GeoDataFrame
) -> None:
    first = month.search("cache")
    pieces = len(first.plan.pieces)
    changes, _ = _changed_month(demo_parcels, first, _store(month.svc))
    _store(month.svc).replace(changes.parcels)
    with pytest.warns(PartialResultWarning):  # returned, not raised (issue 49)
        partial = month.search(
            "cache", refresh="changed", verify_sample=0, budget=pieces + 1, allow_partial=True
        )
    assert isinstance(partial, parcelsearch.SearchResult) and not partial.complete
    assert partial.calls <= pieces + 1
    diff = partial.diff(first)
    assert set(diff.rows["area_id"]) <= set(partial.areas_complete or [])


@pytest.mark.slow
def test_search_runs_and_diff_on_the_command_line(
    month: Month,
    demo_parcels: gpd.GeoDataFrame,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from parcelsearch.cli import main

    first = month.search("cache")
    changes, _ = _changed_month(demo_parcels, first, _store(month.svc))
    _store(month.svc).replace(changes.parcels)
    cache = str(month.folder / "cache")
    AREAS().to_file(month.folder / "areas.gpkg")
    monkeypatch.setenv("PARCELSEARCH_API_KEY", month.key)
    spent = len(month.log())
    assert (
        main(
            [
                "search",
                str(month.folder / "areas.gpkg"),
                "--id-column",
                "area_id",
                "--out",
                str(month.folder / "new.parquet"),
                "--refresh",
                "changed",
                "--verify-sample",
                "0",
                "--quiet",
                "--base-url",
                month.svc.base_url,
                "--ca-bundle",
                str(month.svc.ca_path),
                "--cache-dir",
                cache,
                "--out-map",
                str(month.folder / "map.html"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "unchanged by inference" in printed and "changed pieces missed: unknown" in printed
    # The offline map (issue 41): the pieces, what each found, the changed pieces outlined.
    layers = _map_layers(month.folder / "map.html")
    new = pd.read_parquet(month.folder / "new.parquet")
    assert f"map written to {month.folder / 'map.html'}" in printed
    changed = layers["Changed pieces"]["features"]
    assert len(changed) == parcelsearch.runs(month.folder / "cache")["changed"].iloc[0] > 0
    assert len(layers["Pieces"]["features"]) == len(first.plan.pieces) and len(new)
    assert month.log().iloc[spent:]["page"].eq(1).sum() == len(first.plan.pieces)
    assert main(["runs", "--json", "--cache-dir", cache]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in listed][1:] == [first.run_id]
    second_id = listed[0]["run_id"]
    second = parcelsearch.comparison.Side.of_file(month.folder / "new.parquet")
    assert parcelsearch.comparison.compare(first._side("the first month"), second).rows.equals(
        parcelsearch.comparison.compare(
            first._side("the first month"),
            parcelsearch.comparison.Side.of_run(
                parcelsearch.stores.local.history.RunHistory(
                    month.folder / "cache" / "ledger.sqlite"
                ),
                second_id,
            ),
        ).rows
    )
    out = month.folder / "diff.csv"
    assert (
        main(["diff", first.run_id[:10], second_id[:10], "--cache-dir", cache, "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    expected = parcelsearch.comparison.compare(first._side("the first month"), second)
    assert f"{expected.added:,} GroupIDs added" in printed
    rows = pd.read_csv(out)
    assert len(rows) == len(expected.rows)
    assert main(["diff", "nope", second_id, "--cache-dir", cache]) == 2
    assert "no run with id 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_postgis_parcels_replaced_while_serving(
    postgres: Any,
    start_own_service: Callable[..., RunningService],
    tmp_path: Path,
    demo_parcels: gpd.GeoDataFrame,
) -> None:
    """Both stores in PostgreSQL: the parcels table replaced under a running service (one
    transaction), its hit lists forgotten, keys and counters kept."""
    from parcelsearch_service.postgis import PostgisParcelStore, load_parcels_into

    url = postgres.database("refresh")
    load_parcels_into(None, url)
    svc = start_own_service(parcels=url, keys=url)
    assert isinstance(svc.store, PostgisParcelStore)
    month = Month(svc, tmp_path, "postgis-replace")
    first = month.search("cache")
    changes = next_month(demo_parcels, 0.02, layout="clustered", seed=0)
    used = svc.keys.get(month.name)["used_lifetime"]
    assert svc.store.replace(changes.parcels) == len(changes.parcels) == len(svc.store)
    assert svc.keys.get(month.name)["used_lifetime"] == used == first.calls
    again = month.search("cache", refresh="changed", verify_sample=0)
    truth = month.search("truth", refresh="all")
    assert again.ids.equals(truth.ids) and not again.ids.equals(first.ids)
    assert len(month.log()) == first.calls + again.calls + truth.calls
    assert again.calls < truth.calls
