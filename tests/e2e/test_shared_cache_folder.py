"""Two searches at once on one cache folder pay for each page once (issue 46, point 8).

Two real ``parcelsearch search`` processes, the same areas, the same cache folder, started
together against the reference service. The witness is the service's request log: each
(polygon, page) is counted once, and as many calls as the areas have pages; under a shared
``--quota N/lifetime`` that covers the pages once, both runs complete.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd
import pytest

import parcelsearch

pytestmark = pytest.mark.slow


def _env(key: str, service: Any, ca_bundle: str, cache: Path) -> dict[str, str]:
    src = str(Path(parcelsearch.__file__).parent.parent)
    return {
        **os.environ,
        "PARCELSEARCH_API_KEY": key,
        "PARCELSEARCH_BASE_URL": service.base_url,
        "PARCELSEARCH_CA_BUNDLE": ca_bundle,
        "PARCELSEARCH_CACHE_DIR": str(cache),
        "PARCELSEARCH_RATE": "40",
        "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }


def _both(
    areas: Path, tmp_path: Path, env: dict[str, str], *extra: str
) -> list[tuple[int, str, Path]]:
    procs = []
    for name in ("first", "second"):
        out = tmp_path / f"{name}.parquet"
        args = [
            sys.executable,
            "-m",
            "parcelsearch.cli",
            "search",
            str(areas),
            "--out",
            str(out),
            "--id-column",
            "area_id",
            "--quiet",
            *extra,
        ]
        procs.append(
            (subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE), out)
        )
    done = []
    for proc, out in procs:
        _, err = proc.communicate(timeout=300)
        done.append((proc.returncode, err.decode(), out))
    return done


@pytest.fixture
def areas_file(tmp_path: Path, demo_areas: gpd.GeoDataFrame) -> Path:
    path = tmp_path / "areas.parquet"
    demo_areas.reset_index().to_parquet(path)
    return path


@pytest.fixture(scope="module")
def pages(
    service: Any,
    ca_bundle: str,
    tmp_path_factory: pytest.TempPathFactory,
    demo_areas: gpd.GeoDataFrame,
) -> tuple[int, pd.DataFrame]:
    """The demo areas searched alone (a key and cache of their own): calls and ids."""
    key = service.keys.create("shared-folder-solo", key_type="production", quota=100_000)
    client = parcelsearch.Client(
        key, service.base_url, ca_bundle, cache_dir=tmp_path_factory.mktemp("solo")
    )
    result = parcelsearch.search(demo_areas, client=client, progress=False)
    return result.calls, result.ids


def _pairs(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return {(str(a), str(g)) for a, g in zip(frame["area_id"], frame["group_id"], strict=True)}


@pytest.mark.parametrize("quota", [False, True], ids=["no-quota", "quota-covers-pages-once"])
def test_two_processes_on_one_folder_buy_each_page_once(
    quota: bool,
    service: Any,
    ca_bundle: str,
    make_key: Any,
    tmp_path: Path,
    areas_file: Path,
    pages: tuple[int, pd.DataFrame],
) -> None:
    needed, ids = pages
    key = make_key("production", quota=100_000, per_second=50)
    env = _env(key, service, ca_bundle, tmp_path / "cache")
    extra = ["--quota", f"{needed}/lifetime"] if quota else []
    done = _both(areas_file, tmp_path, env, *extra)

    log = service.keys.requests(key.name)
    assert not log.duplicated(["polygon_sha256", "page"]).any()  # each page bought once
    assert len(log) == needed  # calls == pages, on the service's side
    for code, err, out in done:
        assert code == 0, err[-2000:]  # both complete, within the quota
        assert _pairs(pd.read_parquet(out)) == _pairs(ids)
