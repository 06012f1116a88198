"""Team mode end to end: members in separate processes share one key through a PostgreSQL
team store, against the reference service over HTTPS.

Witnesses are the service's: its request log (every call it admitted, with the polygon's
hash and page) and its access log (every answer's status, 429s included).
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import psycopg
import pytest
from _spikes import admitted, lateness, sooner_than_turns, spike_refusals
from _team import short_steps, turns_seen, watch_turns

import parcelsearch
from parcelsearch.stores.team import set_budget, set_quota
from parcelsearch.stores.team.store import SCHEMA

pytestmark = pytest.mark.slow

#: Each member's areas: every area is wanted by two members (their pages overlap).
MEMBERS = {
    "alice": ["northside", "pine-street", "park-ring"],
    "bob": ["pine-street", "park-ring", "twin-sites"],
    "carol": ["northside", "twin-sites"],
}


class _Statuses(logging.Handler):
    """The service's access log, kept: one status per answer."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.args and isinstance(record.args, tuple):
            self.statuses.append(int(record.args[3]))


@pytest.fixture
def statuses() -> Iterator[list[int]]:
    logger = logging.getLogger("parcelsearch.service.access")
    handler = _Statuses()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.statuses
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
def member_files(tmp_path: Path, demo_areas: gpd.GeoDataFrame) -> dict[str, Path]:
    files = {}
    for name, wanted in MEMBERS.items():
        path = tmp_path / f"{name}-areas.parquet"
        demo_areas.loc[wanted].reset_index().to_parquet(path)
        files[name] = path
    return files


@pytest.fixture(scope="module")
def solo(
    service: Any,
    ca_bundle: str,
    tmp_path_factory: pytest.TempPathFactory,
    demo_areas: gpd.GeoDataFrame,
) -> dict[str, tuple[pd.DataFrame, int]]:
    """Each member's ids and calls searched alone (a key and cache of its own), and the
    calls of all their areas together (``"union"``); once for the module."""
    out = {}
    root = tmp_path_factory.mktemp("solo")
    wanted = {**MEMBERS, "union": sorted({a for areas in MEMBERS.values() for a in areas})}
    for name, areas in wanted.items():
        key = service.keys.create(f"team-solo-{name}", key_type="production", quota=100_000)
        client = parcelsearch.Client(key, service.base_url, ca_bundle, cache_dir=root / name)
        result = parcelsearch.search(demo_areas.loc[areas], client=client, progress=False)
        out[name] = (result.ids, result.calls)
    return out


def _env(key: str, service: Any, ca_bundle: str, cache: Path, **extra: str) -> dict[str, str]:
    src = str(Path(parcelsearch.__file__).parent.parent)
    return {
        **os.environ,
        "PARCELSEARCH_API_KEY": key,
        "PARCELSEARCH_BASE_URL": service.base_url,
        "PARCELSEARCH_CA_BUNDLE": ca_bundle,
        "PARCELSEARCH_CACHE_DIR": str(cache),
        "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
        **extra,
    }


def _member(
    name: str, areas: Path, out: Path, team: str, env: dict[str, str], *extra: str
) -> subprocess.Popen[bytes]:
    args = [
        sys.executable,
        "-m",
        "parcelsearch.cli",
        "search",
        str(areas),
        "--out",
        str(out),
        "--id-column",
        "area_id",
        "--team",
        team,
        "--user",
        name,
        "--quiet",
        *extra,
    ]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _same_ids(got: pd.DataFrame, want: pd.DataFrame) -> bool:
    pairs = {(str(a), str(g)) for a, g in zip(got["area_id"], got["group_id"], strict=True)}
    return pairs == {
        (str(a), str(g)) for a, g in zip(want["area_id"], want["group_id"], strict=True)
    }


def _run_members(
    tmp_path: Path,
    files: dict[str, Path],
    team: str,
    key: str,
    service: Any,
    ca_bundle: str,
    *extra: str,
) -> dict[str, tuple[int, str, Path]]:
    procs = {}
    for name, areas in files.items():
        # Each member paces at 8 of the key's 10 calls/s: members pacing apart would send 24
        # a second together (spike arrests); the one shared pacer keeps them at 8, with room
        # for a loaded test machine's scheduling jitter (bench_team measures the full rate).
        env = _env(key, service, ca_bundle, tmp_path / f"cache-{name}", PARCELSEARCH_RATE="8")
        procs[name] = (
            _member(name, areas, tmp_path / f"{name}.parquet", team, env, *extra),
            tmp_path / f"{name}.parquet",
        )
    done = {}
    for name, (proc, out) in procs.items():
        _, err = proc.communicate(timeout=300)
        done[name] = (proc.returncode, err.decode(), out)
    return done


def _log(service: Any, key: Any) -> pd.DataFrame:
    return service.keys.requests(key.name)


def _paced_within_the_spike_arrest(team: str, service: Any, key: Any, statuses: list[int]) -> int:
    """The key's spike-arrest refusals by the service, checked against what the team
    pacer's promise allows; returns them.

    The promise: one pacer for the key, whichever member calls, each turn at least the
    key's stored step (``1 / (rate × (1 - margin))``) after the one before, on the store's
    clock (``_team.turns_seen``, a trigger's record of its ``pacers`` row), and every call
    sent — admitted or refused — at its turn or later: so the k-th admission in the
    service's request log, on the service's clock, comes no sooner than the k-th turn
    (``_spikes.sooner_than_turns``), whatever the scheduler does. The allowance is what a
    busy machine may do within that promise: deliver a call late, so that it reaches the
    service within a second of ten others and is refused — a spike arrest, tallied by the
    service, never counted, waited out (every member pauses the key) and retried with a
    turn of its own. So every 429 the service answered is a spike refusal it tallied (none
    for the quota), every admission is counted, and the count of refusals is not bounded:
    a late call, not the pacer, is what they take.
    """
    log = _log(service, key)
    refused = spike_refusals(service.keys, key.name)
    assert statuses.count(429) == refused and not (log["status"] == 429).any()
    assert log["counted"].all()  # a refusal is not counted; every admitted call is
    pace = parcelsearch.team_usage(team).query("scope == 'key'").iloc[0]
    step = 1 / (pace["rate"] * (1 - pace["margin"]))
    seen = turns_seen(team)
    assert {fp for fp, _, _ in seen} <= {pace["fingerprint"]}  # one pacer for the key
    assert len(seen) >= len(log) + refused  # every call sent took a turn
    assert [was for _, was, _ in seen[1:]] == [nxt for _, _, nxt in seen[:-1]]
    assert short_steps(seen, step) == {}  # each turn a step (or more) after the one before
    assert sooner_than_turns(admitted(log), [was for _, was, _ in seen]) == {}
    print(
        f"{len(log)} admitted, {refused} spike refusals, {len(seen)} turns; two admissions "
        f"at most {lateness(log, step):.3f} s closer than their turns allow (a late call)"
    )
    return refused


def test_three_members_share_one_key_within_its_quota(
    team: str,
    service: Any,
    ca_bundle: str,
    make_key: Callable[..., Any],
    tmp_path: Path,
    member_files: dict[str, Path],
    solo: dict[str, tuple[pd.DataFrame, int]],
    statuses: list[int],
) -> None:
    """Three members, one key whose quota fits the pages they share: nobody refused for the
    quota, each page paid once, team usage equal to the service's count. Spike arrests: the
    allowance of :func:`_paced_within_the_spike_arrest` — on the service's clock no call
    sooner than the team pacer's turns allow; one a busy machine delivered late may be
    refused, and is waited out and retried, spending nothing."""
    union_calls = solo["union"][1]
    naive = sum(solo[name][1] for name in MEMBERS)
    assert union_calls < naive  # the quota below fits the shared pages, not the naive sum
    key = make_key("production", quota=union_calls)
    set_quota(
        team,
        parcelsearch.Client(key, service.base_url, ca_bundle).fingerprint,
        union_calls,
        "month",
    )
    statuses.clear()
    watch_turns(team)
    done = _run_members(tmp_path, member_files, team, key, service, ca_bundle)

    log = _log(service, key)
    assert len(log) <= union_calls  # the service counted no more than the quota
    # no quota violation; spike arrests only as the pacer's promise allows, each retried
    _paced_within_the_spike_arrest(team, service, key, statuses)
    assert not log.duplicated(["polygon_sha256", "page"]).any()  # each page paid once
    usage = parcelsearch.team_usage(team)
    keys = usage[usage["scope"] == "key"]
    assert keys["calls_lifetime"].tolist() == [len(log)]  # team usage = the service's count
    members = usage[usage["scope"] == "member"].set_index("name")
    assert members["calls_lifetime"].sum() == len(log)
    for name, (code, err, out) in done.items():
        assert code in (0, 3), f"{name}: {err[-2000:]}"
        if code == 0:
            assert _same_ids(pd.read_parquet(out), solo[name][0]), name
            # every page it needed: paid by it, or paid by another and shared
            mine = members.loc[name]
            assert mine["calls_lifetime"] + mine["calls_saved"] == solo[name][1], name
    refused = {name: err[-1500:] for name, (code, err, _) in done.items() if code}
    assert not refused, refused  # the quota fits all of them


def test_member_budgets_hold_under_concurrency(
    team: str,
    service: Any,
    ca_bundle: str,
    make_key: Callable[..., Any],
    tmp_path: Path,
    member_files: dict[str, Path],
    solo: dict[str, tuple[pd.DataFrame, int]],
    statuses: list[int],
) -> None:
    """Each member's budget holds with three members spending at once (``--allow-partial``:
    each spends up to its budget on whole areas, the cheapest first, pages the others
    fetched free); every call the service logged is one member's, none twice; spike
    arrests within the allowance of :func:`_paced_within_the_spike_arrest`."""
    key = make_key("production", quota=100_000)
    budgets = {name: max(1, solo[name][1] // 2) for name in MEMBERS}
    assert sum(budgets.values()) < solo["union"][1]  # together they cannot finish
    for name, calls in budgets.items():
        set_budget(team, name, calls)
    statuses.clear()
    watch_turns(team)
    done = _run_members(tmp_path, member_files, team, key, service, ca_bundle, "--allow-partial")
    usage = parcelsearch.team_usage(team)
    members = usage[usage["scope"] == "member"].set_index("name")
    for name, (code, err, out) in done.items():
        assert members.loc[name, "calls_lifetime"] <= budgets[name]  # the budget held
        assert members.loc[name, "limit"] == budgets[name]
        if code == 0:
            assert _same_ids(pd.read_parquet(out), solo[name][0]), name
        else:
            assert code == 3 and f"{name}'s team budget" in err, err[-2000:]
    assert 3 in [code for code, _, _ in done.values()]  # not everyone can finish
    log = _log(service, key)
    assert sum(int(members.loc[name, "calls_lifetime"]) for name in MEMBERS) == len(log)
    assert sum(members.loc[name, "calls_lifetime"] > 0 for name in MEMBERS) >= 2  # at once
    assert usage.loc[usage["scope"] == "key", "calls_lifetime"].tolist() == [len(log)]
    assert not log.duplicated(["polygon_sha256", "page"]).any()
    _paced_within_the_spike_arrest(team, service, key, statuses)


def test_a_member_killed_mid_run_leaves_nothing_blocking_and_a_rerun_resumes(
    team: str,
    service: Any,
    ca_bundle: str,
    make_key: Callable[..., Any],
    tmp_path: Path,
    member_files: dict[str, Path],
    solo: dict[str, tuple[pd.DataFrame, int]],
) -> None:
    key = make_key("production", quota=100_000)
    slow = {"PARCELSEARCH_RATE": "3", "PARCELSEARCH_TEAM_LEASE": "3"}
    env = _env(key, service, ca_bundle, tmp_path / "cache-alice", **slow)
    victim = _member("alice", member_files["alice"], tmp_path / "alice.parquet", team, env)
    deadline = time.monotonic() + 60
    while len(_log(service, key)) < 2:
        assert victim.poll() is None, victim.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, "alice did not start"
        time.sleep(0.02)
    os.kill(victim.pid, signal.SIGKILL)
    victim.communicate(timeout=30)
    with psycopg.connect(team) as conn:
        held = conn.execute(f"SELECT count(*) FROM {SCHEMA}.leases").fetchone()[0]
    assert held >= 1  # alice died holding leases on pages bob needs too

    env_bob = _env(key, service, ca_bundle, tmp_path / "cache-bob")
    bob = _member("bob", member_files["bob"], tmp_path / "bob.parquet", team, env_bob)
    _, err = bob.communicate(timeout=300)
    assert bob.returncode == 0, err.decode()[-2000:]  # alice's leases expired; bob took over
    assert _same_ids(pd.read_parquet(tmp_path / "bob.parquet"), solo["bob"][0])

    before = len(_log(service, key))
    rerun = _member("alice", member_files["alice"], tmp_path / "alice.parquet", team, env)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err.decode()[-2000:]
    assert _same_ids(pd.read_parquet(tmp_path / "alice.parquet"), solo["alice"][0])
    log = _log(service, key)
    assert len(log) - before < solo["alice"][1]  # resumed: what was fetched was not paid again
    with psycopg.connect(team) as conn:
        assert (
            conn.execute(
                f"SELECT count(*) FROM {SCHEMA}.leases WHERE expires > clock_timestamp()"
            ).fetchone()[0]
            == 0
        )


def test_an_unreachable_team_store_is_exit_1_naming_it(
    service: Any,
    ca_bundle: str,
    api_key: str,
    tmp_path: Path,
    member_files: dict[str, Path],
) -> None:
    env = _env(api_key, service, ca_bundle, tmp_path / "cache")
    url = "postgresql://alice:s3cret@127.0.0.1:9/team"
    proc = _member("alice", member_files["alice"], tmp_path / "out.parquet", url, env)
    _, err = proc.communicate(timeout=120)
    text = err.decode()
    assert proc.returncode == 1
    assert "postgresql://alice:***@127.0.0.1:9/team" in text and "s3cret" not in text
    assert service.keys.requests(api_key.name).empty  # type: ignore[attr-defined]


def _readme_team_commands() -> list[str]:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text.split("## Team mode", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```shell\n(.*?)```", section, flags=re.S)[0]
    return [line[2:] for line in block.splitlines() if line.startswith("$ ")]


def _cli(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "parcelsearch.cli", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_readme_team_commands_and_the_team_command_line(
    postgres: Any,
    service: Any,
    ca_bundle: str,
    make_key: Callable[..., Any],
    tmp_path: Path,
    demo_areas: gpd.GeoDataFrame,
) -> None:
    url = postgres.database("team")
    demo_areas.loc[["northside", "pine-street"]].reset_index().to_file(tmp_path / "areas.gpkg")
    key = make_key("production", quota=1_000)
    env = _env(key, service, ca_bundle, tmp_path / "cache")
    env.pop("PARCELSEARCH_TEAM", None)
    for command in _readme_team_commands():  # as written, on this session's store
        argv = shlex.split(command.replace("postgresql://db.example/team", url))[1:]
        done = _cli(argv, env, tmp_path)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
    assert "already" in _cli(["team", "init", url], env, tmp_path).stdout  # idempotent

    env_team = {**env, "PARCELSEARCH_TEAM": url, "PARCELSEARCH_USER": "dana"}
    assert (
        _cli(
            ["team", "quota", "--calls", "500", "--period", "month"], env_team, tmp_path
        ).returncode
        == 0
    )
    assert (
        _cli(["team", "budget", "--user", "erin", "--calls", "0"], env_team, tmp_path).returncode
        == 0
    )
    # A second machine (its own cache) reuses every page: nothing is sent.
    again = _cli(
        [
            "search",
            "areas.gpkg",
            "--id-column",
            "area_id",
            "--out",
            "dana.parquet",
            "--quiet",
            "--cache-dir",
            str(tmp_path / "cache-dana"),
        ],
        env_team,
        tmp_path,
    )
    assert again.returncode == 0, again.stderr
    refused = _cli(
        [
            "search",
            "areas.gpkg",
            "--id-column",
            "area_id",
            "--out",
            "erin.parquet",
            "--quiet",
            "--user",
            "erin",
            "--refresh",
        ],
        env_team,
        tmp_path,
    )
    assert refused.returncode == 3 and "erin's team budget allows 0 more" in refused.stderr
    log = service.keys.requests(key.name)
    usage = json.loads(_cli(["team", "usage", "--json"], env_team, tmp_path).stdout)
    by_name = {row["name"]: row for row in usage}
    login = getpass.getuser()
    fingerprint = parcelsearch.Client(key, service.base_url, ca_bundle).fingerprint
    assert by_name[f"sha256:{fingerprint}"]["calls_lifetime"] == len(log)
    assert (
        by_name[f"sha256:{fingerprint}"]["limit"],
        by_name[f"sha256:{fingerprint}"]["period"],
    ) == (500, "month")
    assert by_name[login]["calls_lifetime"] == len(log)  # the first search: the login name
    assert by_name["dana"]["calls_lifetime"] == 0
    assert by_name["dana"]["calls_saved"] == len(log) == by_name["dana"]["pages_shared"]
    assert (by_name["erin"]["calls_lifetime"], by_name["erin"]["limit"]) == (0, 0)
    # Issue 41: the key's row is what team mode counted, and the table says so: a search
    # with the same key outside team mode reaches the service but not the store.
    local = _cli(
        [
            "search",
            "areas.gpkg",
            "--id-column",
            "area_id",
            "--out",
            "local.parquet",
            "--quiet",
            "--cache-dir",
            str(tmp_path / "cache-local"),
        ],
        env,
        tmp_path,
    )
    assert local.returncode == 0, local.stderr
    table = _cli(["team", "usage"], env_team, tmp_path)
    assert "calls made with the same key outside team mode" in table.stdout
    usage = json.loads(_cli(["team", "usage", "--json"], env_team, tmp_path).stdout)
    key_row = next(row for row in usage if row["name"] == f"sha256:{fingerprint}")
    assert key_row["calls_lifetime"] == len(log) < len(service.keys.requests(key.name))


def test_a_store_lost_mid_run_stops_it_keeping_what_was_found(
    team: str,
    postgres: Any,
    service: Any,
    ca_bundle: str,
    make_key: Callable[..., Any],
    tmp_path: Path,
    member_files: dict[str, Path],
) -> None:
    key = make_key("production", quota=100_000)
    env = _env(key, service, ca_bundle, tmp_path / "cache", PARCELSEARCH_RATE="3")
    out = tmp_path / "alice.parquet"
    proc = _member("alice", member_files["alice"], out, team, env)
    deadline = time.monotonic() + 60
    while len(_log(service, key)) < 2:
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, "alice did not start"
        time.sleep(0.02)
    with postgres.lost(team):
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err.decode()[-2000:]
    assert "team store postgresql://" in err.decode() and "lost while" in err.decode()
    partial = pd.read_parquet(out)
    assert len(partial) > 0  # what was found is written (marked incomplete)
    with psycopg.connect(team) as conn:
        reserved = conn.execute(f"SELECT count(*) FROM {SCHEMA}.calls").fetchone()[0]
    assert len(_log(service, key)) <= reserved  # nothing was sent unreserved


def test_calls_outside_a_search_are_counted_in_the_teams_store(
    team: str,
    service: Any,
    ca_bundle: str,
    make_key: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """Issue 48: in team mode the market list and ``doctor``'s probes are reserved in the
    team's store (the team's quota sees them), by the member who spent them, and not in this
    machine's ledger; the service's request log is the witness of what was spent."""
    key = make_key("production", quota=1_000)
    env = {**_env(key, service, ca_bundle, tmp_path / "cache"), "PARCELSEARCH_TEAM": team}
    env.pop("PARCELSEARCH_USER", None)
    markets = _cli(["markets", "--user", "fay"], env, tmp_path)
    assert markets.returncode == 0, markets.stderr
    doctor = _cli(["doctor", "--yes", "--team", team, "--user", "gus"], env, tmp_path)
    assert doctor.returncode in (0, 1), doctor.stderr
    log = service.keys.requests(key.name)
    usage = {
        row["name"]: row
        for row in json.loads(_cli(["team", "usage", "--json"], env, tmp_path).stdout)
    }
    fingerprint = parcelsearch.Client(key, service.base_url, ca_bundle).fingerprint
    assert usage[f"sha256:{fingerprint}"]["calls_lifetime"] == len(log) >= 3
    assert usage["fay"]["calls_lifetime"] == 1  # the market list: one call
    assert usage["gus"]["calls_lifetime"] == len(log) - 1  # doctor's probes
    ledger = parcelsearch.Ledger.in_folder(tmp_path / "cache")
    assert ledger.usage(fingerprint).lifetime == 0  # not this machine's ledger


def test_calls_outside_a_search_stop_at_the_teams_quota(
    team: str,
    service: Any,
    ca_bundle: str,
    make_key: Callable[..., Any],
    tmp_path: Path,
) -> None:
    """The team's stored quota holds for the market list too: with none left, it is refused
    before anything is sent."""
    key = make_key("production", quota=1_000)
    env = {
        **_env(key, service, ca_bundle, tmp_path / "cache"),
        "PARCELSEARCH_TEAM": team,
        "PARCELSEARCH_USER": "hal",
    }
    assert (
        _cli(["team", "quota", "--calls", "0", "--period", "month"], env, tmp_path).returncode == 0
    )
    refused = _cli(["markets"], env, tmp_path)
    assert refused.returncode != 0
    assert service.keys.requests(key.name).empty
