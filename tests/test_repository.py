"""Guards on what is committed: small data, small notebooks, no secrets; the project's
habits (LICENSE, pre-commit, the docs' hosting, the wheel built by CI) true to CI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]


def tracked(*patterns: str) -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / line for line in out.splitlines() if line]


def test_committed_data_is_small() -> None:
    sizes = {p.name: p.stat().st_size for p in tracked("data/") if p.is_file()}
    assert sizes, "the bundled demo data should be committed"
    assert max(sizes.values()) < 2_000_000, sizes
    assert sum(sizes.values()) < 4_000_000, sizes


def test_notebooks_are_committed_small_without_widget_state_or_stray_images() -> None:
    for path in tracked("notebooks/*.ipynb"):
        assert path.stat().st_size < 300_000, path.name
        notebook = json.loads(path.read_text())
        assert "widgets" not in notebook.get("metadata", {}), path.name
        for cell in notebook["cells"]:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                # the only images are the maps' pictures (refresh_outputs.py), which say so
                is_map_picture = "parcelsearch" in output.get("metadata", {})
                assert is_map_picture or not any(k.startswith("image/") for k in data), path.name
                assert "application/vnd.jupyter.widget-view+json" not in data, path.name


# -- the project's habits (README "Development", docs/guide/development.md) ----------------


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _ci_commands(tool: str) -> set[str]:
    """The lines of ``.ci/run`` that run ``tool`` (the CI script's own commands)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip().startswith(f"{tool} ")}


def test_the_license_is_the_mit_one_pyproject_declares_and_the_packages_carry() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    project = _pyproject()["project"]
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the parcelsearch authors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]  # into the wheel's .dist-info/licenses
    # license-files (PEP 639) needs setuptools 77 or later at build time
    backend = [Requirement(r) for r in _pyproject()["build-system"]["requires"]]
    setuptools = next(r for r in backend if r.name == "setuptools")
    assert setuptools.specifier.contains("77") and not setuptools.specifier.contains("76.3")


def test_pre_commit_runs_the_lint_and_type_checks_ci_runs_and_nothing_else() -> None:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert [repo["repo"] for repo in config["repos"]] == ["local"]  # nothing fetched to run
    assert {hook["language"] for hook in hooks} == {"system"}  # this environment's tools
    assert all(hook["pass_filenames"] is False for hook in hooks)  # the whole tree, as CI
    entries = {hook["id"]: hook["entry"] for hook in hooks}
    assert set(entries) == {"ruff", "ruff-format", "mypy"}
    assert {entries["ruff"], entries["ruff-format"]} == _ci_commands("ruff")
    assert {entries["mypy"]} == _ci_commands("mypy")
    # the tools the hooks call are the test extra's
    extra = {Requirement(r).name for r in _pyproject()["project"]["optional-dependencies"]["test"]}
    assert {"ruff", "mypy"} <= extra


def test_the_docs_hosting_builds_the_site_as_ci_does() -> None:
    config = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    assert config["python"]["install"] == [
        {"method": "pip", "path": ".", "extra_requirements": ["docs"]}
    ]
    assert config["sphinx"] == {
        "configuration": "docs/conf.py",
        "builder": "html",
        "fail_on_warning": True,
    }  # -W --keep-going, as CI
    assert _ci_commands("python -m sphinx") == {
        "python -m sphinx -W --keep-going -b html docs docs/_build/html"
    }
    floor = _pyproject()["project"]["requires-python"]
    assert SpecifierSet(floor).contains(config["build"]["tools"]["python"])


def test_ci_builds_the_wheel_installs_it_and_runs_the_demo_from_it() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    extra = {Requirement(r).name for r in _pyproject()["project"]["optional-dependencies"]["test"]}
    assert "build" in extra
    # from what is committed: nothing a local build left behind reaches the wheel
    assert re.search(r"^git archive HEAD \| tar -x -C \"\$WHEEL_TMP/src\"$", ci, flags=re.M)
    assert re.search(
        r"^python -m build --outdir \"\$WHEEL_TMP/dist\" \"\$WHEEL_TMP/src\"", ci, flags=re.M
    )
    # the wheel itself, not an editable install, in a fresh venv, then the demo from it
    assert re.search(r"-m pip install --quiet \"\$WHEEL\[service\]\"$", ci, flags=re.M)
    assert re.search(r"^ +\"\$WHEEL_TMP/venv/bin/parcelsearch\" demo$", ci, flags=re.M)
    # after the docs' build, before the tests
    assert (
        ci.index("python -m sphinx")
        < ci.index("python -m build")
        < ci.index("\npython -m pytest\n")
    )


def _wheel_check() -> str:
    """The Python program ``.ci/run`` runs on the built wheel's file list."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    found = re.search(r"^python - \"\$WHEEL\" <<'PY'\n(.*?)^PY$", ci, flags=re.S | re.M)
    assert found, "the wheel's check is missing from .ci/run"
    return found.group(1)


def _wheel(path: Path, names: list[str]) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        for name in names:
            wheel.writestr(name, "")
    return path


WHEEL_AS_BUILT = [
    "parcelsearch/__init__.py",
    "parcelsearch/data/demo_areas.geojson",
    "parcelsearch_service/__init__.py",
    "parcelsearch_service/portal/templates/base.html",
    "parcelsearch-0.1.0.dist-info/METADATA",
    "parcelsearch-0.1.0.dist-info/licenses/LICENSE",
]


@pytest.mark.parametrize(
    "stray",
    [
        "tests/test_cli.py",
        "parcelsearch/tests/__init__.py",
        "parcelsearch/conftest.py",
        "parcelsearch_service/test_portal.py",
        "parcelsearch/__pycache__/cli.cpython-311.pyc",
        "parcelsearch/cli.pyc",
        "parcelsearch/.ipynb_checkpoints/x-checkpoint.ipynb",
        "parcelsearch/data/quickstart.ipynb",
        "parcelsearch/.DS_Store",
        "bench/bench_search.py",
        "parcelsearch/data/make_land.py",
        "-missing-",
    ],
)
def test_ci_wheel_check_passes_the_wheel_as_built_and_fails_on_strays(
    tmp_path: Path, stray: str
) -> None:
    program = tmp_path / "check.py"
    program.write_text(_wheel_check(), encoding="utf-8")

    def check(names: list[str]) -> subprocess.CompletedProcess[str]:
        wheel = _wheel(tmp_path / "parcelsearch-0.1.0-py3-none-any.whl", names)
        return subprocess.run(
            [sys.executable, str(program), str(wheel)], capture_output=True, text=True, timeout=60
        )

    good = check(WHEEL_AS_BUILT)
    assert good.returncode == 0, good.stderr
    assert "parcelsearch/data/demo_areas.geojson" in good.stdout  # it lists what it carries
    if stray == "-missing-":  # no LICENSE
        bad = check([n for n in WHEEL_AS_BUILT if not n.endswith("LICENSE")])
        assert bad.returncode == 1
        assert "missing: parcelsearch-0.1.0.dist-info/licenses/LICENSE" in bad.stderr
    else:
        bad = check([*WHEEL_AS_BUILT, stray])
        assert bad.returncode == 1
        assert f"\n  {stray}" in bad.stderr  # named, and only the stray
        assert "demo_areas" not in bad.stderr


def _imported_by_tests() -> dict[str, Path]:
    """Every top-level module a test file imports (module level or in a function), with a
    file that imports it."""
    import ast

    found: dict[str, Path] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], path)
    return found


def test_every_module_the_tests_import_is_declared() -> None:
    """What the tests import is in the dependencies or an extra the test extra installs
    (``test``, the ``service`` it names; the ``docs`` extra's only behind
    ``pytest.importorskip``): the standard library, the repository's own modules and the
    packages aside."""
    from importlib.metadata import packages_distributions

    from packaging.utils import canonicalize_name

    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    declared = {
        canonicalize_name(Requirement(r).name)
        for r in [*project["dependencies"], *extras["test"], *extras["service"], *extras["docs"]]
    }
    ours = {path.stem for path in ROOT.glob("*/**/*.py") if ".venv" not in path.parts}
    ours |= {"parcelsearch", "parcelsearch_service"}
    dists = packages_distributions()
    missing = []
    for module, path in _imported_by_tests().items():
        if module in sys.stdlib_module_names or module in ours:
            continue
        names = {canonicalize_name(d) for d in dists.get(module, [module])}
        if not names & declared:
            missing.append(f"{path.relative_to(ROOT)} imports {module} ({', '.join(names)})")
    assert not missing, "declare in pyproject.toml's test extra: " + "; ".join(missing)
