"""The ``serve`` and ``keys`` commands, run as a user would (subprocesses)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from parcelsearch_service.keys import KeyStore

CLI = [sys.executable, "-m", "parcelsearch.cli"]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """``parcelsearch serve --port 0`` on the demo data: (base URL, CA path, keys file)."""
    keys = tmp_path / "keys.sqlite"
    process = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--keys",
            str(keys),
            "--cert-dir",
            str(tmp_path / "certs"),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.fullmatch(r"serving (https://127\.0\.0\.1:(\d+)) \(CA: (.+)\)\n", line)
        assert match, line
        assert int(match[2]) > 0
        yield match[1], match[3], keys
    finally:
        process.terminate()
        process.wait(timeout=20)
        if process.stdout is not None:
            process.stdout.close()


def test_serve_prints_one_line_and_serves(served: tuple[str, str, Path], tmp_path: Path) -> None:
    base_url, ca, keys = served
    assert Path(ca) == tmp_path / "certs" / "ca.pem"
    created = _run("keys", "create", "--keys", str(keys), "--name", "cli", "--type", "demo")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    assert created.stdout == key + "\n" and len(key) >= 32
    with requests.Session() as session:
        session.trust_env = False
        response = session.get(base_url + "/v1/markets", headers={"x-api-key": key}, verify=ca)
    assert response.json()["status"] == "OK"


@pytest.mark.slow
def test_keys_create_list_revoke(keys_location: str) -> None:
    """The same commands on a SQLite file and on a PostgreSQL URL."""
    keys = keys_location
    made = _run(
        "keys",
        "create",
        "--keys",
        keys,
        "--name",
        "big",
        "--type",
        "production",
        "--per-second",
        "50",
        "--quota",
        "9000",
        "--quota-period",
        "lifetime",
        "--services",
        "search",
    )
    assert made.returncode == 0, made.stderr
    listed = _run("keys", "list", "--keys", keys, "--json")
    (row,) = json.loads(listed.stdout)
    assert {
        k: row[k]
        for k in (
            "name",
            "type",
            "per_second",
            "quota",
            "quota_period",
            "services",
            "used_lifetime",
            "used_month",
            "revoked",
        )
    } == {
        "name": "big",
        "type": "production",
        "per_second": 50.0,
        "quota": 9000,
        "quota_period": "lifetime",
        "services": ["search"],
        "used_lifetime": 0,
        "used_month": 0,
        "revoked": False,
    }
    store = KeyStore(keys)
    try:
        rows = store.execute(store.connection(), "SELECT * FROM keys").fetchall()
    finally:
        store.close()
    stored = " ".join(str(row[column]) for row in rows for column in row.keys())
    assert made.stdout.strip() not in listed.stdout + stored
    table = _run("keys", "list", "--keys", keys)
    assert table.stdout.splitlines()[0].split() == [
        "name",
        "type",
        "per_second",
        "quota",
        "period",
        "services",
        "used",
        "this_month",
        "revoked",
    ]
    assert _run("keys", "revoke", "--keys", keys, "--name", "big").returncode == 0
    assert json.loads(_run("keys", "list", "--keys", keys, "--json").stdout)[0]["revoked"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["keys", "revoke", "--name", "ghost"], "no key named 'ghost'", id="revoke"),
        pytest.param(
            ["keys", "create", "--name", "x", "--services", "zoning"],
            "services must be some of search, markets",
            id="service",
        ),
    ],
)
def test_keys_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = _run(*args[:2], "--keys", str(tmp_path / "k.sqlite"), *args[2:])
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["keys", "list", "--keys", "postgresql://nobody@127.0.0.1:1/none"],
            "cannot connect to the key store postgresql://nobody@127.0.0.1:1/none",
            id="unreachable-keys",
        ),
        pytest.param(
            ["serve", "--workers", "0"], "--workers: must be a whole number >= 1", id="workers"
        ),
        pytest.param(
            ["parcels", "load", "missing.gpkg", "--into", "postgresql://nobody@127.0.0.1:1/none"],
            "parcels file 'missing.gpkg' does not exist",
            id="missing-parcels",
        ),
    ],
)
def test_service_options_errors_are_one_line(args: list[str], message: str) -> None:
    result = _run(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_default_service_dir_from_environment(tmp_path: Path) -> None:
    env = {**os.environ, "PARCELSEARCH_SERVICE_DIR": str(tmp_path / "svc")}
    assert _run("keys", "create", "--name", "envkey", env=env).returncode == 0
    assert (tmp_path / "svc" / "keys.sqlite").exists()
