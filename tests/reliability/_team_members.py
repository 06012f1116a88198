"""A team member's command line against the service, and the witnesses the team attacks
read (the service's request log, the team store's calls): shared by
``test_team_attacks.py`` and ``test_team_member_attacks.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

import parcelsearch
from parcelsearch.stores.team.store import SCHEMA

_KEYS = iter(range(1_000_000))


class Member:
    """One member's command line: a key, a cache folder of its own, the service's CA."""

    def __init__(self, svc: Any, tmp_path: Path, key: str, name: str, **env: str) -> None:
        src = str(Path(parcelsearch.__file__).parent.parent)
        self.env = {
            **os.environ,
            "PARCELSEARCH_API_KEY": key,
            "PARCELSEARCH_BASE_URL": svc.base_url,
            "PARCELSEARCH_CA_BUNDLE": str(svc.ca_path),
            "PARCELSEARCH_CACHE_DIR": str(tmp_path / f"cache-{name}"),
            "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
            **env,
        }
        for unset in (
            "PARCELSEARCH_TEAM",
            "PARCELSEARCH_USER",
            "PARCELSEARCH_QUOTA",
            "PARCELSEARCH_RATE",
            "PARCELSEARCH_TEAM_LEASE",
        ):
            if unset not in env:
                self.env.pop(unset, None)
        self.cwd = tmp_path
        self.name = name

    def start(self, *argv: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "parcelsearch.cli", *argv],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "parcelsearch.cli", *argv],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def main(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
    ) -> subprocess.CompletedProcess[str]:
        """The command line in this process (for what ends before anything is sent)."""
        from _cli import run

        for name in [n for n in os.environ if n.startswith("PARCELSEARCH_")]:
            monkeypatch.delenv(name)
        for name, value in self.env.items():
            if name.startswith("PARCELSEARCH_"):
                monkeypatch.setenv(name, value)
        monkeypatch.chdir(self.cwd)
        code, out, err = run(list(argv), capsys)
        return subprocess.CompletedProcess(list(argv), code, out, err)

    def search(self, areas: Path, *extra: str) -> list[str]:
        return [
            "search",
            str(areas),
            "--id-column",
            "area_id",
            "--quiet",
            "--out",
            str(self.cwd / f"{self.name}-{next(_KEYS)}.parquet"),
            *extra,
        ]


def _key(svc: Any, **kw: Any) -> tuple[str, str]:
    name = f"team-attack-{os.getpid()}-{next(_KEYS)}"
    return name, svc.keys.create(name, key_type="production", **kw)


def _fingerprint(key: str) -> str:
    return parcelsearch.Client(key, "https://127.0.0.1:9", cache_dir=None).fingerprint


def _served(svc: Any, name: str) -> int:
    """Calls the service admitted for the key (its request log)."""
    return len(svc.keys.requests(name))


def _store_calls(team: str, member: str | None = None) -> int:
    with psycopg.connect(team) as conn:
        if member is None:
            return int(conn.execute(f"SELECT count(*) FROM {SCHEMA}.calls").fetchone()[0])
        return int(
            conn.execute(
                f"SELECT count(*) FROM {SCHEMA}.calls WHERE member = %s", (member,)
            ).fetchone()[0]
        )
