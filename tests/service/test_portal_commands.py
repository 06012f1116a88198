"""``parcelsearch portal add-user``: the password from standard input only, a hash stored."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from parcelsearch.errors import ConfigurationError
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.portal.commands import read_password
from parcelsearch_service.portal.storage import PortalStore

PASSWORD = "correct horse battery staple"


def _add_user(store: Path | str, *flags: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "parcelsearch.cli",
            "portal",
            "add-user",
            "--keys",
            str(store),
            *flags,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_add_user_reads_stdin_and_stores_a_hash(tmp_path: Path) -> None:
    store = tmp_path / "keys.sqlite"
    done = _add_user(store, "--email", "ann@example.com", "--admin", stdin=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert "added portal admin ann@example.com" in done.stderr
    keys = KeyStore(store)
    try:
        portal = PortalStore(keys)
        [user] = portal.users()
        assert user.email == "ann@example.com" and user.is_admin
        assert portal.authenticate("ann@example.com", PASSWORD) == user
    finally:
        keys.close()
    assert PASSWORD.encode() not in store.read_bytes()


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        pytest.param("", "no password on standard input", id="empty"),
        pytest.param("short\n", "at least 12 characters", id="short"),
    ],
)
def test_add_user_refuses_with_a_clear_error(tmp_path: Path, stdin: str, message: str) -> None:
    done = _add_user(tmp_path / "keys.sqlite", "--email", "bo@example.com", stdin=stdin)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_add_user_has_no_password_option(tmp_path: Path) -> None:
    done = _add_user(
        tmp_path / "keys.sqlite", "--email", "c@example.com", "--password", PASSWORD, stdin=""
    )
    assert done.returncode == 2 and "unrecognized arguments" in done.stderr


def test_add_user_twice_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "keys.sqlite"
    assert _add_user(store, "--email", "d@example.com", stdin=PASSWORD).returncode == 0
    again = _add_user(store, "--email", "d@example.com", stdin=PASSWORD)
    assert again.returncode == 2 and "already exists" in again.stderr


def test_read_password_takes_the_first_line() -> None:
    assert read_password(io.StringIO(PASSWORD + "\r\nsecond line\n")) == PASSWORD
    with pytest.raises(ConfigurationError, match="no password"):
        read_password(io.StringIO(""))


@pytest.mark.slow
def test_serve_portal_and_the_keys_command_share_one_store(tmp_path: Path) -> None:
    store = tmp_path / "keys.sqlite"
    assert _add_user(store, "--email", "eve@example.com", stdin=PASSWORD).returncode == 0
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "parcelsearch.cli",
            "serve",
            "--portal",
            "--keys",
            str(store),
            "--cert-dir",
            str(tmp_path / "certs"),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        serving = re.fullmatch(
            r"serving (https://127\.0\.0\.1:\d+) \(CA: (.+)\)\n", process.stdout.readline()
        )
        assert serving, "no serving line"
        base, ca = serving[1], serving[2]
        assert process.stdout.readline().startswith(f"portal at {base}/portal/")
        with requests.Session() as http:
            http.trust_env, http.verify = False, ca

            def csrf(page: requests.Response) -> str:
                found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
                assert found
                return found.group(1)

            form = http.get(base + "/portal/signin")
            page = http.post(
                base + "/portal/signin",
                data={"csrf_token": csrf(form), "email": "eve@example.com", "password": PASSWORD},
            )
            page = http.post(
                base + "/portal/apps",
                data={
                    "csrf_token": csrf(page),
                    "name": "eves",
                    "key_type": "demo",
                    "services": "markets",
                },
            )
            key = re.search(r'id="new-key">([^<]+)<', page.text)
            assert key
            for _ in range(3):
                assert http.get(base + "/v1/markets", headers={"x-api-key": key[1]}).ok
            listed = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "parcelsearch.cli",
                    "keys",
                    "list",
                    "--keys",
                    str(store),
                    "--json",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            )
            [row] = json.loads(listed.stdout)
            assert (row["name"], row["used_lifetime"], row["services"]) == (
                "eve@example.com/eves",
                3,
                ["markets"],
            )
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "parcelsearch.cli",
                    "keys",
                    "revoke",
                    "--keys",
                    str(store),
                    "--name",
                    "eve@example.com/eves",
                ],
                capture_output=True,
                timeout=60,
                check=True,
            )
            assert http.get(base + "/v1/markets", headers={"x-api-key": key[1]}).status_code == 401
            shown = http.get(base + "/portal/").text
            assert re.search(r'data-app="eves".*?revoked', shown, re.S)
    finally:
        process.terminate()
        process.wait(timeout=20)
        if process.stdout is not None:
            process.stdout.close()
