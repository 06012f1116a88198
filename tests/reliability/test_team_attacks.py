"""The attacks of issue 39 on team mode, by a careless or hostile member, each reproduced
with the command line and a team store on the real PostgreSQL: where the service's own
counting is the point (spike arrests, calls served), against ``parcelsearch serve --workers
2 --access-log`` on both key stores (SQLite, PostgreSQL); else against the session's service.

Witnesses: the service's request log (every call it admitted) and access log (every answer,
429s included), and the team store's own rows.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _team_members import _KEYS, Member, _fingerprint, _key, _served, _store_calls

import parcelsearch
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.team import Pace, set_budget, set_pace, set_quota
from parcelsearch.stores.team.store import SCHEMA

#: The search every attack runs: all the demo areas (well over ten calls).
AREAS = "areas.parquet"
SEARCH = ["search", AREAS, "--id-column", "area_id", "--out", "x.parquet", "--quiet"]


@pytest.fixture
def areas(tmp_path: Path) -> Path:
    path = tmp_path / AREAS
    parcelsearch.demo_areas().to_parquet(path)
    return path


class AccessLog:
    """The service's access log from now on: its 429s to searches."""

    def __init__(self, svc: Any) -> None:
        self.path = Path(svc.log_path)
        self.start = self.path.stat().st_size

    def spike_arrests(self) -> int:
        with self.path.open("rb") as log:
            log.seek(self.start)
            text = log.read().decode(errors="replace")
        return len(re.findall(r'"GET /[^"]*search[^"]*" 429 ', text))


@pytest.fixture
def svc(attack_service: Any) -> Iterator[Any]:
    yield attack_service


@pytest.mark.slow
def test_a_members_own_quota_cannot_raise_the_stored_one(
    svc: Any, team: str, areas: Path, tmp_path: Path
) -> None:
    """Finding 1: stored quota 3, a member passes --quota 1000/month (and the guide's
    PARCELSEARCH_QUOTA=production): the service serves at most 3."""
    name, key = _key(svc, quota=10_000)
    set_quota(team, _fingerprint(key), 3, "month")
    member = Member(svc, tmp_path, key, "mallory", PARCELSEARCH_QUOTA="production")
    paced = member.run("team", "pace", "--rate", "8", "--lease", "5", "--team", team)
    assert paced.returncode == 0 and "8 calls a second" in paced.stdout, paced.stderr
    done = member.run(
        *member.search(
            areas, "--team", team, "--user", "mallory", "--quota", "1000/month", "--allow-partial"
        )
    )
    assert done.returncode == 3, done.stderr[-2000:]
    assert _served(svc, name) <= 3 and _store_calls(team) <= 3
    usage = member.run("team", "usage", "--json", "--team", team)
    assert '"limit":3' in usage.stdout and '"rate":8.0' in usage.stdout  # the team's values
    assert '"lease_seconds":5.0' in usage.stdout and '"margin":0.05' in usage.stdout


def test_a_members_rate_cannot_widen_the_keys_pace(
    svc: Any, team: str, areas: Path, tmp_path: Path
) -> None:
    """Finding 2: one member with PARCELSEARCH_RATE=100 on a key allowing 10 calls/s: the
    key's stored pace holds, the service answers no spike arrest."""
    name, key = _key(svc, quota=10_000, per_second=10)
    log = AccessLog(svc)
    member = Member(svc, tmp_path, key, "mallory", PARCELSEARCH_RATE="100")
    done = member.run(*member.search(areas, "--team", team, "--user", "mallory", "--workers", "16"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert _served(svc, name) > 10
    assert log.spike_arrests() == 0


def test_budgets_hold_whatever_the_case_or_width_of_the_name(
    svc: Any, team: str, areas: Path, tmp_path: Path
) -> None:
    """Finding 3: alice's budget of 2 holds for ``--user Alice`` and ``--user ＡＬＩＣＥ``."""
    name, key = _key(svc, quota=10_000)
    set_budget(team, "alice", 2)
    member = Member(svc, tmp_path, key, "alice")
    for spelled in ("Alice", "ＡＬＩＣＥ"):
        done = member.run(
            *member.search(areas, "--team", team, "--user", spelled, "--allow-partial", "--refresh")
        )
        assert done.returncode == 3, done.stderr[-2000:]
        assert "alice" in done.stderr
    assert _served(svc, name) <= 2 and _store_calls(team, "alice") == _store_calls(team) <= 2


def _kill_after(proc: subprocess.Popen[str], svc: Any, name: str, calls: int) -> None:
    deadline = time.monotonic() + 120
    while _served(svc, name) < calls:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the search did not start"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


@pytest.mark.slow
def test_a_killed_member_leaves_only_its_calls_on_the_wire_charged_and_no_long_lease(
    svc: Any, team: str, areas: Path, tmp_path: Path
) -> None:
    """Findings 4 and 2 (the lease): a member paced slowly by its own setting, 8 workers
    waiting at the pacer, and asking for 600-second leases, is killed with ``kill -9``:
    the store charges at most the calls on the wire (one at a time at 2 calls/s: the one
    sent, or the one reserved a moment before its turn), and the leases it left end within
    the key's stored lease (4 s), not 600."""
    name, key = _key(svc, quota=10_000)
    set_pace(team, _fingerprint(key), Pace(10, 0.05, 4))
    member = Member(
        svc, tmp_path, key, "mallory", PARCELSEARCH_RATE="2", PARCELSEARCH_TEAM_LEASE="600"
    )
    proc = member.start(*member.search(areas, "--team", team, "--user", "mallory"))
    _kill_after(proc, svc, name, 3)
    served = _served(svc, name)
    assert served <= _store_calls(team) <= served + 1  # nothing unreserved, no phantoms
    with psycopg.connect(team) as conn:
        longest = conn.execute(
            f"SELECT EXTRACT(EPOCH FROM max(expires) - clock_timestamp()) FROM {SCHEMA}.leases"
        ).fetchone()[0]
    assert longest is not None and float(longest) <= 4


@pytest.mark.slow
def test_a_killed_local_search_leaves_only_its_calls_on_the_wire_in_the_ledger(
    svc: Any, areas: Path, tmp_path: Path
) -> None:
    """Finding 4, the local ledger: 8 workers waiting at a 2 calls/s pacer, ``kill -9``."""
    name, key = _key(svc, quota=10_000)
    member = Member(svc, tmp_path, key, "solo", PARCELSEARCH_RATE="2")
    proc = member.start(*member.search(areas))
    _kill_after(proc, svc, name, 3)
    served = _served(svc, name)
    ledger = Ledger.in_folder(tmp_path / "cache-solo")
    assert served <= ledger.usage(_fingerprint(key)).lifetime <= served + 1


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["team", "quota", "--calls", "2147483648"], {}, "--calls"),
        (["team", "budget", "--user", "bob", "--calls", "99999999999"], {}, "--calls"),
        ([*SEARCH, "--quota", "3000000000/month"], {}, "--quota"),
        (SEARCH, {"PARCELSEARCH_QUOTA": "3000000000/month"}, "PARCELSEARCH_QUOTA"),
        (SEARCH, {"PARCELSEARCH_TEAM_LEASE": "inf"}, "PARCELSEARCH_TEAM_LEASE"),
        (SEARCH, {"PARCELSEARCH_TEAM_LEASE": "1e300"}, "PARCELSEARCH_TEAM_LEASE"),
        (["team", "pace", "--rate", "1e309"], {}, "--rate"),
    ],
)
def test_values_beyond_the_stores_range_are_usage_errors(
    service: Any,
    team: str,
    areas: Path,
    tmp_path: Path,
    argv: list[str],
    env: dict[str, str],
    named: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Finding 8: exit 2 naming the option and its range, nothing sent, nothing stored."""
    key = service.keys.create(f"range-{next(_KEYS)}", key_type="production", quota=10_000)
    member = Member(
        service, tmp_path, key, "bob", PARCELSEARCH_TEAM=team, PARCELSEARCH_USER="bob", **env
    )
    done = member.main(monkeypatch, capsys, *argv)
    assert done.returncode == 2, done.stderr[-2000:]
    assert named in done.stderr and "store lost" not in done.stderr
    assert re.search(r"2147483647|3600|1000", done.stderr), done.stderr
    assert _store_calls(team) == 0


def test_a_huge_user_name_is_not_echoed_whole(
    service: Any,
    team: str,
    areas: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Finding 11: a 10 kB --user is refused with its first characters, not echoed whole."""
    member = Member(service, tmp_path, "k" * 40, "bob")
    done = member.main(
        monkeypatch, capsys, *member.search(areas, "--team", team, "--user", "A" * 10_000)
    )
    assert done.returncode == 2
    assert "10000 characters" in done.stderr and len(done.stderr) < 1_000


def test_a_fifo_as_the_areas_file_is_refused(
    service: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Finding 11: a FIFO given as the areas file is an input error, not a hang."""
    fifo = tmp_path / "areas.gpkg"
    os.mkfifo(fifo)
    member = Member(service, tmp_path, "k" * 40, "bob")
    done = member.main(
        monkeypatch, capsys, "search", str(fifo), "--out", str(tmp_path / "x.parquet"), "--quiet"
    )
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr[-2000:]


@pytest.mark.slow
def test_a_member_role_searches_but_cannot_rewrite_the_policy_or_the_ledger(
    svc: Any, team: str, areas: Path, tmp_path: Path
) -> None:
    """Finding 3's remedy: ``team init --member-role``; a member logging in with that role
    runs searches within its budget, and can neither raise the budget or quota nor delete
    its calls."""
    role = f"member_{os.getpid()}_{next(_KEYS)}"
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    name, key = _key(svc, quota=10_000)
    owner = Member(svc, tmp_path, key, "owner")
    done = owner.run("team", "init", team, "--member-role", role)
    assert done.returncode == 0 and role in done.stdout, done.stderr
    set_budget(team, "mallory", 2)
    as_member = team.replace("postgres@", f"{role}@")
    mallory = Member(
        svc, tmp_path, key, "mallory", PARCELSEARCH_TEAM=as_member, PARCELSEARCH_USER="mallory"
    )
    done = mallory.run(*mallory.search(areas, "--allow-partial"))
    assert done.returncode == 3 and "mallory" in done.stderr, done.stderr[-2000:]
    assert 0 < _served(svc, name) <= 2
    for argv in (
        ["team", "budget", "--user", "mallory", "--calls", "1000"],
        ["team", "quota", "--calls", "1000"],
        ["team", "pace", "--rate", "100"],
    ):
        refused = mallory.run(*argv)
        assert refused.returncode == 1 and "permission denied" in refused.stderr, argv
    with psycopg.connect(as_member, autocommit=True) as conn:
        for statement in (
            f"DELETE FROM {SCHEMA}.calls",
            f"UPDATE {SCHEMA}.calls SET member = 'x'",
            f"UPDATE {SCHEMA}.budgets SET calls = 1000",
            f"UPDATE {SCHEMA}.keys SET quota = NULL",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
    assert _store_calls(team, "mallory") == _served(svc, name)


@pytest.mark.slow
def test_a_store_lost_mid_run_is_said_once_and_truly(
    svc: Any, team: str, postgres: Any, areas: Path, tmp_path: Path
) -> None:
    """Finding 7: the store is lost mid-run. One message says so; the summary's calls are
    the calls the service served; the run is not said to be recorded; no pool noise."""
    name, key = _key(svc, quota=10_000)
    member = Member(svc, tmp_path, key, "alice", PARCELSEARCH_RATE="3")
    proc = member.start(*member.search(areas, "--team", team, "--user", "alice"))
    deadline = time.monotonic() + 60
    while _served(svc, name) < 3:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the search did not start"
        time.sleep(0.02)
    with postgres.lost(team):
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err[-2000:]
    assert err.count("lost while") == 1, err
    assert "pool" not in err, err
    assert "recorded (" not in out, out  # the run history could not be written
    assert "not recorded in the run history (the team store is lost)" in err, err
    made = re.search(r"(\d+) calls? made", out + err)
    assert made is not None, out + err
    assert int(made.group(1)) == _served(svc, name), (out, err)


@pytest.mark.slow
def test_what_is_left_is_counted_from_what_was_sent(svc: Any, team: str, tmp_path: Path) -> None:
    """Finding 10: a member pacing itself slowly with eight workers holds no reservations
    while it waits, so another member, pricing its search against the stored quota of 10,
    is told what is truly left: never fewer calls than the quota minus what the service
    served (and one on the wire)."""
    name, key = _key(svc, quota=10_000)
    set_quota(team, _fingerprint(key), 10, "month")
    members = []
    for n in range(2):
        areas = tmp_path / f"cells{n}.parquet"
        _cells(8 * n).to_parquet(areas)
        member = Member(
            svc, tmp_path, key, f"m{n}", **({"PARCELSEARCH_RATE": "2"} if n == 0 else {})
        )
        members.append((member, member.search(areas, "--team", team, "--user", f"m{n}")))
    slow = members[0][0].start(*members[0][1])
    deadline = time.monotonic() + 60
    while _served(svc, name) < 1:
        assert slow.poll() is None, slow.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the search did not start"
        time.sleep(0.02)
    other = members[1][0].run(*members[1][1])
    served = _served(svc, name)
    slow.kill()
    slow.communicate(timeout=30)
    for left in re.findall(r"has (\d+) left of its quota", other.stderr):
        assert int(left) >= 10 - served - 1, (other.stderr, served)
    assert other.returncode in (0, 3), other.stderr[-2000:]
    assert _served(svc, name) <= 10


def _cells(first: int, count: int = 8) -> Any:
    """``count`` small cells over the demo fabric, one call each."""
    import geopandas as gpd
    from shapely.geometry import box

    x0, y0 = -99.745, 32.44
    cells = [
        box(
            x0 + 0.002 * (i % 10),
            y0 + 0.002 * (i // 10),
            x0 + 0.002 * (i % 10) + 0.0015,
            y0 + 0.002 * (i // 10) + 0.0015,
        )
        for i in range(first, first + count)
    ]
    return gpd.GeoDataFrame(
        {"area_id": [f"c{i:03d}" for i in range(first, first + count)]},
        geometry=cells,
        crs="EPSG:4326",
    )
