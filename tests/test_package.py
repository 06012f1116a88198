"""``import parcelsearch``: lazy (PEP 562), every public name reachable, ``gdf.parcels`` rules."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import parcelsearch


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_package_loads_nothing_heavy() -> None:
    out = _python("import sys, parcelsearch\n"
                  "print([m for m in ('geopandas', 'pandas', 'requests',"
                  " 'parcelsearch._fetch.client')"
                  " if m in sys.modules])")
    assert out == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("code", "registered"),
    [
        pytest.param("import geopandas as gpd, parcelsearch", True, id="geopandas-first"),
        pytest.param("import parcelsearch; parcelsearch.plan; import geopandas as gpd", True,
                     id="first-use-of-a-name"),
        pytest.param("import parcelsearch.accessor; import geopandas as gpd", True,
                     id="explicit"),
        pytest.param("import parcelsearch; import geopandas as gpd", False,
                     id="parcelsearch-first-unused"),
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


def test_the_version_is_the_one_pyproject_declares() -> None:
    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert parcelsearch.__version__ == declared
    source = Path(parcelsearch.__file__).read_text(encoding="utf-8")
    assert declared not in source  # read from the installed metadata, written nowhere else
