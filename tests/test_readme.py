"""Every command and the Python session in README.md run here, so the README cannot rot."""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import parcelsearch

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def console_commands() -> list[str]:
    """The ``$ `` lines of the README's console blocks, in order."""
    blocks = re.findall(r"```console\n(.*?)```", README.read_text(), flags=re.S)
    return [line[2:].split("  #")[0].strip() for block in blocks
            for line in block.splitlines() if line.startswith("$ ")]


def test_python_session_runs_as_written() -> None:
    failures, tried = doctest.testfile(
        str(README), module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert tried > 5
    assert failures == 0


def test_ci_runs_the_readme_install_and_test_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    commands = console_commands()
    assert "bash .ci/run" in commands  # the one command that installs and runs everything
    assert 'pip install -e ".[service]" && parcelsearch demo' in commands
    assert 'pip install -e ".[test]" && python -m pytest' in README.read_text()
    # CI installs the test extra (a superset of the service extra) and runs the same pytest.
    assert 'pip install --quiet -e ".[test]"' in ci
    assert re.search(r"^python -m pytest$", ci, flags=re.M)


@pytest.mark.slow
def test_every_console_command_runs(tmp_path: Path, service, ca_bundle, make_key) -> None:
    parcelsearch.demo_areas().to_file(tmp_path / "areas.gpkg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARCELSEARCH_")}
    env["PARCELSEARCH_CACHE_DIR"] = str(tmp_path / "cache")
    env["PARCELSEARCH_CA_BUNDLE"] = ca_bundle
    values = {  # the README's placeholders → the session's service, its key and its CA
        "PARCELSEARCH_API_KEY": make_key("production", quota=1_000),
        "PARCELSEARCH_BASE_URL": service.base_url,
        "PARCELSEARCH_CA_BUNDLE": ca_bundle,
    }
    ran = []
    for command in console_commands():
        if command.startswith("pip install"):
            command = command.partition(" && ")[2]  # the install itself is what CI runs
            if command == "python -m pytest":
                continue  # this very run
        if command == "bash .ci/run":
            continue  # CI itself, which runs this very test
        if command.startswith("export "):
            name, _, value = command[len("export "):].partition("=")
            env[name] = values.get(name, value)
            continue
        argv = shlex.split(command)
        assert argv[0] == "parcelsearch", command
        argv = [sys.executable, "-m", "parcelsearch.cli", *argv[1:]]
        if argv[3] == "serve":
            _serve_until_ready(argv, env, tmp_path)
        else:
            done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        ran.append(command)
    assert any("demo" in c for c in ran) and any("serve" in c for c in ran)


def _serve_until_ready(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    """Start ``serve`` (on a free port instead of the README's), wait for its line, stop it."""
    if "--port" in argv:
        argv[argv.index("--port") + 1] = "0"
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            assert re.match(r"serving https://127\.0\.0\.1:\d+ \(CA: .*ca\.pem\)", line), line
        finally:
            proc.terminate()
            proc.wait(timeout=30)
