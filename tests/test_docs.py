"""The documentation site's sources: every public name referenced and documented, every
example of the guide run as written, the build command where the README and CI say.

The site itself is built by CI (``.ci/run``) with warnings as errors;
``tests/browser/test_docs_site.py`` opens the built pages in headless Chromium.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import warnings
from pathlib import Path

import pytest
from _examples import (
    GUIDE,
    README,
    ROOT,
    console_commands,
    console_env,
    fenced_blocks,
    guide_pages,
    run_console,
    run_doctests,
)

import parcelsearch
import parcelsearch.accessor
import parcelsearch.maps
from parcelsearch import cli
from parcelsearch.cli.registry import LISTED

REFERENCE = GUIDE / "reference"
sys.path.insert(0, str(GUIDE / "_ext"))  # the site's own Sphinx extensions
BUILD = 'pip install -e ".[docs]" && python -m sphinx -W --keep-going -b html docs docs/_build/html'
#: numpydoc checks for every public name: a docstring (GL08), no section numpydoc drops
#: (GL06), sections in order (GL07); the site's build runs the same (docs/conf.py).
CHECKS = {"GL08", "GL06", "GL07"}
#: ... and for public functions, every parameter documented and none that does not exist.
FUNCTION_CHECKS = CHECKS | {"PR01", "PR02"}


def referenced_names() -> set[str]:
    """Fully qualified names listed in the reference's autosummary tables and autoclass lines."""
    names: set[str] = set()
    for page in REFERENCE.glob("*.rst"):
        module = ""
        in_table = False
        for line in page.read_text().splitlines():
            if match := re.match(r"\.\. currentmodule:: (\S+)", line):
                module = match[1]
            elif match := re.match(r"\.\. auto(?:class|function|data):: (\S+)", line):
                names.add(f"{module}.{match[1]}")
            elif line.startswith(".. autosummary::"):
                in_table = True
            elif in_table and line.startswith("   ") and not line.strip().startswith(":"):
                names.add(f"{module}.{line.strip()}")
            elif in_table and line and not line.startswith(" "):
                in_table = False
    return names


def public_names() -> list[str]:
    """Every name users are given: ``parcelsearch.__all__``, the accessor's methods, ``maps``."""
    names = [f"parcelsearch.{n}" for n in parcelsearch.__all__ if n != "__version__"]
    accessor = parcelsearch.accessor.ParcelsAccessor
    names += [
        f"parcelsearch.accessor.ParcelsAccessor.{m}"
        for m in vars(accessor)
        if not m.startswith("_")
    ]
    names += [f"parcelsearch.maps.{n}" for n in parcelsearch.maps.__all__]
    return names


def resolve(name: str) -> object:
    """The object a dotted name stands for (modules imported as needed)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def documented_members(name: str) -> list[str]:
    """``name`` and, for a class, its own public methods and properties (what its page shows)."""
    obj = resolve(name)
    if not inspect.isclass(obj):
        return [name]
    own = [
        m
        for m, v in vars(obj).items()
        if not m.startswith("_")
        and (inspect.isfunction(v) or isinstance(v, property | classmethod | staticmethod))
    ]
    return [name, *(f"{name}.{m}" for m in own)]


def test_every_public_name_is_in_the_reference() -> None:
    missing = sorted(set(public_names()) - referenced_names())
    assert missing == [], f"add these to docs/reference/*.rst: {missing}"


def test_every_name_in_the_reference_exists() -> None:
    referenced = referenced_names()
    assert len(referenced) >= len(public_names())
    for name in sorted(referenced):
        resolve(name)  # raises for a name that is gone


def drawn_tree(text: str, names: list[str]) -> dict[str, str | None]:
    """Class → parent as the tree in ``text`` draws it (the parent: the nearest line above
    whose name stands further left)."""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        found = re.search(r"\b(" + "|".join(names) + r")\b", line)
        if not found or not re.fullmatch(r"[\s│├└─]*", line[: found.start()]):
            continue
        while stack and stack[-1][0] >= found.start():
            stack.pop()
        parents[found[1]] = stack[-1][1] if stack else None
        stack.append((found.start(), found[1]))
    return parents


def test_the_exception_tree_is_drawn_whole_and_true() -> None:
    classes = {
        n: v
        for n in parcelsearch.errors.__all__
        if inspect.isclass(v := getattr(parcelsearch, n)) and issubclass(v, Exception)
    }
    drawn = drawn_tree(parcelsearch.errors.__doc__ or "", list(classes))
    assert sorted(drawn) == sorted(classes)
    for name, cls in classes.items():
        public = [b.__name__ for b in cls.__mro__[1:] if b.__name__ in classes]
        assert drawn[name] == (public[0] if public else None), name
    assert ".. automodule:: parcelsearch.errors" in (REFERENCE / "errors.rst").read_text()


def _docs_extra(module: str) -> None:
    pytest.importorskip(
        module, reason=f'{module} is in the docs extra: pip install -e ".[docs]" (CI installs it)'
    )


@pytest.mark.parametrize("name", public_names())
def test_public_name_has_a_numpydoc_docstring(name: str) -> None:
    _docs_extra("numpydoc")
    from numpydoc.validate import validate

    for member in documented_members(name):
        checks = (
            FUNCTION_CHECKS
            if inspect.isfunction(resolve(member)) and member.count(".") == 1
            else CHECKS
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpydoc's own words for GL06
            errors = [(code, text) for code, text in validate(member)["errors"] if code in checks]
        assert errors == [], member


def test_the_build_checks_docstrings_the_same_way() -> None:
    conf = (GUIDE / "conf.py").read_text()
    found = re.search(r"numpydoc_validation_checks = \{(.*?)\}", conf)
    assert found and set(re.findall(r'"(\w+)"', found[1])) == CHECKS
    assert 'nb_execution_mode = "off"' in conf


def test_the_options_page_lists_every_option() -> None:
    _docs_extra("sphinx")
    from options_table import option_rows  # docs/_ext, on the path through conftest

    assert [row[0] for row in option_rows()] == list(parcelsearch.settings.options)
    assert all(doc for _, _, doc in option_rows())


def test_the_command_line_page_walks_every_command() -> None:
    _docs_extra("sphinx")
    from cli_reference import commands, full_parser

    paths = [" ".join(path) for path, _, _ in commands(full_parser())]
    for name in [*LISTED, "demo", "plan", "search", "markets", "cache"]:
        assert f"parcelsearch {name}" in paths
    assert "parcelsearch keys create" in paths
    assert "```{parcelsearch-cli}" in (GUIDE / "guide" / "cli.md").read_text()


def test_troubleshooting_covers_every_exit_code() -> None:
    page = (GUIDE / "guide" / "troubleshooting.md").read_text()
    rows = {int(code) for code in re.findall(r"^\| (\d+) \|", page, flags=re.M)}
    assert rows == set(cli.EXIT_CODES)


def test_the_build_command_is_the_readme_s_and_ci_s() -> None:
    assert BUILD in console_commands([README, *guide_pages()])
    ci = (ROOT / ".ci" / "run").read_text()
    assert BUILD.partition(" && ")[2] in ci
    assert 'pip install --quiet -e ".[docs]"' in ci


def test_every_python_example_is_a_doctest() -> None:
    """A ```python block without ``>>>`` would escape the runner below."""
    loose = [
        (page.name, block.splitlines()[0])
        for page in [README, *guide_pages()]
        for block in fenced_blocks(page, "python")
        if not block.startswith(">>> ")
    ]
    assert loose == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [p for p in guide_pages() if ">>> " in p.read_text()],
    ids=lambda p: str(p.relative_to(GUIDE)),
)
def test_guide_examples_run_as_written(page: Path) -> None:
    failures, tried = run_doctests(page)
    assert tried > 0
    assert failures == 0


@pytest.mark.slow
def test_every_guide_console_command_runs(tmp_path: Path, service, ca_bundle, make_key) -> None:
    everything = console_commands(guide_pages())
    assert any(c.startswith("parcelsearch serve") for c in everything)
    already = set(console_commands([README]))  # tests/test_readme.py runs those
    commands = [c for c in everything if c not in already or c.startswith("export ")]
    env, values = console_env(
        tmp_path, service.base_url, ca_bundle, make_key("production", quota=1_000)
    )
    ran = run_console(commands, tmp_path, env, values)
    assert ran == [c for c in commands if c.startswith("parcelsearch ")]


def quoted_messages(page: Path) -> list[re.Pattern[str]]:
    """The messages a page quotes as definition terms (`…` matching anything)."""
    terms = re.findall(r"^(``?)(.+)\1$", page.read_text(), flags=re.M)
    return [re.compile(".*?".join(map(re.escape, text.split("…")))) for _, text in terms]


@pytest.mark.slow
def test_troubleshooting_quotes_the_command_line_word_for_word(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    service,
    ca_bundle,
    make_key,
) -> None:
    import geopandas as gpd
    import shapely
    from _cli import run

    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("PARCELSEARCH_")]:
        monkeypatch.delenv(name)
    areas = parcelsearch.demo_areas()
    areas.to_file("areas.gpkg")
    for layer in ("a", "b"):
        areas.to_file("two.gpkg", layer=layer)
    areas.set_crs("EPSG:3857", allow_override=True).to_file("mercator.gpkg")  # degrees
    gpd.GeoDataFrame(geometry=[shapely.box(100, 100, 600, 600)], crs="EPSG:32614").to_file(
        "local.gpkg"
    )  # a local grid in UTM 14N
    Path("empty.gpkg").touch()
    metres = areas.to_crs("EPSG:3857")  # read as kilometres: out at sea
    metres.set_geometry(metres.geometry.scale(1e-3, 1e-3, origin=(0, 0))).to_file("km.gpkg")
    key = make_key("production", quota=1_000)
    served = {"PARCELSEARCH_BASE_URL": service.base_url, "PARCELSEARCH_CA_BUNDLE": ca_bundle}
    gpd.read_file(Path(__file__).parent / "data" / "sf_tracts_2020.geojson").iloc[:2].to_file(
        "sf.geojson"
    )
    parcelsearch.markets(
        parcelsearch.Client(
            api_key=key, base_url=service.base_url, ca_bundle=ca_bundle, cache_dir="listed"
        )
    )
    search = ["search", "areas.gpkg", "--id-column", "area_id", "--out", "ids.parquet"]
    cases: list[tuple[list[str], dict[str, str], int]] = [
        (search, {}, 2),
        (search, {"PARCELSEARCH_API_KEY": "k"}, 2),
        (search, {"PARCELSEARCH_API_KEY": "k", "PARCELSEARCH_BASE_URL": "http://127.0.0.1:9"}, 2),
        (search, {"PARCELSEARCH_API_KEY": "k", "PARCELSEARCH_BASE_URL": "https://127.0.0.1:9"}, 1),
        (["plan", "two.gpkg"], {}, 2),
        (["plan", "missing.gpkg"], {}, 2),
        (["plan", "empty.gpkg"], {}, 2),
        (
            ["markets"],
            {
                **served,
                "PARCELSEARCH_API_KEY": key,
                "PARCELSEARCH_BASE_URL": service.base_url + "/v1",
            },
            1,
        ),
        (["plan", "areas.gpkg", "--id-column", "nope"], {}, 2),
        (["search", "areas.gpkg", "--out", "ids.xlsx"], {}, 2),
        (["search", "areas.gpkg", "--out", "ids.csv", "--budget", "-1"], {}, 2),
        (["plan", "mercator.gpkg"], {}, 2),
        (["plan", "local.gpkg"], {}, 2),
        (["plan", "km.gpkg"], {}, 2),
        (
            ["search", "sf.geojson", "--id-column", "tract", "--out", "ids.parquet"],
            {**served, "PARCELSEARCH_API_KEY": key, "PARCELSEARCH_CACHE_DIR": "listed"},
            2,
        ),
        (["plan", "areas.gpkg", "--tolerance", "50000"], {}, 2),
        (["search", "areas.gpkg", "--out", "ids.csv", "--max-age", "30x"], {}, 2),
        (["markets"], {**served, "PARCELSEARCH_API_KEY": "wrong"}, 1),
        (["markets"], {"PARCELSEARCH_BASE_URL": service.base_url, "PARCELSEARCH_API_KEY": key}, 1),
        ([*search, "--budget", "5"], {**served, "PARCELSEARCH_API_KEY": key}, 3),
        ([*search, "--budget", "4"], {**served, "PARCELSEARCH_API_KEY": key}, 3),
        ([*search, "--budget", "10"], {**served, "PARCELSEARCH_API_KEY": key}, 3),
        (
            [*search, "--budget", "10", "--allow-partial"],
            {**served, "PARCELSEARCH_API_KEY": key, "PARCELSEARCH_CACHE_DIR": "fresh"},
            3,
        ),
        (
            [*search, "--ask-above", "5"],
            {**served, "PARCELSEARCH_API_KEY": key, "PARCELSEARCH_CACHE_DIR": "asked"},
            3,
        ),
    ]
    quoted = quoted_messages(GUIDE / "guide" / "troubleshooting.md")
    unquoted = []
    for argv, env, code in cases:
        with monkeypatch.context() as patch:
            for name, value in {"PARCELSEARCH_CACHE_DIR": "cache", **env}.items():
                patch.setenv(name, value)
            got, _, err = run(argv, capsys)
        message = re.split(r": (?:error|stopped): ", err.strip().splitlines()[-1], maxsplit=1)[-1]
        assert got == code, (argv, err)
        if not any(p.fullmatch(message) for p in quoted):
            unquoted.append(message)
    assert unquoted == [], "troubleshooting.md does not quote these as printed"
