"""The suite's fast inner loop: the toolkit's tests run without the service, and the README's
fast command selects by markers that exist and that tests/conftest.py applies."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from _examples import GUIDE, README, ROOT

#: Runs pytest in a fresh interpreter, then writes its exit code and every module it imported.
PROBE = """
import json, sys
import pytest
code = pytest.main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"code": int(code), "modules": sorted(sys.modules)}, out)
"""

#: The fast loop as README.md's testing paragraph gives it.
FAST_LOOP = re.compile(r'`(python -m pytest -m "[^"`]+")`')


def _pytest(tmp_path: Path, *args: str) -> dict[str, object]:
    """Exit code and imported modules of ``python -m pytest ARGS`` run from the repository."""
    out = tmp_path / "probe.json"
    subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(out),
            "-p",
            "no:cacheprovider",
            "-n",
            "0",
            "--basetemp",
            str(tmp_path / "basetemp"),
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    result: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _imported(modules: object, *packages: str) -> list[str]:
    assert isinstance(modules, list)
    return [name for name in modules if name.split(".")[0] in packages]


@pytest.mark.slow  # a fresh pytest process
def test_a_toolkit_test_file_runs_without_importing_the_service_or_psycopg(
    tmp_path: Path,
) -> None:
    seen = _pytest(tmp_path, "-q", "tests/test_areas.py")
    assert seen["code"] == 0
    assert "parcelsearch.planning.areas" in _imported(seen["modules"], "parcelsearch")
    assert _imported(seen["modules"], "parcelsearch_service", "psycopg") == []


#: Two test files of three tests each; every test writes down the worker that ran it.
_WORKER_PROBE = """
import os, pathlib

def _note(name):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")
    pathlib.Path(__file__).with_name(name).write_text(f"{worker} {count}")

def test_a(): _note(__name__ + "-a")
def test_b(): _note(__name__ + "-b")
def test_c(): _note(__name__ + "-c")
"""


@pytest.mark.slow  # a fresh pytest process and its workers
def test_the_suite_runs_one_process_per_core_a_file_in_one(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    """README: the tests run in one process per core, a file's tests together: a plain
    ``python -m pytest`` under the repository's configuration runs two files' tests in as
    many workers as xdist counts cores, each file's tests in one of them."""
    from xdist.plugin import pytest_xdist_auto_num_workers as cores  # what -n auto counts

    for name in ("test_first.py", "test_second.py"):
        (tmp_path / name).write_text(_WORKER_PROBE, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            "-p",
            "no:cacheprovider",
            "-q",
            "test_first.py",
            "test_second.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = {
        path.name: path.read_text(encoding="utf-8").split() for path in tmp_path.glob("test_*-?")
    }
    assert len(ran) == 6
    assert {count for _, count in ran.values()} == {str(cores(pytestconfig))}
    for module in ("test_first", "test_second"):
        assert (
            len({worker for name, (worker, _) in ran.items() if name.startswith(module + "-")}) == 1
        ), ran  # a file in one worker
    assert all(worker.startswith("gw") for worker, _ in ran.values())


def test_the_markers_are_registered(pytestconfig: pytest.Config) -> None:
    declared = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert {"slow", "service", "postgres", "browser"} <= declared


@pytest.mark.slow  # a fresh pytest process
def test_the_readme_fast_loop_leaves_out_slow_browser_and_postgres_tests(
    tmp_path: Path,
) -> None:
    command = FAST_LOOP.findall(README.read_text(encoding="utf-8"))
    assert len(command) == 1, "README.md gives one fast loop command"
    assert (
        FAST_LOOP.findall((GUIDE / "guide" / "development.md").read_text(encoding="utf-8"))
        == command
    )  # and the development guide the same
    argv = shlex.split(command[0])
    assert argv[:3] == ["python", "-m", "pytest"]
    kept, left_out = _collected(
        tmp_path,
        [
            *argv[3:],
            "tests/test_areas.py",
            "tests/test_readme.py",
            "tests/browser/test_maps_offline_html.py",
            "tests/service/test_postgis.py",
            "tests/e2e/test_service_search.py",
            "notebooks/01_quickstart.ipynb",
        ],
    )
    areas = _in(kept, "tests/test_areas.py")
    assert areas and all(marks == set() for marks in areas.values())  # the toolkit alone
    assert "test_python_session_runs_as_written" in _in(kept, "tests/test_readme.py")
    assert _in(left_out, "tests/test_readme.py") == {  # slow (and service)
        "test_every_console_command_runs": {"slow", "service"},
        "test_what_the_notebook_extra_installs_runs_a_kernel_and_the_maps": {"slow"},
    }
    browser = _in(left_out, "tests/browser/test_maps_offline_html.py")
    assert browser and all("browser" in marks for marks in browser.values())
    assert not _in(kept, "tests/browser/test_maps_offline_html.py")
    postgis = _in(left_out, "tests/service/test_postgis.py")  # the postgres fixture
    assert postgis and all({"postgres", "service"} <= marks for marks in postgis.values())
    assert not _in(kept, "tests/service/test_postgis.py")
    notebook = _in(left_out, "notebooks/01_quickstart.ipynb")  # slow, as every notebook
    assert notebook and all({"slow", "service"} <= marks for marks in notebook.values())
    assert not _in(kept, "notebooks/01_quickstart.ipynb")
    served = _in(kept, "tests/e2e/test_service_search.py")  # the backend parameter
    assert served and all(
        name.endswith("[sqlite]") and marks == {"service"} for name, marks in served.items()
    )
    assert all(  # the PostgreSQL backend's, and the slow ones of either backend
        (name.endswith("[postgresql]") and {"postgres", "service"} <= marks)
        or {"slow", "service"} <= marks
        for name, marks in _in(left_out, "tests/e2e/test_service_search.py").items()
    )


#: Collects with pytest in a fresh interpreter, then writes the marker names of every test
#: it selected and of every test it left out.
COLLECT = """
import json, sys
import pytest

class Record:
    kept, left_out = {}, {}

    def pytest_deselected(self, items):
        Record.left_out.update((i.nodeid, [m.name for m in i.iter_markers()]) for i in items)

    def pytest_collection_finish(self, session):
        Record.kept.update((i.nodeid, [m.name for m in i.iter_markers()])
                           for i in session.items)

code = pytest.main(["--collect-only", "-q", *sys.argv[2:]], plugins=[Record()])
with open(sys.argv[1], "w") as out:
    json.dump({"code": int(code), "kept": Record.kept, "left_out": Record.left_out}, out)
"""

Marks = dict[str, list[str]]


def _collected(tmp_path: Path, args: list[str]) -> tuple[Marks, Marks]:
    """The tests ``python -m pytest --collect-only ARGS`` keeps and leaves out, with the
    names of their markers."""
    out = tmp_path / "collected.json"
    done = subprocess.run(
        [sys.executable, "-c", COLLECT, str(out), "-p", "no:cacheprovider", "-n", "0", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    seen = json.loads(out.read_text(encoding="utf-8"))
    assert seen["code"] == 0, done.stdout + done.stderr
    return seen["kept"], seen["left_out"]


def _in(tests: Marks, file: str) -> dict[str, set[str]]:
    """The tests of ``file`` (by name) and their markers, ``parametrize`` and ``filterwarnings``
    left out."""
    return {
        test.partition("::")[2]: set(marks) - {"parametrize", "filterwarnings", "usefixtures"}
        for test, marks in tests.items()
        if test.partition("::")[0] == file
    }
