"""Exact means exact whatever rule the vendor matches parcels by: searches of a real island
group over the reference service, under both of its ``--match`` rules.

The area is Rakino Island and the 23 islands within 3 km of it in the Hauraki Gulf (LINZ
NZ Coastlines and Islands Polygons (Topo 1:50k), CC BY 4.0, as the ``nzgeom`` package ships
them; 1,602 vertices, 6 decimals). A fabric of contiguous square parcels about 200 m a side
covers the whole group, sea included, so a piece reaching out over the water touches
parcels there. The witness is the fabric's own geometry: under the footprint rule a
GroupID found must belong to a parcel whose footprint touches the area grown by the
mode's promise (two grid steps, or ``t``), and every parcel touching the area must be
found; calls are counted in the service's request log.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

import parcelsearch
from parcelsearch.planning.tiling import GRID
from parcelsearch_service import synth
from parcelsearch_service.server import RunningService, start_service

DATA = Path(__file__).parents[1] / "data" / "linz_rakino_islands.geojson"
_SIDE = 0.002  # a parcel's side, in degrees


@pytest.fixture(scope="module")
def areas() -> gpd.GeoDataFrame:
    return gpd.read_file(DATA).set_index("area_id")[["geometry"]]


@pytest.fixture(scope="module")
def fabric(areas: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    x0, y0, x1, y1 = areas.total_bounds
    xs = np.arange(x0 - 0.01, x1 + 0.01, _SIDE) + 0.00037  # off the grid of the pieces
    ys = np.arange(y0 - 0.01, y1 + 0.01, _SIDE) + 0.00041
    x, y = (v.ravel() for v in np.meshgrid(xs, ys))
    rng = np.random.default_rng(38)
    return gpd.GeoDataFrame(
        {"parcel_id": np.arange(len(x)), "group_id": synth.group_ids(len(x), rng)},
        geometry=shapely.box(x, y, x + _SIDE, y + _SIDE),
        crs="EPSG:4326",
    )


def _service(fabric: gpd.GeoDataFrame, match: str, root: Path, cert_dir: Path):
    return start_service(parcels=fabric, keys=root / "keys.sqlite", cert_dir=cert_dir, match=match)


@pytest.fixture(scope="module")
def footprint_service(fabric, tmp_path_factory, service_cert_dir):
    with _service(
        fabric, "intersects", tmp_path_factory.mktemp("footprint"), service_cert_dir
    ) as svc:
        yield svc


@pytest.fixture(scope="module")
def point_service(fabric, tmp_path_factory, service_cert_dir):
    with _service(
        fabric, "representative-point", tmp_path_factory.mktemp("point"), service_cert_dir
    ) as svc:
        yield svc


def _search(
    svc: RunningService,
    areas,
    name: str,
    tmp_path: Path,
    ca_bundle: str,
    cache: str | None = None,
    **options,
) -> tuple[set[str], int, parcelsearch.SearchResult]:
    key = svc.keys.create(name, key_type="production", quota=100_000)
    client = parcelsearch.Client(
        api_key=key,
        base_url=svc.base_url,
        ca_bundle=ca_bundle,
        cache_dir=tmp_path / (cache or name),
    )
    result = parcelsearch.search(areas, client=client, progress=False, ledger=False, **options)
    log = svc.keys.requests(name)
    assert (log["status"] == 200).all() and len(log) == result.calls
    return set(result.ids["group_id"]), len(log), result


def _touching(fabric: gpd.GeoDataFrame, geom: shapely.Geometry) -> set[str]:
    return set(fabric.loc[fabric.intersects(geom), "group_id"])


def _reach(geom: shapely.Geometry, tolerance: float) -> shapely.Geometry:
    """The area grown by the promise: two grid steps, or ``t`` metres (in degrees of
    longitude at the area's latitude, the longer of the two: generous)."""
    if not tolerance:
        return shapely.buffer(geom, 2.01 * GRID, quad_segs=32)
    lat = abs(geom.bounds[1])
    return shapely.buffer(geom, tolerance / (111_320 * math.cos(math.radians(lat))), quad_segs=32)


@pytest.mark.slow
@pytest.mark.parametrize("tolerance", [0.0, 50.0])
def test_under_the_default_rule_no_parcel_outside_the_promise(
    areas, fabric, footprint_service, ca_bundle, tmp_path, tolerance
):
    """A vendor matching footprints, the rule not given: every parcel touching the area is
    found and none whose footprint lies beyond the promise; the plan says what connectors
    could save were the rule a point's. Planned for a point instead, the connectors'
    slivers cross the water and match parcels there (the witness can fail)."""
    geom = areas.geometry.iloc[0]
    got, calls, result = _search(
        footprint_service, areas, f"default-{tolerance:g}", tmp_path, ca_bundle, tolerance=tolerance
    )
    assert result.metadata["match"] == "unknown"
    assert "connectors could save up to" in repr(result.plan)
    inside, allowed = _touching(fabric, geom), _touching(fabric, _reach(geom, tolerance))
    assert len(inside) > 100 and inside <= got
    assert got <= allowed, f"{len(got - allowed)} parcels outside the promise"
    wrong, wrong_calls, _ = _search(
        footprint_service,
        areas,
        f"wrong-{tolerance:g}",
        tmp_path,
        ca_bundle,
        tolerance=tolerance,
        match="representative-point",
    )
    assert wrong_calls < calls and inside <= wrong
    assert wrong - allowed  # a sliver across the water matched parcels outside


@pytest.mark.slow
def test_under_the_point_rule_connectors_keep_their_savings(
    areas, fabric, point_service, ca_bundle, tmp_path
):
    """A vendor matching by a point, and told so: the islands share pieces through
    connectors (8 calls' worth of pieces against 27), and every parcel whose point lies in
    the area is found, none beyond two grid steps of it but in a sliver."""
    geom = areas.geometry.iloc[0]
    strict = parcelsearch.plan(areas)
    got, calls, result = _search(
        point_service, areas, "point", tmp_path, ca_bundle, match="representative-point"
    )
    assert result.metadata["match"] == "representative-point"
    assert len(result.plan.pieces) < len(strict.pieces) / 3
    store = point_service.store
    inside = set(store.group_ids[shapely.intersects_xy(geom, store.x, store.y)])
    assert len(inside) > 30 and inside <= got
    union = shapely.union_all([p.geometry for p in result.plan.pieces])
    assert got == set(store.group_ids[shapely.intersects_xy(union, store.x, store.y)])
    plain, plain_calls, _ = _search(point_service, areas, "point-default", tmp_path, ca_bundle)
    assert plain == inside and calls < plain_calls
    # a page is keyed by its ring alone: the islands no connector joined are the same rings
    # under either rule, and their pages come from the cache the point-rule search filled
    again, again_calls, cached = _search(
        point_service, areas, "point-then-default", tmp_path, ca_bundle, cache="point"
    )
    shared = {p.polygon_json for p in result.plan.pieces} & {
        p.polygon_json for p in cached.plan.pieces
    }
    assert again == plain and shared and cached.cached_pages >= len(shared)
    assert again_calls == plain_calls - cached.cached_pages


@pytest.mark.slow
def test_one_sliver_learns_the_rule_of_either_service(
    areas, footprint_service, point_service, ca_bundle, tmp_path, monkeypatch
):
    """learn_match_rule spends one call (the service's request log) on a sliver across the
    area and names each service's rule, remembered for that service: a search given no
    rule (and no $PARCELSEARCH_MATCH) then plans under it; the environment still wins."""
    from parcelsearch.rule_probe import learn_match_rule, remembered_rule, sliver

    monkeypatch.delenv("PARCELSEARCH_MATCH", raising=False)

    ring = shapely.Polygon(json.loads(sliver(areas)))
    assert ring.is_valid and ring.intersects(areas.geometry.iloc[0])
    for svc, rule in ((footprint_service, "intersects"), (point_service, "representative-point")):
        name = f"learn-{rule}"
        key = svc.keys.create(name, key_type="production", quota=1_000)
        client = parcelsearch.Client(
            api_key=key, base_url=svc.base_url, ca_bundle=ca_bundle, cache_dir=tmp_path / name
        )
        assert remembered_rule(client) is None
        assert learn_match_rule(client, areas) == rule
        assert len(svc.keys.requests(name)) == 1
        assert remembered_rule(client) == rule
        again = parcelsearch.Client(
            api_key=key, base_url=svc.base_url, ca_bundle=ca_bundle, cache_dir=tmp_path / name
        )
        assert remembered_rule(again) == rule  # kept with the vendor's profile
        assert rule in (tmp_path / name / "vendors.json").read_text()
        result = parcelsearch.search(areas, client=client, progress=False, ledger=False)
        assert result.metadata["match"] == rule
    monkeypatch.setenv("PARCELSEARCH_MATCH", "unknown")
    result = parcelsearch.search(areas, client=client, progress=False, ledger=False)
    assert result.metadata["match"] == "unknown"


def _doctor_env(monkeypatch, svc: RunningService, key: str, ca_bundle: str, cache: Path) -> None:
    monkeypatch.setenv("PARCELSEARCH_API_KEY", key)
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", svc.base_url)
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", ca_bundle)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(cache))
    monkeypatch.delenv("PARCELSEARCH_MATCH", raising=False)


def _finding(out: str, check: str) -> str:
    """The report's line of one check (``  matching rule  ok  …``), without the indent."""
    (line,) = [line.strip() for line in out.splitlines() if line.strip().startswith(check)]
    return line


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["intersects", "representative-point"])
def test_doctor_with_areas_learns_the_rule_for_one_more_call(
    rule, areas, footprint_service, point_service, ca_bundle, tmp_path, monkeypatch, capsys
):
    """``doctor`` without --areas spends its 2 calls and says the rule is unknown and how to
    learn it; ``--dry-run --areas`` prices 3 and spends none; ``--yes --areas`` spends 3
    (the service's request log), names the rule and keeps it for the base URL, and a later
    search given no rule plans under it."""
    from _cli import run

    from parcelsearch.rule_probe import remembered_rule, sliver

    svc = footprint_service if rule == "intersects" else point_service
    name = f"doctor-{rule}"
    key = svc.keys.create(name, key_type="production", quota=1_000)
    _doctor_env(monkeypatch, svc, key, ca_bundle, tmp_path / "cache")
    code, out, err = run(["doctor", "--yes"], capsys)
    assert code == 0, err
    assert len(svc.keys.requests(name)) == 2 and "2 calls spent (price 2, at most 3" in out
    assert _finding(out, "matching rule").split()[2] == "unknown"
    assert "give the areas you mean to search" in _finding(out, "matching rule")
    assert (
        "the vendor's matching rule is unknown: parcelsearch doctor --areas FILE learns "
        "it with one more call"
        in out
        and "areas=" not in out
    )
    code, out, err = run(["doctor", "--dry-run", "--areas", str(DATA)], capsys)
    assert code == 0 and "0 calls spent (price 3, at most 4" in out
    assert len(svc.keys.requests(name)) == 2
    code, out, err = run(["doctor", "--yes", "--areas", str(DATA)], capsys)
    assert code == 0, err
    log = svc.keys.requests(name)
    assert len(log) == 5 and "3 calls spent (price 3, at most 4" in out
    sent = log.iloc[-1]  # page 1 of the sliver across the islands
    assert sent["page"] == 1 and sent["status"] == 200
    assert sent["polygon_sha256"] == hashlib.sha256(sliver(areas).encode()).hexdigest()
    assert _finding(out, "matching rule").split()[2:4] == ["ok", f"{rule}:"]
    assert f"match_rule={rule}" in out
    profile = json.loads((tmp_path / "cache" / "vendors.json").read_text())[svc.base_url]
    assert profile["match_rule"] == rule
    client = parcelsearch.Client(
        api_key=key, base_url=svc.base_url, ca_bundle=ca_bundle, cache_dir=tmp_path / "cache"
    )
    assert remembered_rule(client) == rule
    code, out, err = run(["doctor", "--yes"], capsys)  # remembered: said, not asked again
    assert len(svc.keys.requests(name)) == 7
    assert _finding(out, "matching rule").split()[2:4] == ["ok", f"{rule},"]
    assert "learnt earlier for this base URL" in out and "--areas FILE" not in out
    if rule == "representative-point":  # a later search given no --match plans under it
        from _vendor import search

        code, out, err, ids, meta = search(capsys, DATA, tmp_path / "ids.parquet")
        assert code == 0, err
        assert meta["match"] == rule
        sent = svc.keys.requests(name).iloc[7:]  # the search's requests
        pieces = sent["polygon_sha256"].dropna().nunique()
        assert pieces == len(parcelsearch.plan(areas, match=rule).pieces)
        assert pieces < len(parcelsearch.plan(areas).pieces) / 3  # connectors save calls
        # 'plan' shows the pieces that search sent: the learnt rule, for the same base URL
        code, out, err = run(
            ["plan", str(DATA), "--out-tiles", str(tmp_path / "t.parquet")], capsys
        )
        assert code == 0, err
        assert f"planned under the matching rule learnt for {svc.base_url}: {rule}" in out
        assert len(pd.read_parquet(tmp_path / "t.parquet")) == pieces
        assert len(svc.keys.requests(name)) == 7 + len(sent)  # plan sent nothing
        code, out, err = run(
            [
                "plan",
                str(DATA),
                "--base-url",
                "https://elsewhere.example",
                "--out-tiles",
                str(tmp_path / "u.parquet"),
            ],
            capsys,
        )
        assert code == 0 and "planned under" not in out  # another service: nothing learnt
        assert len(pd.read_parquet(tmp_path / "u.parquet")) == len(parcelsearch.plan(areas).pieces)


def test_check_service_with_areas_in_python(areas, footprint_service, ca_bundle, tmp_path):
    """check_service(client, areas=...) prices 3 calls, spends none dry, and 3 in all when
    run (the service's request log), the rule among its findings and learnt."""
    svc = footprint_service
    key = svc.keys.create("check-py", key_type="production", quota=1_000)
    with parcelsearch.Client(
        api_key=key, base_url=svc.base_url, ca_bundle=ca_bundle, cache_dir=tmp_path / "py"
    ) as client:
        priced = parcelsearch.check_service(client, dry_run=True, areas=areas)
        assert (priced.price, priced.cap, priced.calls) == (3, 4, 0)
        assert len(svc.keys.requests("check-py")) == 0
        report = parcelsearch.check_service(client, areas=areas)
        assert report.ok and report.calls == 3 == len(svc.keys.requests("check-py"))
        (found,) = [f for f in report.findings if f.check == "matching rule"]
        assert found.verdict == "ok" and found.text.startswith("intersects: ")
        assert report.learned["match_rule"] == "intersects" == client.vendor.match_rule
