"""The run history in the team store: two members' runs visible to each other, and a
``refresh="changed"`` by one member comparing with the other's last run — against the
reference service over HTTPS (its request log the witness) and a throwaway PostgreSQL
cluster."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import geopandas as gpd
import psycopg
import pytest
from _cli import run

import parcelsearch
from parcelsearch.stores import open_history
from parcelsearch.stores.team import init_team
from parcelsearch.stores.team.migrations import MIGRATIONS
from parcelsearch.stores.team.store import SCHEMA, VERSION
from parcelsearch_service.fabric_changes import next_month
from parcelsearch_service.server import RunningService
from parcelsearch_service.store import ParcelStore, load_parcels


def test_a_version_1_store_is_upgraded_in_place_and_keeps_its_data(postgres: Any) -> None:
    url = postgres.database("team")
    with psycopg.connect(url, autocommit=True) as conn:  # a store made by the previous release
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        conn.execute(f"CREATE TABLE {SCHEMA}.meta (version integer NOT NULL)")
        conn.execute(MIGRATIONS[1])
        conn.execute(f"INSERT INTO {SCHEMA}.meta VALUES (1)")
        conn.execute(f"INSERT INTO {SCHEMA}.budgets VALUES ('alice', 7, 'month')")
    assert init_team(url) == (1, VERSION)
    assert init_team(url) == (VERSION, VERSION)
    with psycopg.connect(url) as conn:
        assert conn.execute(f"SELECT calls FROM {SCHEMA}.budgets").fetchall() == [(7,)]
    assert parcelsearch.runs(team=url).empty


@pytest.mark.slow
def test_members_see_each_others_runs_and_refresh_against_them(
    start_own_service: Callable[..., RunningService],
    team: str,
    tmp_path: Path,
    demo_areas: gpd.GeoDataFrame,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc = start_own_service()
    key = svc.keys.create("team-history", key_type="production", quota=100_000)

    def member(name: str, **kwargs: Any) -> parcelsearch.SearchResult:
        client = parcelsearch.Client(
            api_key=key,
            base_url=svc.base_url,
            ca_bundle=str(svc.ca_path),
            cache_dir=tmp_path / name,
        )
        return parcelsearch.search(
            demo_areas, client=client, team=team, user=name, progress=False, **kwargs
        )

    first = member("alice")
    listed = parcelsearch.runs(team=team)  # what bob sees: alice's run, by alice
    assert listed[["run_id", "member", "calls"]].values.tolist() == [
        [first.run_id, "alice", first.calls]
    ]
    assert parcelsearch.runs(tmp_path / "alice").empty  # recorded in the team store only
    # what bob's refresh will learn of every piece: alice's record (counts, one digest a
    # page; page 1 of an empty piece too)
    known, stale = open_history(tmp_path / "bob.sqlite", team=team, member="bob").previous(
        listed["base_url"][0], listed["path"][0], [p.polygon_json for p in first.plan.pieces]
    )
    assert not stale
    assert [(k.rows, k.pages, len(k.digests)) for k in known.values()] == [
        (int(r), int(p), max(int(p), 1))
        for r, p in zip(first.tiles["rows"], first.tiles["pages"], strict=True)
    ]

    month = next_month(load_parcels(None), rate=0.01, layout="clustered", clusters=2, seed=0)
    assert isinstance(svc.store, ParcelStore)
    svc.store.replace(month.parcels)
    calls_before = len(svc.keys.requests("team-history"))
    second = member("bob", refresh="changed", verify_sample=0)
    spent = len(svc.keys.requests("team-history")) - calls_before

    # bob has no history of his own: he compares with alice's run (the team's), so the
    # pieces alice read and nobody changed are inferred, and only changed pieces re-read.
    tiles = second.tiles
    changed = tiles[tiles["changed"].fillna(False).astype(bool)]
    assert set(tiles["status"]) == {"read", "inferred"}
    assert spent == second.calls == len(tiles) + int((changed["pages"] - 1).sum())
    assert spent < first.calls

    code, out, err = run(["runs", "--team", team, "--json"], capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["run_id"], r["member"], r["mode"]) for r in rows] == [
        (second.run_id, "bob", "changed"),
        (first.run_id, "alice", "cached"),
    ]
    assert rows[0]["inferred"] == int((tiles["status"] == "inferred").sum()) > 0
    monkeypatch.setenv("PARCELSEARCH_TEAM", team)  # the store searches default to, here too
    assert json.loads(run(["runs", "--json"], capsys)[1]) == rows

    # the two runs diff from the team store as the two results do, and find every change
    code, out, err = run(
        [
            "diff",
            first.run_id[:12],
            second.run_id[:12],
            "--team",
            team,
            "--out",
            str(tmp_path / "diff.csv"),
        ],
        capsys,
    )
    assert code == 0, err
    from_store = gpd.pd.read_csv(tmp_path / "diff.csv")
    expected = second.diff(first).rows
    assert sorted(map(tuple, from_store.astype(str).values.tolist())) == sorted(
        map(tuple, expected.astype(str).values.tolist())
    )
    truth = month.truth
    assert set(expected.loc[expected["change"] == "added", "group_id"]) == (
        set(truth.loc[truth["change"] == "added", "group_id"]) & set(second.group_ids)
    )
    assert set(expected.loc[expected["change"] == "removed", "group_id"]) == (
        set(truth.loc[truth["change"] == "removed", "group_id"]) & set(first.group_ids)
    )
