"""Run the examples of README.md and the guide (docs/) as written: doctests and console lines.

Python examples are ``>>>`` sessions in ```` ```python ```` blocks, run with :mod:`doctest`;
console examples are the ``$ `` lines of ```` ```console ```` blocks, run as commands in a
temporary folder against the test session's reference service (the placeholders for the key,
the URL and the CA replaced by the session's).
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = ROOT / "docs"
#: Commands CI itself runs after installing (the test run, the site's build): not re-run.
RUN_BY_CI = ("python -m pytest", "python -m sphinx")


def guide_pages() -> list[Path]:
    """The guide's and the site's own pages (the built site and generated pages left out)."""
    skip = ("_build", "generated", "_generated")
    return sorted(
        p
        for p in GUIDE.rglob("*")
        if p.suffix in {".md", ".rst"}
        and not any(part in skip for part in p.relative_to(GUIDE).parts)
    )


def fenced_blocks(path: Path, language: str) -> list[str]:
    """The bodies of the ```` ```language ```` blocks of a page, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def console_commands(paths: Iterable[Path]) -> list[str]:
    """The ``$ `` lines of the pages' console blocks, in order, comments dropped."""
    return [
        line[2:].split("  #")[0].strip()
        for path in paths
        for block in fenced_blocks(path, "console")
        for line in block.splitlines()
        if line.startswith("$ ")
    ]


def run_doctests(path: Path) -> doctest.TestResults:
    """Run the ``>>>`` examples of one page (one namespace a page)."""
    return doctest.testfile(
        str(path),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )


def console_env(
    tmp_path: Path, base_url: str, ca_bundle: str, api_key: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(environment, placeholder values) for :func:`run_console` in ``tmp_path``.

    The environment has no ``PARCELSEARCH_`` variable but a cache folder in ``tmp_path`` and
    the CA; ``tmp_path`` gets the demo areas as ``areas.gpkg`` (the pages' study areas).
    """
    import parcelsearch

    parcelsearch.demo_areas().to_file(tmp_path / "areas.gpkg")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARCELSEARCH_")}
    env["PARCELSEARCH_CACHE_DIR"] = str(tmp_path / "cache")
    env["PARCELSEARCH_CA_BUNDLE"] = ca_bundle
    values = {  # the pages' placeholders → the session's service, its key and its CA
        "PARCELSEARCH_API_KEY": api_key,
        "PARCELSEARCH_BASE_URL": base_url,
        "PARCELSEARCH_CA_BUNDLE": ca_bundle,
    }
    return env, values


def run_console(
    commands: Iterable[str], cwd: Path, env: dict[str, str], values: Mapping[str, str]
) -> list[str]:
    """Run each command as written; ``export`` lines set ``env`` (``values`` wins).

    A ``pip install … && COMMAND`` line runs only COMMAND (the install is what CI does),
    and not even that when it is one of :data:`RUN_BY_CI`. ``serve`` is started on a free
    port, awaited until it prints its ready line, and stopped. Returns the commands run.
    """
    ran = []
    for command in commands:
        if command == "bash .ci/run":
            continue  # CI itself, which runs this very test
        if command.startswith("pip install"):
            command = command.partition(" && ")[2]  # the install itself is what CI runs
            if not command or command.startswith(RUN_BY_CI):
                continue
        if command.startswith("export "):
            name, _, value = command[len("export ") :].partition("=")
            env[name] = values.get(name, value)
            continue
        argv = shlex.split(command)
        assert argv[0] == "parcelsearch", command
        argv = [sys.executable, "-m", "parcelsearch.cli", *argv[1:]]
        if argv[3] == "serve":
            _serve_until_ready(argv, env, cwd)
        else:
            done = subprocess.run(
                argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        ran.append(command)
    return ran


def _serve_until_ready(argv: list[str], env: dict[str, str], cwd: Path) -> None:
    """Start ``serve`` (on a free port instead of the page's), wait for its line, stop it."""
    if "--port" in argv:
        argv[argv.index("--port") + 1] = "0"
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            assert re.match(r"serving https://127\.0\.0\.1:\d+ \(CA: .*ca\.pem\)", line), line
        finally:
            proc.terminate()
            proc.wait(timeout=30)
