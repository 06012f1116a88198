"""The ``service`` extra: the toolkit installs without it, and every way into the service says
which extra to install when it is missing.

An install without the extra is made real in a child interpreter: a ``sitecustomize`` puts an
import hook first on ``sys.meta_path`` that finds none of the extra's packages, so they are
absent there exactly as after ``pip install parcelsearch``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import parcelsearch
from parcelsearch_service import EXTRA_MODULES

INSTALL = 'pip install "parcelsearch[service]"'
PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"

_HOOK = '''
import sys

ABSENT = {absent!r}


class _Absent:
    """Finds none of the service extra's packages: they are not installed here."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Absent())
'''


def _without_extra(
    tmp_path: Path, code: str, *args: str, absent: tuple[str, ...] = EXTRA_MODULES
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child Python in which the ``absent`` packages cannot be imported."""
    (tmp_path / "sitecustomize.py").write_text(_HOOK.format(absent=set(absent)))
    package_root = str(Path(parcelsearch.__file__).parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), package_root]),
        "PARCELSEARCH_SERVICE_DIR": str(tmp_path / "service"),
        "PARCELSEARCH_CACHE_DIR": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _without_extra(
        tmp_path, "import sys\nfrom parcelsearch.cli import main\nsys.exit(main())", *args
    )


def test_the_toolkit_needs_none_of_the_service_packages() -> None:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]

    def names(requirements: list[str]) -> set[str]:
        return {r.split(">")[0].split("[")[0].split("=")[0].strip() for r in requirements}

    toolkit = names(project["dependencies"])
    service = names(project["optional-dependencies"]["service"])
    assert toolkit == {
        "geopandas",
        "shapely",
        "pyproj",
        "pyarrow",
        "pyogrio",
        "pandas",
        "numpy",
        "requests",
        "urllib3",
        "tqdm",
        "ipyleaflet",
        "keyring",
        "platformdirs",
        "truststore",
    }
    assert service == {
        "starlette",
        "jinja2",
        "uvicorn",
        "trustme",
        "cryptography",
        "psycopg",
        "psycopg-pool",
    }
    # jinja2 comes with the toolkit too (ipyleaflet → branca): never missing where it runs
    assert {m.replace("_", "-") for m in EXTRA_MODULES} == service - {"jinja2"}
    assert "parcelsearch[service]" in project["optional-dependencies"]["test"]


def test_the_hook_makes_the_packages_absent(tmp_path: Path) -> None:
    done = _without_extra(tmp_path, "import starlette")
    assert done.returncode == 1 and "No module named 'starlette'" in done.stderr


def test_the_toolkit_plans_without_the_extra(tmp_path: Path) -> None:
    done = _without_extra(
        tmp_path,
        "import sys, parcelsearch\n"
        "plan = parcelsearch.plan(parcelsearch.demo_areas())\n"
        "assert len(plan.pieces) > 0\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] in {'starlette', "
        "'uvicorn', 'trustme', 'psycopg', 'psycopg_pool'}))",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_local_service_says_which_extra_to_install(tmp_path: Path) -> None:
    done = _without_extra(
        tmp_path,
        "import parcelsearch\nparcelsearch.local_service()",
        absent=("uvicorn", "psycopg_pool"),
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "parcelsearch.errors.ConfigurationError: the reference service and portal "
        "need the 'service' extra, which is not installed here (missing: uvicorn, "
        f"psycopg_pool): {INSTALL}"
    )


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["demo", "--quiet"], id="demo"),
        pytest.param(["serve"], id="serve"),
        pytest.param(["keys", "list"], id="keys"),
        pytest.param(
            ["parcels", "load", "p.gpkg", "--into", "postgresql://x@127.0.0.1/x"], id="parcels"
        ),
        pytest.param(["portal", "--help"], id="portal"),
    ],
)
def test_the_commands_say_which_extra_to_install(tmp_path: Path, args: list[str]) -> None:
    done = _cli(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert INSTALL in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.startswith("parcelsearch: error: the reference service and portal need")
    assert not (tmp_path / "parcelsearch-demo").exists()  # nothing made before the refusal
