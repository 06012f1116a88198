"""Every command and the Python session in README.md run here, so the README cannot rot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _examples import README, ROOT, console_commands, console_env, run_console, run_doctests


def test_python_session_runs_as_written() -> None:
    failures, tried = run_doctests(README)
    assert tried > 5
    assert failures == 0


def test_ci_runs_the_readme_install_and_test_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    commands = console_commands([README])
    assert "bash .ci/run" in commands  # the one command that installs and runs everything
    assert 'pip install -e ".[service]" && parcelsearch demo' in commands
    assert 'pip install -e ".[test]" && python -m pytest' in README.read_text()
    # CI installs the test extra (a superset of the service extra) and runs the same pytest.
    assert 'pip install --quiet -e ".[test]"' in ci
    assert re.search(r"^python -m pytest$", ci, flags=re.M)


@pytest.mark.slow
def test_every_console_command_runs(tmp_path: Path, service, ca_bundle, make_key) -> None:
    env, values = console_env(tmp_path, service.base_url, ca_bundle,
                              make_key("production", quota=1_000))
    ran = run_console(console_commands([README]), tmp_path, env, values)
    assert any("demo" in c for c in ran) and any(c.startswith("parcelsearch search") for c in ran)
