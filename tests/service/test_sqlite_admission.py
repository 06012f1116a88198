"""SQLite admission on the loop: the requests of one loop turn admitted and handled on
the loop in one transaction, only when no lock is held elsewhere and the search is brief;
else nothing is counted and the thread takes them. Witnessed by the key store's own tables."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import shapely
from hypothesis import example as known
from hypothesis import given, settings
from hypothesis import strategies as st

from parcelsearch_service import sqlite_admission, synth
from parcelsearch_service.keys import KeyStore, SqliteKeyStore
from parcelsearch_service.limits import Call, Outcome, Refusal
from parcelsearch_service.polygon import ParsedPolygon, parse_polygon
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.sqlite_admission import SqliteAdmission
from parcelsearch_service.store import CountGrid, ParcelStore


@pytest.fixture(scope="module")
def example() -> synth.Example:
    return synth.example_fabric()


@pytest.fixture
def parcels(example: synth.Example) -> ParcelStore:
    return ParcelStore(example.parcels)


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[SqliteKeyStore]:
    store = KeyStore(tmp_path / "keys.sqlite", busy_timeout=0.2)
    assert isinstance(store, SqliteKeyStore)
    yield store
    store.close()


@pytest.fixture
def gate(keys: SqliteKeyStore, parcels: ParcelStore) -> Iterator[SqliteAdmission]:
    admission = SqliteAdmission(keys, parcels, PortalStore(keys))
    yield admission
    asyncio.run(admission.close())


def _search_call(key: str, parsed: ParsedPolygon, parcels: ParcelStore) -> Call[bytes]:
    def handle() -> Outcome[bytes]:
        return Outcome(200, str(len(parcels.hits(parsed))).encode(), parsed.sha256, 1)

    return Call(key, "search", "/v1/search", handle, Outcome(200, b"", parsed.sha256, 1), parsed)


def _answers(gate: SqliteAdmission, calls: list[Call[bytes]]) -> list[object]:
    """The gate's answers to ``calls`` sent in one turn of the loop."""

    async def send() -> list[object]:
        return list(await asyncio.gather(*(gate.answer(call) for call in calls)))

    return asyncio.run(send())


def _spike_refusals(keys: SqliteKeyStore, name: str) -> int:
    with sqlite3.connect(keys.location) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(s.count), 0) FROM spike_refusals s JOIN keys k"
            " ON k.id = s.key_id WHERE k.name = ?",
            (name,),
        ).fetchone()
    return int(row[0])


def test_a_turn_of_requests_is_admitted_exactly_with_the_spike_window(
    gate: SqliteAdmission, keys: SqliteKeyStore, parcels: ParcelStore, example: synth.Example
) -> None:
    """Five requests of a key allowed 3 a second, in one turn: three searched, counted and
    logged with their status; two refused 429 with Retry-After, not counted, tallied for
    the portal — all in the store's tables."""
    key = keys.create("turn", per_second=3, quota=100)
    parsed = parse_polygon(json.dumps(example.ring))
    answers = _answers(gate, [_search_call(key, parsed, parcels) for _ in range(5)])
    admitted = [a for a in answers if isinstance(a, Outcome)]
    refused = [a for a in answers if isinstance(a, Refusal)]
    assert [a.body for a in admitted] == [str(len(example.expected)).encode()] * 3
    assert [(r.status, r.retry_after) for r in refused] == [(429, 1)] * 2
    assert keys.get("turn")["used_lifetime"] == 3
    log = keys.requests("turn")
    assert (log.status.tolist(), log.counted.tolist()) == ([200] * 3, [True] * 3)
    assert _spike_refusals(keys, "turn") == 2


def test_an_outcome_other_than_presumed_is_logged_in_the_same_transaction(
    gate: SqliteAdmission, keys: SqliteKeyStore
) -> None:
    key = keys.create("beyond", per_second=100)
    parsed = parse_polygon("[[-97.5,32.25],[-97.4,32.25],[-97.4,32.3],[-97.5,32.25]]")
    call = Call(
        key,
        "search",
        "/v1/search",
        lambda: Outcome(400, b"no", parsed.sha256, 9),
        Outcome(200, b"", parsed.sha256, 9),
        parsed,
    )
    (answer,) = _answers(gate, [call])
    assert isinstance(answer, Outcome) and answer.status == 400
    log = keys.requests("beyond")
    assert (log.status.tolist(), log.page.tolist(), log.counted.tolist()) == ([400], [9], [True])


def test_a_lock_held_by_another_program_leaves_the_requests_to_the_thread(
    gate: SqliteAdmission, keys: SqliteKeyStore, parcels: ParcelStore, example: synth.Example
) -> None:
    """Another connection in a write transaction: the gate does not wait (no busy timeout
    on the loop) and counts nothing; once it is gone, the gate admits."""
    key = keys.create("held", per_second=100)
    call = _search_call(key, parse_polygon(json.dumps(example.ring)), parcels)
    holder = sqlite3.connect(keys.location, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert _answers(gate, [call, call]) == [None, None]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert keys.get("held")["used_lifetime"] == 0
    assert all(isinstance(a, Outcome) for a in _answers(gate, [call, call]))
    assert keys.get("held")["used_lifetime"] == 2


def test_a_writer_queued_on_the_store_lock_file_leaves_the_requests_to_the_thread(
    gate: SqliteAdmission, keys: SqliteKeyStore, parcels: ParcelStore, example: synth.Example
) -> None:
    """A writer of this store elsewhere (another worker) holds the writers' file lock: the
    gate does not queue behind it on the loop."""
    key = keys.create("queued", per_second=100)
    call = _search_call(key, parse_polygon(json.dumps(example.ring)), parcels)
    fd = os.open(f"{keys.location}.writer", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert _answers(gate, [call]) == [None]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert keys.get("queued")["used_lifetime"] == 0


def test_a_search_over_the_limit_is_left_to_the_thread(
    keys: SqliteKeyStore, parcels: ParcelStore, example: synth.Example
) -> None:
    key = keys.create("large", per_second=100)
    parsed = parse_polygon(json.dumps(example.ring))
    small = SqliteAdmission(keys, parcels, PortalStore(keys), limit=parcels.work(parsed))
    tight = SqliteAdmission(keys, parcels, PortalStore(keys), limit=parcels.work(parsed) - 1)
    try:
        assert _answers(tight, [_search_call(key, parsed, parcels)]) == [None]
        assert keys.get("large")["used_lifetime"] == 0
        assert isinstance(_answers(small, [_search_call(key, parsed, parcels)])[0], Outcome)
    finally:
        asyncio.run(small.close())
        asyncio.run(tight.close())


def test_a_store_failure_rolls_the_turn_back(
    gate: SqliteAdmission, keys: SqliteKeyStore, parcels: ParcelStore, example: synth.Example
) -> None:
    """The request log is gone mid-service: nothing of the turn is counted, and the thread
    (which reports the failure) gets the requests."""
    key = keys.create("broken", per_second=100)
    call = _search_call(key, parse_polygon(json.dumps(example.ring)), parcels)
    keys.execute(keys.connection(), "ALTER TABLE requests RENAME TO requests_gone")
    try:
        assert _answers(gate, [call, call]) == [None, None]
    finally:
        keys.execute(keys.connection(), "ALTER TABLE requests_gone RENAME TO requests")
    assert keys.get("broken")["used_lifetime"] == 0


def test_a_cached_search_costs_no_work(parcels: ParcelStore, example: synth.Example) -> None:
    parsed = parse_polygon(json.dumps(example.ring))
    before = parcels.work(parsed)
    assert before >= len(example.expected)
    parcels.hits(parsed)
    assert parcels.work(parsed) == 0


_coordinate = st.floats(-10, 10, allow_nan=False)


@settings(max_examples=200, deadline=None)
@known(
    boxes=[(-7.0, 0.0, 0.0, 0.0), (-6.0, 2.0, 0.0, 2.589811806266753)],  # the last column
    query=(-6.0, 0.0, 4.0101974963309246, 4.718375719887281),
)
@given(
    boxes=st.lists(
        st.tuples(_coordinate, _coordinate, st.floats(0, 3), st.floats(0, 3)),
        min_size=1,
        max_size=60,
    ),
    query=st.tuples(_coordinate, _coordinate, st.floats(0, 5), st.floats(0, 5)),
)
def test_the_count_grid_bounds_the_candidates_from_above(
    boxes: list[tuple[float, float, float, float]], query: tuple[float, float, float, float]
) -> None:
    """Whatever the boxes and the rectangle, the grid's bound is at least the number of
    boxes an STRtree query of the rectangle returns."""
    array = np.array(boxes)
    xmin, ymin = array[:, 0], array[:, 1]
    xmax, ymax = xmin + array[:, 2], ymin + array[:, 3]
    x, y, w, h = query
    rectangle = (x, y, x + w, y + h)
    tree = shapely.STRtree(shapely.box(xmin, ymin, xmax, ymax))
    found = len(tree.query(shapely.box(*rectangle)))
    assert CountGrid.of(xmin, ymin, xmax, ymax).at_most(rectangle) >= found


def test_the_loop_never_checkpoints_a_thread_does(
    keys: SqliteKeyStore,
    parcels: ParcelStore,
    example: synth.Example,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The database file (not its WAL) grows only when a checkpoint copies pages into it:
    not while the loop commits, until every CHECKPOINT_EVERY commits the gate's checkpoint
    thread does."""
    monkeypatch.setattr(sqlite_admission, "CHECKPOINT_EVERY", 400)
    key = keys.create("wal", per_second=1_000_000, quota=1000)
    keys.execute(keys.connection(), "PRAGMA wal_checkpoint(TRUNCATE)")
    database = Path(keys.location)
    size = database.stat().st_size
    gate = SqliteAdmission(keys, parcels, PortalStore(keys))
    call = _search_call(key, parse_polygon(json.dumps(example.ring)), parcels)
    try:
        for _ in range(399):  # some 1,200 pages of WAL: SQLite by itself checkpoints at 1,000
            _answers(gate, [call])
        assert database.stat().st_size == size  # all of it still in the WAL
        _answers(gate, [call])
    finally:
        asyncio.run(gate.close())  # waits for the checkpoint thread
    assert database.stat().st_size > size
    assert keys.get("wal")["used_lifetime"] == 400
