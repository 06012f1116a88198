"""PostGIS parcels: the loader (COPY), and matches and order identical to the embedded store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parcelsearch.cli import main
from parcelsearch.errors import ConfigurationError
from parcelsearch_service import synth
from parcelsearch_service.polygon import parse_polygon
from parcelsearch_service.postgis import (
    PostgisParcelStore,
    _worth_subdividing,
    load_parcels_into,
    open_parcel_store,
)
from parcelsearch_service.store import ParcelStore

DEMO_BOX = (-99.745, 32.44, -99.70, 32.465)


@pytest.fixture(scope="module")
def demo_url(postgres: object) -> str:
    """A database holding the bundled demo parcels."""
    url = postgres.database("parcels")  # type: ignore[attr-defined]
    assert load_parcels_into(None, url) == len(ParcelStore())  # type: ignore[arg-type]
    return url


@pytest.fixture(scope="module", params=["representative-point", "intersects"])
def pair(
    request: pytest.FixtureRequest, demo_url: str
) -> Iterator[tuple[ParcelStore, PostgisParcelStore]]:
    embedded = ParcelStore(match=request.param)
    postgis = PostgisParcelStore(demo_url, match=request.param)
    yield embedded, postgis
    postgis.close()


def _all(store: ParcelStore | PostgisParcelStore, ring: list[list[float]]) -> list[str]:
    hits = store.hits(parse_polygon(json.dumps(ring)))
    return [gid for page in range(1, len(hits) // 100 + 2) for gid in store.page(hits, page)]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.floats(0.0005, 0.02),
    st.floats(0.0005, 0.02),
    st.integers(3, 60),
)
def test_same_matches_and_order_as_the_embedded_store(
    pair: tuple[ParcelStore, PostgisParcelStore],
    fx: float,
    fy: float,
    w: float,
    h: float,
    spikes: int,
) -> None:
    """Star-shaped (concave) polygons over the demo parcels, both rules; those with more
    than 64 vertices take the subdivided query, the others the simple one."""
    embedded, postgis = pair
    xmin, ymin, xmax, ymax = DEMO_BOX
    cx, cy = xmin + fx * (xmax - xmin), ymin + fy * (ymax - ymin)
    angles = np.linspace(0, 2 * np.pi, 2 * spikes, endpoint=False)
    radius = np.where(np.arange(2 * spikes) % 2 == 0, 1.0, 0.35)
    ring = [
        [cx + w * r * np.cos(a), cy + h * r * np.sin(a)]
        for a, r in zip(angles, radius, strict=True)
    ]
    ring.append(ring[0])
    assert _all(postgis, ring) == _all(embedded, ring)


@pytest.mark.parametrize("spikes", [4, 50], ids=["simple-query", "subdivided-query"])
def test_both_query_forms_are_exercised(
    pair: tuple[ParcelStore, PostgisParcelStore], spikes: int
) -> None:
    embedded, postgis = pair
    angles = np.linspace(0, 2 * np.pi, 2 * spikes, endpoint=False)
    radius = np.where(np.arange(2 * spikes) % 2 == 0, 0.01, 0.003)
    cx, cy = -99.72, 32.45
    ring = [[cx + r * np.cos(a), cy + r * np.sin(a)] for a, r in zip(angles, radius, strict=True)]
    ring.append(ring[0])
    polygon = parse_polygon(json.dumps(ring)).polygon
    assert _worth_subdividing(polygon) is (spikes == 50)
    found = _all(postgis, ring)
    assert found == _all(embedded, ring) and len(found) > 0


def test_a_point_on_the_edge_matches_in_both(pair: tuple[ParcelStore, PostgisParcelStore]) -> None:
    embedded, postgis = pair
    x, y = float(embedded.x[5]), float(embedded.y[5])
    ring = [[x, y], [x + 1e-3, y], [x + 1e-3, y + 1e-3], [x, y + 1e-3], [x, y]]
    assert _all(postgis, ring) == _all(embedded, ring)
    if embedded.match == "representative-point":
        assert embedded.group_ids[5] in _all(postgis, ring)


def test_the_example_in_parcel_id_order(postgres: object) -> None:
    example = synth.example_fabric()
    url = postgres.database("example")  # type: ignore[attr-defined]
    load_parcels_into(example.parcels, url)
    store = open_parcel_store(url)
    try:
        assert isinstance(store, PostgisParcelStore) and len(store) == len(example.parcels)
        assert _all(store, example.ring) == example.expected
        hits = store.hits(parse_polygon(json.dumps(example.ring)))
        assert store.hits(parse_polygon(json.dumps([example.ring]))) is hits  # cached
    finally:
        store.close()


def test_the_table_is_indexed_and_clustered(demo_url: str) -> None:
    with psycopg.connect(demo_url) as conn:
        indexes = {
            row[0]: row[1]
            for row in conn.execute(
                "SELECT c.relname, i.indisclustered FROM pg_index i JOIN pg_class c"
                " ON c.oid = i.indexrelid WHERE i.indrelid = 'parcelsearch.parcels'::regclass"
            )
        }
    assert indexes["parcels_point_gist"] is True
    assert "parcels_footprint_gist" in indexes


def test_load_command_counts_refuses_to_overwrite_and_replaces(
    postgres: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = synth.example_fabric()
    path = tmp_path / "parcels.gpkg"
    example.parcels.to_file(path)
    url = postgres.database("load")  # type: ignore[attr-defined]
    assert main(["parcels", "load", str(path), "--into", url]) == 0
    loaded = capsys.readouterr().out
    assert loaded == f"loaded {len(example.parcels)} parcels into parcelsearch.parcels\n"
    assert main(["parcels", "load", str(path), "--into", url]) == 2
    assert "already holds 300 parcels; pass --replace" in capsys.readouterr().err
    assert main(["parcels", "load", str(path), "--into", url, "--replace"]) == 0
    assert main(["parcels", "load", str(path), "--into", str(tmp_path / "x.sqlite")]) == 2
    assert "--into must be a postgresql:// URL" in capsys.readouterr().err


def test_bad_rows_are_named_before_anything_is_written(postgres: object) -> None:
    example = synth.example_fabric()
    frame = example.parcels.copy()
    frame.loc[3, "group_id"] = "nope"
    url = postgres.database("bad")  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="has group_id 'nope'"):
        load_parcels_into(frame, url)
    with pytest.raises(ConfigurationError, match="load parcels first"):
        PostgisParcelStore(url)
