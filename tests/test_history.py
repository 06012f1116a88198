"""The run history: records, listing, the last complete record of a ring, stale pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import parcelsearch
from parcelsearch.stores.history import (
    Nearby,
    PieceRecord,
    RunRecord,
    page_digest,
    polygon_digest,
)
from parcelsearch.stores.local.history import RunHistory

RING = "[[0,0],[1,0],[1,1],[0,0]]"
OTHER = "[[2,0],[3,0],[3,1],[2,0]]"


def _run(
    run_id: str,
    finished: str,
    pieces: list[PieceRecord],
    *,
    mode: str = "cached",
    complete: bool = True,
) -> RunRecord:
    ids = pd.DataFrame({"area": ["a", "a", "b"], "group_id": ["1" * 17, "2" * 17, "3" * 17]})
    return RunRecord(
        run_id=run_id,
        started=finished,
        finished=finished,
        fingerprint="0123456789abcdef",
        base_url="https://x",
        path="/v1/search",
        areas_fingerprint="f" * 16,
        areas=2,
        id_name="area",
        tolerance=0.0,
        mode=mode,
        complete=complete,
        calls=3,
        pieces=pieces,
        ids=ids,
        areas_ids=["a", "b"],
        areas_complete=["a", "b"] if complete else ["b"],
    )


def _piece(
    ring: str,
    rows: int,
    status: str = "read",
    changed: bool | None = None,
    digests: tuple[str, ...] = ("d1", "d2"),
) -> PieceRecord:
    return PieceRecord("a", 0 if ring == RING else 1, ring, rows, 2, status, changed, digests)


def test_runs_are_listed_latest_first_with_their_pieces(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "ledger.sqlite")
    history.record(_run("r1", "2026-01-01T00:00:00", [_piece(RING, 150), _piece(OTHER, 120)]))
    history.record(
        _run(
            "r2",
            "2026-02-01T00:00:00",
            [_piece(RING, 150, "inferred", False), _piece(OTHER, 121, "read", True)],
            mode="changed",
        )
    )
    runs = parcelsearch.runs(tmp_path)
    assert runs["run_id"].tolist() == ["r2", "r1"]
    assert runs.loc[0, ["mode", "pieces", "read", "inferred", "changed"]].tolist() == [
        "changed",
        2,
        1,
        1,
        1,
    ]
    assert runs.loc[0, "areas_ids"] == ["a", "b"]
    pieces = history.pieces("r2")
    assert pieces["ring"].tolist() == [RING, OTHER] and pieces["changed"].tolist() == [False, True]
    assert history.ids("r1", "area").values.tolist() == [
        ["a", "1" * 17],
        ["a", "2" * 17],
        ["b", "3" * 17],
    ]


def test_a_run_is_found_by_a_unique_prefix_or_refused(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "ledger.sqlite")
    for run_id in ("abc1", "abc2"):
        history.record(_run(run_id, "2026-01-01T00:00:00", [_piece(RING, 1)]))
    assert history.run("abc1")["run_id"] == "abc1"
    with pytest.raises(parcelsearch.InputError, match="2 runs with id 'abc'") as caught:
        history.run("abc")
    assert "parcelsearch runs" in caught.value.render("cli")
    with pytest.raises(parcelsearch.InputError, match="no run with id 'zz'"):
        history.run("zz")


def test_previous_is_the_last_complete_record_and_stale_pieces_are_named(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "ledger.sqlite")
    history.record(_run("r1", "2026-01-01T00:00:00", [_piece(RING, 150, digests=("a", "b"))]))
    history.record(
        _run(
            "r2",
            "2026-02-01T00:00:00",
            [_piece(RING, 151, "incomplete", True, digests=("c",))],
            mode="changed",
            complete=False,
        )
    )
    previous, stale = history.previous("https://x", "/v1/search", [RING, OTHER])
    assert previous[RING].rows == 150 and previous[RING].digests == ("a", "b")
    assert OTHER not in previous and stale == {RING}
    assert history.previous("https://y", "/v1/search", [RING]) == ({}, set())
    history.record(_run("r3", "2026-02-02T00:00:00", [_piece(RING, 151, digests=("c", "e"))]))
    previous, stale = history.previous("https://x", "/v1/search", [RING])
    assert previous[RING].digests == ("c", "e") and not stale


def test_digests_change_with_counts_order_and_ids() -> None:
    base = page_digest(150, 2, ["1" * 17, "2" * 17])
    assert base == page_digest(150, 2, ("1" * 17, "2" * 17))
    assert (
        len(
            {
                base,
                page_digest(151, 2, ["1" * 17, "2" * 17]),
                page_digest(150, 2, ["2" * 17, "1" * 17]),
                page_digest(150, 2, ["1" * 17, "3" * 17]),
            }
        )
        == 4
    )
    assert polygon_digest(RING) != polygon_digest(OTHER)


def test_an_unusable_file_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    with pytest.raises(parcelsearch.ConfigurationError, match="cannot open the quota ledger"):
        RunHistory(tmp_path / "dir")


def _nearby_runs(history: Any) -> None:
    """Three runs of RING (its latest complete record: 5 pages) and one of OTHER, far off."""

    def piece(ring: str, pages: int, status: str = "read") -> PieceRecord:
        return PieceRecord("a", int(ring == OTHER), ring, pages * 100, pages, status, None, ())

    history.record(_run("n1", "2026-01-01T00:00:00", [piece(RING, 3), piece(OTHER, 2)]))
    history.record(_run("n2", "2026-02-01T00:00:00", [piece(RING, 5)]))
    history.record(
        _run("n3", "2026-03-01T00:00:00", [piece(RING, 9, "incomplete")], complete=False)
    )


def _check_nearby(history: Any) -> None:
    assert history.nearby("https://x", "/v1/search", (-1, -1, 1.5, 1.5)) == [Nearby(RING, 5)]
    found = history.nearby("https://x", "/v1/search", (-1, -1, 5, 5))
    assert sorted((n.polygon_json, n.pages) for n in found) == [(RING, 5), (OTHER, 2)]
    assert history.nearby("https://x", "/v1/search", (10, 10, 11, 11)) == []
    assert history.nearby("https://other", "/v1/search", (-1, -1, 5, 5)) == []


def test_nearby_rings_are_their_latest_complete_pages_within_the_bounds(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "ledger.sqlite")
    assert history.nearby("https://x", "/v1/search", (-1, -1, 5, 5)) == []  # nothing yet
    _nearby_runs(history)
    _check_nearby(history)


def test_the_team_history_tells_the_same_nearby_rings(postgres: Any) -> None:
    from parcelsearch.stores.team import init_team
    from parcelsearch.stores.team.run_history import TeamRunHistory

    url: str = postgres.database("nearby")
    init_team(url)
    history = TeamRunHistory(url, member="alice")
    _nearby_runs(history)
    _check_nearby(history)


def test_groupids_that_inflate_past_any_search_s_are_refused(tmp_path: Path) -> None:
    """Issue 58, point 3: a 300 KB blob added to a run (a forged history) inflated to 1.4 GB
    in ``diff``. A run's GroupIDs are inflated at most 64 times their blob; past that, or not
    zlib, an error naming the run."""
    import zlib

    from parcelsearch.errors import InputError

    history = RunHistory(tmp_path / "ledger.sqlite")
    honest = zlib.compress("\n".join(f"{n:017x}" for n in range(0x10000, 0x30000)).encode())
    history._insert(
        {
            "runs": [
                (
                    "r1",
                    "s",
                    "f",
                    "fp",
                    "https://x",
                    "/v1/search",
                    "a",
                    2,
                    "id",
                    0.0,
                    "cached",
                    1,
                    1,
                    "{}",
                )
            ],
            "run_ids": [("r1", '"a"', honest)],
        }
    )
    assert len(history.ids("r1", "id")) == 0x20000  # sequential ids: ~7.5 times
    for blob in (zlib.compress(b" " * 50_000_000), b"not zlib"):
        history._insert({"runs": [], "run_ids": [("r1", '"b"', blob)]})
        with pytest.raises(InputError, match="run 'r1' .* not what a search writes"):
            history.ids("r1", "id")


def test_a_run_detail_nested_past_the_parser_reads_as_none(tmp_path: Path) -> None:
    """Issue 58, point 11: a run's detail nested 100,000 deep (a forged history) was a
    RecursionError for every ``runs``; now that run reads with no detail."""
    history = RunHistory(tmp_path / "ledger.sqlite")
    history._insert(
        {
            "runs": [
                (
                    "r1",
                    "s",
                    "f",
                    "fp",
                    "https://x",
                    "/v1/search",
                    "a",
                    2,
                    "id",
                    0.0,
                    "cached",
                    1,
                    1,
                    "[" * 100_000 + "]" * 100_000,
                )
            ]
        }
    )
    runs = history.runs()
    assert list(runs["run_id"]) == ["r1"] and runs["areas_ids"].iloc[0] == []


def test_nearby_reads_the_nearest_rings_within_the_box_chosen_in_sql(tmp_path: Path) -> None:
    """Issue 58, point 3: ``nearby()`` read every ring of the vendor. Now each ring's box
    is stored and the store chooses at most NEARBY_ROWS records within the box, nearest
    first: 1,500 newer rings elsewhere (a forged history) neither crowd out the one ring
    near the area nor are read; 1,500 inside it are read 1,000 at most."""
    from parcelsearch.stores.history import NEARBY_ROWS, polygon_digest, ring_box

    history = RunHistory(tmp_path / "ledger.sqlite")

    def record(run: str, finished: str, rings: list[str]) -> None:
        history._insert(
            {
                "runs": [
                    (
                        run,
                        "s",
                        finished,
                        "fp",
                        "https://x",
                        "/v1/search",
                        "a",
                        1,
                        "id",
                        0.0,
                        "cached",
                        1,
                        1,
                        "{}",
                    )
                ],
                "rings": [(polygon_digest(r), r, *ring_box(r)) for r in rings],
                "run_pieces": [
                    (run, '"a"', k, polygon_digest(r), 1, 2, "read", None)
                    for k, r in enumerate(rings)
                ],
            }
        )

    def square(x: float, y: float) -> str:
        return f"[[{x},{y}],[{x + 0.01},{y}],[{x + 0.01},{y + 0.01}],[{x},{y}]]"

    record("near", "2020", [square(-97.7, 30.2)])
    record("far", "2099", [square(10 + k * 1e-4, 50) for k in range(1500)])
    near = history.nearby("https://x", "/v1/search", (-97.8, 30.1, -97.6, 30.3))
    assert [n.polygon_json for n in near] == [square(-97.7, 30.2)]
    record("inside", "2099", [square(-97.79 + k * 1e-4, 30.25) for k in range(1500)])
    near = history.nearby("https://x", "/v1/search", (-97.8, 30.1, -97.6, 30.3))
    assert len(near) == NEARBY_ROWS and square(-97.7, 30.2) in {n.polygon_json for n in near}
