"""``import parcelsearch``: lazy (PEP 562), every public name reachable, ``gdf.parcels`` rules."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from test_docs import resolve

import parcelsearch


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_package_loads_nothing_heavy() -> None:
    out = _python(
        "import sys, parcelsearch\n"
        "print([m for m in ('geopandas', 'pandas', 'requests',"
        " 'parcelsearch.client')"
        " if m in sys.modules])"
    )
    assert out == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("code", "registered"),
    [
        pytest.param("import geopandas as gpd, parcelsearch", True, id="geopandas-first"),
        pytest.param(
            "import parcelsearch; parcelsearch.plan; import geopandas as gpd",
            True,
            id="first-use-of-a-name",
        ),
        pytest.param("import parcelsearch.accessor; import geopandas as gpd", True, id="explicit"),
        pytest.param(
            "import parcelsearch; import geopandas as gpd", False, id="parcelsearch-first-unused"
        ),
    ],
)
def test_the_accessor_registration_rule(code: str, registered: bool) -> None:
    assert _python(f"{code}\nprint(hasattr(gpd.GeoDataFrame, 'parcels'))") == str(registered)


def test_every_public_name_resolves() -> None:
    for name in parcelsearch.__all__:
        assert getattr(parcelsearch, name) is not None, name
    assert set(parcelsearch.__all__) <= set(dir(parcelsearch))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        parcelsearch.nope  # noqa: B018
    assert parcelsearch.plan is parcelsearch.planning.plans.plan  # the module stays reachable


def test_a_public_module_is_an_attribute_of_the_package_on_first_use() -> None:
    """What a hint spells after ``import parcelsearch`` works as typed; private ones stay
    hidden."""
    out = _python(
        "import parcelsearch\n"
        "print(hasattr(parcelsearch, '_run'), parcelsearch.profiles.save.__name__)"
    )
    assert out == "False save"


def test_the_version_is_the_one_pyproject_declares() -> None:
    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert parcelsearch.__version__ == declared
    source = Path(parcelsearch.__file__).read_text(encoding="utf-8")
    assert declared not in source  # read from the installed metadata, written nowhere else


def _home(value: object) -> str:
    return str(getattr(value, "__module__", ""))


def test_every_public_name_has_its_public_home() -> None:
    """As in httpx: ``parcelsearch.Client``, never the private module it is written in; the
    errors live in :mod:`parcelsearch.errors` (public, documented), and say so."""
    for name in parcelsearch.__all__:
        value = getattr(parcelsearch, name)
        if isinstance(value, str):  # __version__
            continue
        home = _home(value)
        assert home in ("parcelsearch", "parcelsearch.errors"), (name, home)
        assert "._" not in repr(value) and "._" not in home, (name, repr(value))
        if home == "parcelsearch.errors":
            assert name in parcelsearch.errors.__all__, name


def test_a_rehomed_class_keeps_its_type_hints() -> None:
    import typing

    hints = typing.get_type_hints(parcelsearch.SearchOptions)
    assert hints["quota"] == parcelsearch.Quota | None
    assert typing.get_type_hints(parcelsearch.Piece)["geometry"] is not None


def _hinted_names() -> set[str]:
    """Every dotted name a hint spells in Python, with and without a suggested value."""
    import re

    from parcelsearch.errors import KNOBS, Hint

    spelled = {Hint(knob, value).render("python") for knob in KNOBS for value in (None, 1)}
    return {
        name
        for text in spelled
        for name in re.findall(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", text)
    }


def test_every_name_a_hint_recommends_is_public_and_importable_as_written() -> None:
    names = _hinted_names()
    assert "parcelsearch.profiles.save" in names  # the collection sees what hints say
    for dotted in sorted(names):
        root, _, rest = dotted.partition(".")
        if root == "areas":  # the user's own GeoDataFrame
            continue
        full = dotted if root in ("parcelsearch", "geopandas") else f"parcelsearch.{dotted}"
        value = resolve(full)
        assert not any(part.startswith("_") for part in full.split(".")), dotted
        if full.startswith("parcelsearch.") and not isinstance(value, type(parcelsearch)):
            owner = resolve(full.rpartition(".")[0])
            if isinstance(owner, type(parcelsearch)):  # a module's name: in its __all__
                assert full.rpartition(".")[2] in owner.__all__, dotted
