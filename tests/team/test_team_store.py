"""The team store on a throwaway PostgreSQL cluster: schema, reservations, pacer, leases.

The searches against the reference service, witnessed by its request log, are in
``tests/e2e/test_team_e2e.py``.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _spikes import sooner_than_turns
from _team import short_steps, turns_seen, watch_turns
from _threads import moments, race

from parcelsearch._fetch.pacing import FIRST_CALL_ALLOWANCE, Cancelled
from parcelsearch._fetch.page import Page
from parcelsearch._wire import request_key
from parcelsearch.errors import ConfigurationError, QuotaWouldExceedError, TeamStoreError
from parcelsearch.stores.quotas import Quota
from parcelsearch.stores.team import Pace, init_team, set_budget, set_pace, set_quota, team_usage
from parcelsearch.stores.team.spending import RESERVE_LEAD, TeamSpending
from parcelsearch.stores.team.store import SCHEMA, VERSION, schema_version

FP = "0123456789abcdef"


def _member(url: str, user: str) -> TeamSpending:
    return TeamSpending.open(url, FP, user=user, cache=None)


_IDS = ("0123456789abcdef0", "0123456789abcdef1")


def _key(name: str = "k1") -> str:
    """The request key of the page :func:`_page` makes for ``name``."""
    return request_key("https://x", "/v1/search", _polygon(name), 1)


def _polygon(name: str) -> str:
    return f"[[0,0],[1,0],[1,{len(name)}],[{ord(name[-1])},0],[0,0]]"


def _page(name: str = "k1", data: tuple[str, ...] = _IDS) -> Page:
    """A page that adds up (its key names its request), as the team store checks on read."""
    return Page(
        request_key=_key(name),
        polygon_json=_polygon(name),
        page=1,
        rows=len(data),
        pages=1,
        data_rows=len(data),
        data=data,
        base_url="https://x",
        path="/v1/search",
    )


def test_init_is_idempotent_and_versioned(postgres: Any) -> None:
    url = postgres.database("team")
    assert init_team(url) == (0, VERSION)
    assert init_team(url) == (VERSION, VERSION)
    with psycopg.connect(url) as conn:
        assert schema_version(conn) == VERSION


def test_an_unreachable_store_is_named_without_its_password() -> None:
    url = "postgresql://alice:s3cret@127.0.0.1:9/team"
    with pytest.raises(TeamStoreError, match=r"alice:\*\*\*@127.0.0.1:9/team") as caught:
        init_team(url)
    assert "s3cret" not in str(caught.value)


def test_a_store_without_schema_says_how_to_make_it(postgres: Any) -> None:
    url = postgres.database("team")
    with pytest.raises(TeamStoreError, match="no parcelsearch schema.*init_team"):
        _member(url, "alice")


def test_threads_of_several_members_never_pass_the_quota(team: str) -> None:
    set_quota(team, FP, 37, "month")
    members = [_member(team, name) for name in ("alice", "bob", "carol")]
    granted, refused = race(
        lambda i: members[i % 3].reserve("run", members[i % 3].stored_quota()),
        QuotaWouldExceedError,
        threads=12,
    )
    assert (granted, refused) == (37, 120 - 37)
    usage = team_usage(team)
    key = usage[usage["scope"] == "key"].iloc[0]
    assert (key["calls_month"], key["calls_lifetime"], key["limit"]) == (37, 37, 37)
    assert usage[usage["scope"] == "member"]["calls_month"].sum() == 37
    for member in members:
        member.close()


def test_refunds_give_back_and_unknown_fates_count(team: str) -> None:
    alice = _member(team, "alice")
    quota = Quota(2, "lifetime")
    first = alice.reserve("r", quota)
    alice.settle(first)
    second = alice.reserve("r", quota)  # sent, never settled: its fate is unknown
    with pytest.raises(QuotaWouldExceedError, match="no calls left: the team store counts 2"):
        alice.reserve("r", quota)
    alice.refund(first)
    assert alice.limits(quota) == [(1, "quota")]
    with psycopg.connect(team) as conn:
        states = conn.execute(f"SELECT id, state FROM {SCHEMA}.calls").fetchall()
    assert states == [(second, "reserved")]
    alice.close()


def test_a_member_budget_is_refused_before_spending(team: str) -> None:
    set_budget(team, "bob", 2)
    bob, alice = _member(team, "bob"), _member(team, "alice")
    assert bob.limits(None) == [(2, "user budget")]
    bob.reserve("r", None)
    bob.reserve("r", None)
    with pytest.raises(QuotaWouldExceedError, match="bob has no calls left of their team budget"):
        bob.reserve("r", None)
    alice.reserve("r", None)  # budgets are per member
    bob.close()
    alice.close()


def test_one_pacer_spaces_every_member(team: str) -> None:
    """Two members, two threads each, one key: every turn the team's pacer gives, whichever
    member takes it, comes at least the key's stored step after the one before — read from
    the store's own clock (its ``pacers`` row, witnessed by a trigger), not the members';
    and no member is let through sooner than :data:`RESERVE_LEAD` before its turn. Each
    member's own pacer is 50 times faster than the key's pace, so only the one shared pacer
    can be what spaces them.

    Whatever the scheduler does this holds: a member woken late takes its next turn late,
    and the pacer never gives the next turn sooner for it (a late turn only widens the gap);
    a member released late is released later, never sooner. The allowance is only the
    clocks' (``_spikes.CLOCKS``: PostgreSQL's and the members')."""
    from parcelsearch._fetch.pacing import RateLimiter

    pace = set_pace(team, FP, Pace(rate=20, margin=0.05, lease_seconds=6))
    step = 1 / (pace.rate * (1 - pace.margin))  # 52.6 ms: 40 turns take about 2.2 s
    watch_turns(team)
    members = [_member(team, name) for name in ("alice", "bob")]
    own = [RateLimiter(1000) for _ in members]  # each member's own pace: no spacing to speak of

    def send(index: int) -> float:  # two threads per member
        members[index // 2].pace(own[index // 2], None)
        return time.time()

    released = moments(send, threads=2 * len(members), each=10)
    for member in members:
        member.close()
    seen = turns_seen(team)
    assert len(released) == len(seen) == 40 and {fp for fp, _, _ in seen} == {FP}  # one pacer
    was, nxt = [w for _, w, _ in seen], [n for _, _, n in seen]
    assert was[0] == -math.inf and was[1:] == nxt[:-1]  # each turn moved the slot it found
    assert short_steps(seen, step) == {}  # … a step (or more) on
    # the first call of each member leaves FIRST_CALL_ALLOWANCE more after it
    assert (
        sum(
            n - w >= step + FIRST_CALL_ALLOWANCE - 1e-6
            for w, n in zip(was[1:], nxt[1:], strict=True)
        )
        >= 1
    )
    # the k-th member let through (on the wall clock) was let through no sooner than the
    # k-th turn's slot less the lead: each call's turn is at or after the slot it found
    assert sooner_than_turns(released, was, lead=RESERVE_LEAD) == {}


def test_a_members_pool_is_made_for_its_workers_before_anything_is_paced(team: str) -> None:
    """A connection for each worker (at most 16) and two more, made when the member joins:
    a reservation never waits for the pool to grow in the moment before its turn."""
    for threads, size in ((4, 6), (40, 18)):
        member = TeamSpending.open(
            team,
            FP,
            user="alice",
            cache=None,
            threads=threads,
        )
        stats = member.pool.get_stats()
        assert stats["pool_min"] == stats["pool_max"] == stats["pool_size"] == size
        member.close()


def test_a_pause_holds_every_member(team: str) -> None:
    from parcelsearch._fetch.pacing import RateLimiter

    alice, bob = _member(team, "alice"), _member(team, "bob")
    alice.pause(1.0)
    start = time.monotonic()
    bob.pace(RateLimiter(10), None)
    assert time.monotonic() - start >= 0.9
    alice.close()
    bob.close()


def test_one_member_fetches_a_page_the_others_wait_and_read(team: str) -> None:
    alice, bob = _member(team, "alice"), _member(team, "bob")
    stop = threading.Event()
    assert alice.claim(_key("k1"), None, stop) is None  # alice fetches
    got: list[Page | None] = []
    waiter = threading.Thread(target=lambda: got.append(bob.claim(_key("k1"), None, stop)))
    waiter.start()
    time.sleep(0.3)
    assert not got  # bob waits for alice's page
    alice.keep(_page())
    waiter.join(5)
    assert got and got[0] is not None and got[0].data == _IDS
    usage = team_usage(team).set_index("name")
    assert (usage.loc["bob", "pages_shared"], usage.loc["bob", "calls_saved"]) == (1, 1)
    alice.close()
    bob.close()


def test_an_expired_lease_is_taken_over(
    team: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PARCELSEARCH_TEAM_LEASE", "0.5")
    alice, bob = _member(team, "alice"), _member(team, "bob")
    stop = threading.Event()
    assert alice.claim(_key("k2"), None, stop) is None  # alice claims, then dies (renews no more)
    alice.close()
    start = time.monotonic()
    assert bob.claim(_key("k2"), None, stop) is None  # bob takes over once the lease expires
    assert time.monotonic() - start >= 0.3
    bob.close()


def test_a_live_member_renews_its_lease(team: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARCELSEARCH_TEAM_LEASE", "0.5")
    alice, bob = _member(team, "alice"), _member(team, "bob")
    assert alice.claim(_key("k3"), None, threading.Event()) is None
    stop = threading.Event()
    threading.Timer(1.6, stop.set).start()  # three leases' time: alice, alive, still holds it
    with pytest.raises(Cancelled):
        bob.claim(_key("k3"), None, stop)
    alice.keep(_page("k3"))
    assert bob.claim(_key("k3"), None, threading.Event()) is not None  # landed: bob reads it
    alice.close()
    bob.close()


def test_a_members_lease_can_only_be_shorter_than_the_keys(
    team: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_pace(team, FP, Pace(rate=5, margin=0.1, lease_seconds=4))
    monkeypatch.setenv("PARCELSEARCH_TEAM_LEASE", "600")
    alice = _member(team, "alice")
    assert alice.lease_seconds == 4 and alice.policy == Pace(5, 0.1, 4)
    alice.close()
    monkeypatch.setenv("PARCELSEARCH_TEAM_LEASE", "2")
    bob = _member(team, "bob")
    assert bob.lease_seconds == 2
    bob.close()
    for bad in ("inf", "1e300", "nan", "0", "soon"):
        monkeypatch.setenv("PARCELSEARCH_TEAM_LEASE", bad)
        with pytest.raises(
            ConfigurationError, match="PARCELSEARCH_TEAM_LEASE must be a number from 0.5 to 3600"
        ):
            _member(team, "carol")


def test_a_lost_store_stops_with_a_clear_error(team: str) -> None:
    alice = _member(team, "alice")
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.calls RENAME TO calls_gone")
    with pytest.raises(TeamStoreError, match="lost while reserving a call.*Nothing was sent"):
        alice.reserve("r", None)
    alice.close()


def test_the_team_extra_brings_the_driver_and_its_absence_is_said(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["team"]
    assert {d.split("[")[0].split(">")[0] for d in extra} == {"psycopg", "psycopg-pool"}
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(TeamStoreError, match=r'pip install "parcelsearch\[team\]"'):
        init_team("postgresql://db.example/team")


def test_a_members_own_rate_paces_only_that_member(team: str) -> None:
    """The key's pace is stored (1 call/s): a member pacing itself at 0.01 calls/s moves the
    key's next slot by the key's interval, not by 100 s; one at 100 calls/s cannot narrow
    it (the store's next slot is the witness)."""
    from parcelsearch._fetch.pacing import RateLimiter

    set_pace(team, FP, Pace(rate=1, margin=0.05, lease_seconds=6))
    slow, fast = _member(team, "slow"), _member(team, "fast")

    def ahead() -> float:
        with psycopg.connect(team) as conn:
            return float(
                conn.execute(
                    "SELECT EXTRACT(EPOCH FROM next_slot - clock_timestamp()) "
                    f"FROM {SCHEMA}.pacers WHERE fingerprint = %s",
                    (FP,),
                ).fetchone()[0]
            )

    interval = 1 / 0.95 + FIRST_CALL_ALLOWANCE  # each member's first call
    slow.pace(RateLimiter(0.01), None)
    assert 0 < ahead() <= interval + RESERVE_LEAD  # not 100 s: the slow one holds up nobody
    fast.pace(RateLimiter(100), None)  # waits for the key's next slot, then claims the next
    assert interval / 2 < ahead() <= interval + RESERVE_LEAD  # not 10 ms apart
    slow.close()
    fast.close()


def test_a_version_2_store_is_upgraded_in_place_with_names_folded(postgres: Any) -> None:
    """Schema 2 → 3: the key's policy columns added with their defaults, the reserve
    function replaced, and members' names folded (their budgets merged into one)."""
    from parcelsearch.stores.team import migrations

    url = postgres.database("team")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        conn.execute(f"CREATE TABLE {SCHEMA}.meta (version integer NOT NULL)")
        for version in (1, 2):
            conn.execute(migrations.MIGRATIONS[version])
        conn.execute(f"INSERT INTO {SCHEMA}.meta VALUES (2)")
        conn.execute(
            f"INSERT INTO {SCHEMA}.keys (fingerprint, quota, period) VALUES (%s, 5, 'month')", (FP,)
        )
        conn.execute(
            f"INSERT INTO {SCHEMA}.budgets VALUES ('Alice', 7, 'month'), "
            "('alice', 2, 'month'), ('Bob', 3, 'month')"
        )
        conn.execute(
            f"INSERT INTO {SCHEMA}.calls (fingerprint, member, run_id, month) "
            f"VALUES (%s, 'Alice', 'r', {SCHEMA}.month_now())",
            (FP,),
        )
    assert init_team(url) == (2, VERSION)
    usage = team_usage(url).set_index("name")
    assert usage.loc[f"sha256:{FP}", "rate"] == 10 and usage.loc[f"sha256:{FP}", "limit"] == 5
    assert (usage.loc["alice", "limit"], usage.loc["alice", "calls_lifetime"]) == (2, 1)
    assert usage.loc["bob", "limit"] == 3 and "Alice" not in usage.index
    alice = _member(url, "alice")
    alice.reserve("r", None)
    with pytest.raises(QuotaWouldExceedError, match="budget of 2: 0 sent and 2 on the wire"):
        alice.reserve("r", None)
    alice.close()
