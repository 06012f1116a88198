"""Every command and the Python session in README.md run here, so the README cannot rot."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib.metadata import requires, version
from pathlib import Path

import pytest
from _examples import README, ROOT, console_commands, console_env, run_console, run_doctests
from packaging.requirements import Requirement


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
    env, values = console_env(
        tmp_path, service.base_url, ca_bundle, make_key("production", quota=1_000)
    )
    ran = run_console(console_commands([README]), tmp_path, env, values)
    assert any("demo" in c for c in ran) and any(c.startswith("parcelsearch search") for c in ran)


def _notebook_extra() -> list[Requirement]:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return [Requirement(text) for text in extras["notebook"]]


def test_the_readme_installs_the_notebook_extra_which_names_what_jupyter_needs() -> None:
    """The issue: no install gave Jupyter, and the analyst added nbconvert and ipykernel by
    hand. The README's notebook install names the extra; the extra names JupyterLab (which
    brings nbconvert through jupyter-server), the kernel, and the widgets' and the maps'
    JupyterLab front ends."""
    assert {r.name for r in _notebook_extra()} == {
        "jupyterlab",
        "ipykernel",
        "ipywidgets",
        "jupyter-leaflet",
    }
    assert all(r.specifier for r in _notebook_extra())  # each with its floor
    readme = README.read_text()
    assert 'pip install -e ".[service,notebook]"' in readme and "jupyter lab" in readme
    assert "python -m venv .venv" in readme


@pytest.mark.slow
def test_what_the_notebook_extra_installs_runs_a_kernel_and_the_maps(tmp_path: Path) -> None:
    pytest.importorskip(
        "jupyterlab",
        reason='the notebook extra is not installed: pip install -e ".[test,notebook]"',
    )
    for requirement in _notebook_extra():
        assert requirement.specifier.contains(version(requirement.name)), requirement
    assert any(Requirement(r).name == "nbconvert" for r in requires("jupyter-server") or [])
    # the kernel installs (a kernelspec naming this interpreter) and the front ends are there
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ipykernel",
            "install",
            "--prefix",
            str(tmp_path),
            "--name",
            "parcelsearch",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    spec = json.loads((tmp_path / "share/jupyter/kernels/parcelsearch/kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and spec["language"] == "python"
    listed = subprocess.run(
        [sys.executable, "-m", "jupyterlab.labextensions", "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    text = listed.stdout + listed.stderr
    assert re.search(r"jupyter-leaflet v\S+ .*enabled", text), text
    assert re.search(r"@jupyter-widgets/jupyterlab-manager v\S+ .*enabled", text), text


def test_the_readme_leads_to_your_own_areas() -> None:
    readme = README.read_text()
    assert "parcelsearch parcels synth areas.gpkg --out parcels.parquet" in readme
    assert "(docs/guide/own-areas.md)" in readme
