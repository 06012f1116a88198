"""``parcelsearch portal add-user``: the password from standard input only, a hash stored."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from parcelsearch.errors import ConfigurationError
from parcelsearch.service.keys import KeyStore
from parcelsearch.service.portal.commands import read_password
from parcelsearch.service.portal.storage import PortalStore

PASSWORD = "correct horse battery staple"


def _add_user(store: Path | str, *flags: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "parcelsearch.cli", "portal", "add-user", "--keys", str(store),
         *flags],
        input=stdin, capture_output=True, text=True, timeout=60,
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
    done = _add_user(tmp_path / "keys.sqlite", "--email", "c@example.com", "--password",
                     PASSWORD, stdin="")
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
