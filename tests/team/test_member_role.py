"""What a member role can and cannot do (docs/guide/team.md's table), row by row, on a
throwaway PostgreSQL cluster: a real role made a member with ``team init --member-role``,
connecting as itself. The searches against the service are in
``tests/reliability/test_team_member_attacks.py``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from _team import member_url

from parcelsearch._fetch.pacing import RateLimiter
from parcelsearch._fetch.page import Page
from parcelsearch._fetch.retries import RetryPolicy
from parcelsearch._wire import request_key
from parcelsearch.errors import TeamStoreError
from parcelsearch.stores.team import (
    Pace,
    clear_pause,
    init_team,
    set_budget,
    set_pace,
    set_quota,
    team_usage,
)
from parcelsearch.stores.team.spending import TeamSpending
from parcelsearch.stores.team.store import (
    HORIZON_SLOTS,
    MOST_PAUSE,
    MOST_TURNS,
    SCHEMA,
    VERSION,
)

FP = "0123456789abcdef"
IDS = ("0123456789abcdef0", "0123456789abcdef1")
INVENTED = ("fffffffffffffffff", "eeeeeeeeeeeeeeeee")


def _member(url: str, user: str) -> TeamSpending:
    return TeamSpending.open(url, FP, user=user, cache=None)


def _page(data: tuple[str, ...] = IDS, polygon: str = "[[0,0],[1,0],[1,1],[0,0]]") -> Page:
    return Page(
        request_key=request_key("https://x", "/v1/search", polygon, 1),
        polygon_json=polygon,
        page=1,
        rows=len(data),
        pages=1,
        data_rows=len(data),
        data=data,
        base_url="https://x",
        path="/v1/search",
    )


def _denied(url: str, statement: str, params: tuple[Any, ...] = ()) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute(statement, params)
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedFunction):
            return True
    return False


def _calls(team: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(team) as conn:
        return conn.execute(
            f"SELECT member, state, role FROM {SCHEMA}.calls ORDER BY id"
        ).fetchall()


# -- can ----------------------------------------------------------------------------------


def test_a_member_reserves_settles_and_refunds_its_own_calls(team: str) -> None:
    """Row: reserve, settle and refund its own calls (by the reservation's token)."""
    alice = _member(member_url(team), "alice")
    kept, refunded = alice.reserve("r", None), alice.reserve("r", None)
    alice.settle(kept)
    alice.settle(refunded)
    alice.refund(refunded)  # a 429 after the call was sent: the service did not count it
    alice.close()
    role = _calls(team)[0][2]
    assert _calls(team) == [("alice", "settled", role)] and role.startswith("member_")


def test_a_member_adds_pages_and_refreshes_its_own(team: str) -> None:
    """Row: add a page it fetched, and replace (refresh) a page its own role wrote."""
    alice = _member(member_url(team), "alice")
    alice.keep(_page(INVENTED))
    alice.keep(_page())  # refreshed
    kept = alice.claim(_page().request_key, None, threading.Event())
    assert kept is not None and kept.data == IDS
    alice.close()


def test_a_member_paces_and_pauses_the_key_for_a_429(team: str) -> None:
    """Row: take its turn at the key's pacer, and pause every member for a 429's
    Retry-After (at most 120 s, the longest a member honours) after a call of its own."""
    assert MOST_PAUSE == RetryPolicy().retry_after_max
    alice = _member(member_url(team), "alice")
    alice.pace(RateLimiter(1000), None)
    answered = alice.reserve("r", None)
    alice.settle(answered)
    alice.refund(answered)  # answered 429: the service did not count it
    alice.pause(5)
    usage = team_usage(team)
    key = usage[usage["scope"] == "key"].iloc[0]
    assert key["paused_by"].startswith("alice (role member_")
    alice.close()


def test_a_member_reads_usage_and_records_runs(team: str) -> None:
    """Row: read what the team spent (``team usage``)."""
    url = member_url(team)
    set_budget(team, "alice", 3)
    _member(url, "alice").close()
    usage = team_usage(url)
    assert usage[usage["name"] == "alice"]["limit"].iloc[0] == 3


# -- cannot -------------------------------------------------------------------------------


def test_a_member_cannot_refund_or_rewrite_calls_it_does_not_hold(team: str) -> None:
    """Row: refund, settle or delete calls by id, or any call it does not hold the token
    of (another member's, or its own once its process is gone)."""
    alice, url = _member(team, "alice"), member_url(team)
    alice.reserve("r", None)
    alice.close()
    assert _denied(url, f"SELECT {SCHEMA}.refund(id) FROM {SCHEMA}.calls")
    assert _denied(url, f"SELECT {SCHEMA}.settle(id) FROM {SCHEMA}.calls")
    assert not _denied(
        url, f"SELECT {SCHEMA}.refund(encode(token_hash, 'hex')) FROM {SCHEMA}.calls"
    )  # runs, refunds nothing
    for statement in (
        f"DELETE FROM {SCHEMA}.calls",
        f"UPDATE {SCHEMA}.calls SET member = 'x'",
        f"UPDATE {SCHEMA}.calls SET state = 'settled'",
    ):
        assert _denied(url, statement), statement
    assert [row[:2] for row in _calls(team)] == [("alice", "reserved")]


def test_a_member_cannot_change_a_page_another_role_wrote(team: str) -> None:
    """Row: change or delete a page another member's role wrote (directly or through the
    store's keep_page)."""
    owner = _member(team, "alice")
    owner.keep(_page())
    url = member_url(team)
    mallory = _member(url, "mallory")
    mallory.keep(_page(INVENTED))
    for statement in (
        f"UPDATE {SCHEMA}.pages SET data = '{{}}'",
        f"DELETE FROM {SCHEMA}.pages",
        f"INSERT INTO {SCHEMA}.pages SELECT * FROM {SCHEMA}.pages",
    ):
        assert _denied(url, statement), statement
    assert mallory.claim(_page().request_key, None, threading.Event()).data == IDS  # type: ignore[union-attr]
    owner.close()
    mallory.close()


def test_a_member_cannot_set_the_pacer(team: str) -> None:
    """Row: write the pacer directly, pause the key beyond 120 s, or push the next turn
    beyond 256 of the key's intervals; nor (issue 58) hold more than 32 turns ahead: 400
    turns in one statement are refused whole, one at a time the 33rd is."""
    set_pace(team, FP, Pace(50, 0.05, 6))
    url = member_url(team)
    mallory = _member(url, "mallory")
    for statement in (
        f"UPDATE {SCHEMA}.pacers SET paused_until = 'infinity'",
        f"UPDATE {SCHEMA}.pacers SET next_slot = 'infinity'",
        f"DELETE FROM {SCHEMA}.pacers",
    ):
        assert _denied(url, statement), statement
    mallory.settle(mallory.reserve("r", None))
    mallory.pause(86_400)
    with psycopg.connect(url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.ProgramLimitExceeded, match="turns"):
            conn.execute(f"SELECT {SCHEMA}.pace_turn(%s, true) FROM generate_series(1, 400)", (FP,))
        given = 0
        for _ in range(100):
            try:
                conn.execute(f"SELECT {SCHEMA}.pace_turn(%s, false)", (FP,))
            except psycopg.errors.ProgramLimitExceeded:
                continue
            given += 1
    assert given <= MOST_TURNS
    pause, turn = _ahead(team)
    assert pause is not None and pause <= MOST_PAUSE
    assert turn <= pause + (MOST_TURNS + 2) / (50 * 0.95)
    mallory.close()


def test_a_member_cannot_change_the_policy_or_clear_a_pause(team: str) -> None:
    """Row: change the quota, the pace or a budget, or clear a pause (the owner's)."""
    url = member_url(team)
    _member(url, "mallory").pause(60)
    for change in (
        lambda: set_quota(url, FP, 1000),
        lambda: set_budget(url, "mallory", 1000),
        lambda: set_pace(url, FP, Pace(100)),
        lambda: clear_pause(url, FP),
    ):
        with pytest.raises(TeamStoreError, match="permission denied"):
            change()
    clear_pause(team, FP)
    assert _ahead(team)[0] is None


# -- checked when read ----------------------------------------------------------------------


def test_a_page_that_does_not_add_up_is_fetched_again(
    team: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Row: a page in the store that does not add up (ids, counts, or a key that does not
    name its request) is not used: the member fetches it again, and says so."""
    owner = _member(team, "alice")
    owner.keep(_page())
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(f"UPDATE {SCHEMA}.pages SET data = %s", (list(INVENTED[:1]),))
    bob = _member(member_url(team), "bob")
    with caplog.at_level(logging.WARNING):
        assert bob.claim(_page().request_key, None, threading.Event()) is None  # bob fetches
    assert "does not add up" in caplog.text
    owner.close()
    bob.close()


def test_a_pacer_beyond_its_bound_is_treated_as_bounded_and_said(
    team: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Row: a pause stored longer than 120 s (written before version 4, or by the owner)
    ends 120 s after it was set; the member says so."""
    alice = _member(member_url(team), "alice")
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {SCHEMA}.pacers SET paused_until = now() + interval '1 day', "
            f"paused_at = now() - interval '{MOST_PAUSE - 0.5} seconds'"
        )
    with caplog.at_level(logging.WARNING):
        alice.pace(RateLimiter(1000), None)
    assert "was bounded to 120 s" in caplog.text and "--clear-pause" in caplog.text
    pause = _ahead(team)[0]
    assert pause is None or pause < 1  # the pause stored is its bound, not a day
    alice.close()


def _ahead(team: str) -> tuple[float | None, float]:
    """Seconds the key's pause (None: none) and its next turn are ahead of now."""
    with psycopg.connect(team) as conn:
        pause, turn = conn.execute(
            "SELECT CASE WHEN paused_until > clock_timestamp() THEN "
            "EXTRACT(EPOCH FROM paused_until - clock_timestamp()) END, "
            "CASE WHEN isfinite(next_slot) THEN "
            "EXTRACT(EPOCH FROM next_slot - clock_timestamp()) END "
            f"FROM {SCHEMA}.pacers WHERE fingerprint = %s",
            (FP,),
        ).fetchone()
    return (None if pause is None else float(pause), float("-inf") if turn is None else float(turn))


def test_a_version_3_store_is_upgraded_and_its_members_lose_what_4_takes_back(
    postgres: Any,
) -> None:
    """Schema 3 → 4 by ``team init``: a member role granted by version 3 keeps searching
    through the new functions, and loses UPDATE on pages and pacers and refund by id."""
    from parcelsearch.stores.team import migrations

    url = postgres.database("team")
    role = f"member_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        conn.execute(f"CREATE TABLE {SCHEMA}.meta (version integer NOT NULL)")
        for version in (1, 2, 3):
            conn.execute(migrations.MIGRATIONS[version])
        conn.execute(f"INSERT INTO {SCHEMA}.meta VALUES (3)")
        conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}")
        conn.execute(f"GRANT INSERT, UPDATE ON {SCHEMA}.pacers, {SCHEMA}.pages TO {role}")
        conn.execute(
            f"INSERT INTO {SCHEMA}.pacers (fingerprint, paused_until) "
            "VALUES (%s, now() + interval '1 day')",
            (FP,),
        )
    as_member = url.replace("postgres@", f"{role}@")
    assert init_team(url) == (3, VERSION)
    assert init_team(url) == (VERSION, VERSION)
    assert _denied(as_member, f"UPDATE {SCHEMA}.pacers SET paused_until = 'infinity'")
    assert _denied(as_member, f"UPDATE {SCHEMA}.pages SET data = '{{}}'")
    pause = _ahead(url)[0]
    assert pause is not None and pause <= MOST_PAUSE  # the day's pause held to its bound
    clear_pause(url, FP)
    alice = _member(as_member, "alice")
    alice.settle(alice.reserve("r", None))
    alice.pace(RateLimiter(1000), None)
    alice.close()
    assert [row[:2] for row in _calls(url)] == [("alice", "settled")]


def test_a_member_holding_a_lease_holds_up_nobody(team: str) -> None:
    """Row (issue 58): a member cannot write leases directly, and one taking and renewing a
    page's lease through the store's functions, without end, holds another member up about
    one lease's time: then the waiter fetches the page itself. (Before, members wrote leases
    and a waiter waited as long as a lease was renewed: forever.)"""
    set_pace(team, FP, Pace(10, 0.05, 1))
    url = member_url(team)
    mallory, bob = _member(url, "mallory"), _member(member_url(team), "bob")
    key = _page().request_key
    for statement in (
        f"UPDATE {SCHEMA}.leases SET expires = 'infinity'",
        f"INSERT INTO {SCHEMA}.leases (request_key, holder, expires) VALUES ('k', 'x', 'infinity')",
        f"DELETE FROM {SCHEMA}.leases",
    ):
        assert _denied(url, statement), statement
    stop = threading.Event()

    def hold() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.wait(0.05):
                conn.execute(f"SELECT {SCHEMA}.take_lease(%s, 'mallory', 3600)", (key,))
                conn.execute(f"SELECT {SCHEMA}.renew_leases('mallory', 3600)")

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    time.sleep(0.3)
    timer = threading.Timer(30, stop.set)  # on the old code: Cancelled after 30 s
    timer.start()
    started = time.monotonic()
    try:
        assert bob.claim(key, None, threading.Event()) is None  # bob fetches it himself
        waited = time.monotonic() - started
        assert bob.cached(key, None) is None
    finally:
        timer.cancel()
        stop.set()
        holder.join(timeout=10)
    assert waited < 5, waited
    bob.keep(_page())
    assert bob.claim(key, None, threading.Event()) is not None
    mallory.close()
    bob.close()


def test_team_pace_needs_a_rate_or_clear_pause(
    team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``team pace`` with neither ``--rate`` nor ``--clear-pause`` is a usage error naming
    both (exit 2), before the key is even read."""
    from _cli import run

    code, _, err = run(["team", "pace", "--team", team], capsys)
    assert code == 2 and "--rate" in err and "--clear-pause" in err, err


def test_a_next_turn_beyond_its_bound_is_treated_as_bounded_and_said(
    team: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Row: a next turn stored further than 256 of the key's intervals ahead (by the owner,
    or an older store) is taken as 256 intervals ahead; the member says so."""
    set_pace(team, FP, Pace(1000, 0.05, 6))  # 256 intervals: 0.27 s
    alice = _member(member_url(team), "alice")
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(f"UPDATE {SCHEMA}.pacers SET next_slot = 'infinity'")
    with caplog.at_level(logging.WARNING):
        alice.pace(RateLimiter(1000), None)
    assert "the next turn, at infinity, was bounded" in caplog.text, caplog.text
    assert _ahead(team)[1] <= (HORIZON_SLOTS + 2) / (1000 * 0.95)
    alice.close()


# -- issue 58: a member spends only as itself ------------------------------------------------


def test_a_member_cannot_spend_another_members_budget(team: str) -> None:
    """Row (issue 58, point 1): reserve only as its own member name. As mallory's role,
    ``reserve(fp, 'bob', …)`` twenty times put bob at his budget of 20 and his next search
    was refused; now a name is its first member role's, and ``team usage`` shows the role
    behind every figure."""
    set_budget(team, "bob", 20)
    bob = _member(member_url(team), "bob")
    bob.settle(bob.reserve("r", None))
    mallory_url = member_url(team)
    with psycopg.connect(mallory_url, autocommit=True) as conn:
        verdicts = [
            row[0]
            for row in conn.execute(
                f"SELECT (r).verdict FROM (SELECT {SCHEMA}.reserve(%s, 'bob', 'x', NULL, NULL) "
                "AS r FROM generate_series(1, 20)) AS s",
                (FP,),
            )
        ]
    assert verdicts == ["name"] * 20
    mallory = _member(mallory_url, "bob")
    with pytest.raises(TeamStoreError, match="belongs to another PostgreSQL role"):
        mallory.reserve("r", None)
    bob.settle(bob.reserve("r", None))  # bob's budget is his
    usage = team_usage(team)
    row = usage[usage["name"] == "bob"].iloc[0]
    assert row["calls_month"] == 2 and row["roles"] == _calls(team)[0][2]
    key = usage[usage["scope"] == "key"].iloc[0]
    assert key["roles"] == row["roles"]
    mallory.close()
    bob.close()


def test_members_sharing_a_role_cannot_rewrite_each_others_pages(team: str) -> None:
    """Row (issue 58, point 5): a page is replaced only by the role *and* the member name
    that wrote it. Two members given one role (the guide says: one role a person) are
    people the store cannot tell apart: mallory's keep_page of alice's page changes
    nothing."""
    url = member_url(team)
    alice, mallory = _member(url, "alice"), _member(url, "mallory")
    alice.keep(_page())
    mallory.keep(_page(INVENTED))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"SELECT {SCHEMA}.keep_page(%s, 'https://x', '/v1/search', %s, 1, 2, 1, "
            "2, %s, now(), 'mallory', %s, 'x')",
            (_page().request_key, _page().polygon_json, list(INVENTED), FP),
        )
    fresh = _member(member_url(team), "carol")
    kept = fresh.claim(_page().request_key, None, threading.Event())
    assert kept is not None and kept.data == IDS
    alice.keep(_page(INVENTED[:1] + IDS[1:]))  # alice refreshes her own page
    kept = fresh.claim(_page().request_key, 0.0 + 3600, threading.Event())
    assert kept is not None and kept.data == INVENTED[:1] + IDS[1:]
    for member in (alice, mallory, fresh):
        member.close()


def test_a_member_cannot_pause_without_a_call_nor_rearm_its_pause(team: str) -> None:
    """Row (issue 58, point 6): a member pauses the key only after a call of its own (the
    429's), and its role cannot set a pause again while its last one could last: a 120 s
    pause re-armed every 2 s undid the owner's ``--clear-pause``."""
    url = member_url(team)
    mallory = _member(url, "mallory")
    mallory.pause(120)  # no call of its own: nothing paused
    assert _ahead(team)[0] is None
    mallory.settle(mallory.reserve("r", None))
    mallory.pause(120)
    assert _ahead(team)[0] is not None
    clear_pause(team, FP)
    for _ in range(3):
        mallory.pause(120)
    assert _ahead(team)[0] is None  # the owner's clear holds
    mallory.close()


def test_a_member_cannot_forge_the_run_history(team: str) -> None:
    """Row (issue 58, point 3): a run is stamped with the role that recorded it; another
    role cannot add GroupIDs (or pieces) under it, store a ring under a digest not its own,
    or a ring longer than a request line could be."""
    import zlib

    from parcelsearch.stores.history import MOST_RING, polygon_digest
    from parcelsearch.stores.team.run_history import TeamRunHistory

    bob_url, mallory_url = member_url(team), member_url(team)
    bob = TeamRunHistory(bob_url, "bob")
    bob._insert(
        {
            "runs": [
                (
                    "run-bob",
                    "s",
                    "f",
                    FP,
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
            "run_ids": [("run-bob", '"a"', zlib.compress(b"0123456789abcdef0"))],
        }
    )
    mallory = TeamRunHistory(mallory_url, "mallory")
    bomb = zlib.compress(b" " * 50_000_000)
    with pytest.raises(TeamStoreError, match="not recorded by role"):
        mallory._insert({"runs": [], "run_ids": [("run-bob", '"forged"', bomb)]})
    ring = "[[0,0],[1,0],[1,1],[0,0]]"
    with pytest.raises(TeamStoreError, match="digest"):
        mallory._insert({"runs": [], "rings": [(polygon_digest("[[5,5]]"), ring)]})
    big = "[" + ",".join(["[0.123456789,0.123456789]"] * 3000) + "]"
    assert len(big) > MOST_RING
    with pytest.raises(TeamStoreError, match="ring_size"):
        mallory._insert({"runs": [], "rings": [(polygon_digest(big), big)]})
    with psycopg.connect(team) as conn:
        assert (
            conn.execute(f"SELECT role FROM {SCHEMA}.runs").fetchone()[0]
            == bob_url.split("//")[1].split("@")[0]
        )
    ids = TeamRunHistory(team).ids("run-bob", "id")
    assert list(ids["id"]) == ["a"]


def test_team_usage_shows_a_member_name_s_terminal_escapes_as_text(
    team: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 58, point 10: a member name holding terminal escapes (reserved as its own name
    by a member role, through the store's function) was printed raw by ``team usage``: it
    could clear the screen or repaint another member's figures. Now each control character
    is printed as its escape."""
    from _cli import run

    evil = "\x1b[2J\x1b[Hmallory\r\x1b]0;owned\x07"
    with psycopg.connect(member_url(team), autocommit=True) as conn:
        conn.execute(f"SELECT {SCHEMA}.reserve(%s, %s, 'x', NULL, NULL)", (FP, evil))
    code, out, _ = run(["team", "usage", "--team", team], capsys)
    assert code == 0 and "mallory" in out
    assert not any(ch in out for ch in "\x1b\r\x07"), repr(out)
    assert "\\x1b[2J" in out
