"""The analyst's mistakes caught for free, advice that can work, and the age of what is served
(issue 49, points 2-4), on the command line and in Python against the reference service:
its request log is the witness of every call said to be spent, or not."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import geopandas as gpd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import shapely
from _cli import PYTHON, run, served

import parcelsearch
from parcelsearch.errors import InputError, QuotaWouldExceedError
from parcelsearch.notices import NothingMatchedWarning, OldPagesWarning
from parcelsearch.planning.plans import suggests_at_once

TRACTS = Path(__file__).resolve().parents[1] / "data" / "sf_tracts_2020.geojson"


def _client(service: Any, ca_bundle: str, key: Any, tmp_path: Path) -> parcelsearch.Client:
    """A client for ``key`` on the cache folder the command line's ``env`` uses."""
    return parcelsearch.Client(
        api_key=key,
        base_url=service.base_url,
        ca_bundle=ca_bundle,
        cache_dir=tmp_path / "cache",
        rate=40,
    )


@pytest.fixture
def degrees_as_metres(tmp_path: Path) -> tuple[gpd.GeoDataFrame, Path]:
    """The demo areas in longitude/latitude, declared EPSG:3857 (web mercator, metres)."""
    areas = parcelsearch.demo_areas().set_crs("EPSG:3857", allow_override=True)
    path = tmp_path / "mercator.gpkg"
    areas.to_file(path)
    return areas, path


def test_degrees_declared_in_web_mercator_spend_nothing(
    env, service, key, ca_bundle, degrees_as_metres, tmp_path, capsys
) -> None:
    """Issue 49: 99 calls, then "nothing matched". Now: exit 2 before any call, naming the
    fix and the override; trusted, the search runs (and finds nothing, as it says)."""
    areas, path = degrees_as_metres
    out = str(tmp_path / "ids.parquet")
    code, _, err = run(["search", str(path), "--out", out, "--quiet"], capsys)
    assert code == 2, err
    assert "looks like longitude/latitude in degrees, but EPSG:3857 counts in metres" in err
    assert "If they are degrees, declare --crs EPSG:4326" in err
    assert "If the CRS is right, pass --trust-crs." in err
    assert not PYTHON.search(err) and served(service, key) == 0
    code, _, err = run(["plan", str(path)], capsys)
    assert code == 2 and "--trust-crs" in err

    client = _client(service, ca_bundle, key, tmp_path)
    with pytest.raises(InputError, match="pass trust_crs=True") as caught:
        parcelsearch.search(areas, client=client, progress=False)
    assert caught.value.field == "crs" and served(service, key) == 0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NothingMatchedWarning)
        trusted = parcelsearch.search(areas, client=client, progress=False, trust_crs=True)
    assert trusted.calls == served(service, key) > 0 and trusted.nothing_matched


def test_a_tolerance_of_50_km_on_small_areas_spends_nothing(
    env, service, key, ca_bundle, tmp_path, capsys
) -> None:
    """Issue 49: --tolerance 50000 on tracts a few km wide spent 288 calls (and 19,800 on
    200 tracts after planning 8 minutes). Now: exit 2 before planning, in metres and as a
    share of the widest tract's width, naming the override."""
    tracts = gpd.read_file(TRACTS)
    path = tmp_path / "tracts.gpkg"
    tracts.to_file(path)
    out = str(tmp_path / "ids.parquet")
    code, _, err = run(
        [
            "search",
            str(path),
            "--id-column",
            "tract",
            "--tolerance",
            "50000",
            "--out",
            out,
            "--quiet",
        ],
        capsys,
    )
    assert code == 2, err
    assert "a tolerance of 50,000 m is 1,7" in err  # 1,7xx % of 2.9 km
    assert "% of the width of the widest area ('980900', 2.9 km wide)" in err
    assert "more than 50 % of it" in err
    assert "Use at most --tolerance 1400. If you mean it, pass --trust-tolerance." in err
    assert not PYTHON.search(err) and served(service, key) == 0
    code, _, err = run(["plan", str(path), "--id-column", "tract", "--tolerance", "50000"], capsys)
    assert code == 2 and "--trust-tolerance" in err

    client = _client(service, ca_bundle, key, tmp_path)
    with pytest.raises(
        InputError,
        match=r"Use at most tolerance=1400\. If you mean it, pass "
        r"trust_tolerance=True\.",
    ) as caught:
        parcelsearch.search(
            tracts, client=client, id_column="tract", tolerance=50_000, progress=False
        )
    assert caught.value.field == "tolerance" and served(service, key) == 0


def test_advice_never_names_fewer_calls_than_areas(
    env, service, key, ca_bundle, tmp_path, capsys
) -> None:
    """Issue 49: 288 tracts refused with a budget of 10 were told `plan --max-calls 10`,
    which can never fit. Now: the refusal says each area needs a call, suggests no
    tolerance and no --max-calls, and its --budget is at least one call per area."""
    tracts = gpd.read_file(TRACTS)
    tracts["geometry"] = shapely.segmentize(tracts.geometry.to_numpy(), 0.0001)  # > 2,000
    path = tmp_path / "tracts.gpkg"
    tracts.to_file(path)
    assert not suggests_at_once(parcelsearch.plan(tracts, id_column="tract"))
    code, _, err = run(
        [
            "search",
            str(path),
            "--id-column",
            "tract",
            "--budget",
            "10",
            "--out",
            str(tmp_path / "ids.parquet"),
            "--quiet",
        ],
        capsys,
    )
    assert code == 3, err
    assert (
        "Each area needs at least one call whatever the tolerance: 24 areas need at "
        "least 24 calls." in err
    )
    assert "--max-calls" not in err and "--tolerance" not in err
    raised = [int(word) for word in err.split("Raise --budget ")[1].split(".")[0].split()[:1]]
    assert raised[0] >= 24
    code, printed, err = run(
        ["plan", str(path), "--id-column", "tract", "--max-calls", "10"], capsys
    )
    assert code == 0, err
    assert (
        "no tolerance fits 10 calls: each area needs at least one, so 24 areas need at "
        "least 24 calls" in printed
    )

    client = _client(service, ca_bundle, key, tmp_path)
    with pytest.raises(QuotaWouldExceedError) as caught:
        parcelsearch.search(tracts, client=client, id_column="tract", budget=10, progress=False)
    text = str(caught.value)
    assert "24 areas need at least 24 calls" in text and "suggest_tolerance" not in text
    assert "tolerance=" not in text and served(service, key) == 0


def _age_cache(folder: Path, by: timedelta) -> int:
    """Move every cached page's fetch time back by ``by`` (the cache keeps it per page);
    returns the pages aged."""
    aged = 0
    for path in sorted(folder.glob("*.parquet")):
        table = pq.read_table(path)
        if "fetched_at" not in table.column_names:
            continue
        column = table.schema.get_field_index("fetched_at")
        older = pc.subtract(table.column("fetched_at"), pc.cast(by, "duration[us]"))
        pq.write_table(table.set_column(column, table.schema.field(column), older), path)
        aged += table.num_rows
    return aged


def test_a_rerun_says_how_old_its_pages_are_and_max_age_takes_days(
    env, service, key, ca_bundle, tmp_path, capsys, monkeypatch
) -> None:
    """Issue 49: a rerun a month later spent 0 calls and served last month's GroupIDs
    without a word. Now it says how old the oldest page is and how to re-check them, in
    both dialects; --max-age 30d (max_age='30d', $PARCELSEARCH_MAX_AGE) refuses them."""
    areas = parcelsearch.demo_areas().set_index("area_id").loc[["northside", "park-ring"]]
    path = tmp_path / "areas.gpkg"
    areas.reset_index().to_file(path)
    base = [
        "search",
        str(path),
        "--id-column",
        "area_id",
        "--quiet",
        "--out",
        str(tmp_path / "ids.parquet"),
    ]
    code, out, err = run(base, capsys)
    assert code == 0, err
    spent = served(service, key)
    assert spent > 0 and "0 pages from cache;" in out and "warning" not in err
    pages = _age_cache(tmp_path / "cache", timedelta(days=31, minutes=5))
    assert pages == spent

    code, out, err = run([*base, "--force"], capsys)
    assert code == 0, err
    assert served(service, key) == spent  # the witness: nothing asked again
    assert f"0 calls made, {pages} pages from cache (the oldest fetched 31 days ago, on " in out
    assert (
        f"parcelsearch: warning: {pages} pages came from the cache, the oldest fetched "
        "31 days ago, on "
    ) in err
    assert "Re-check them with --refresh changed (one call a piece" in err
    assert (
        "Or refuse pages older than a month with --max-age 30d or the environment "
        "variable PARCELSEARCH_MAX_AGE."
    ) in err
    assert not PYTHON.search(err)

    code, out, err = run([*base, "--force", "--max-age", "40d"], capsys)
    assert code == 0 and served(service, key) == spent  # 31 days is within 40

    client = _client(service, ca_bundle, key, tmp_path)
    with pytest.warns(OldPagesWarning, match=r"the oldest fetched 31 days ago") as caught:
        again = parcelsearch.search(areas, client=client, progress=False, max_age="32d")
    assert "refresh='changed'" in str(caught[0].message) and again.calls == 0
    oldest = datetime.fromisoformat(again.metadata["oldest_page_fetched_at"])
    assert timedelta(days=31) < datetime.now(UTC) - oldest < timedelta(days=31, hours=1)

    monkeypatch.setenv("PARCELSEARCH_MAX_AGE", "30d")
    with warnings.catch_warnings():
        warnings.simplefilter("error", OldPagesWarning)  # every page fetched afresh
        fresh = parcelsearch.search(areas, client=client, progress=False)
    assert fresh.calls == pages and served(service, key) == spent + pages
    assert fresh.cached_pages == 0 and fresh.metadata["oldest_page_fetched_at"] is None
    code, out, err = run([*base, "--force", "--max-age", "12h"], capsys)
    assert code == 0 and served(service, key) == spent + pages  # fresh pages served
    assert f"{pages} pages from cache (the oldest fetched " in out and "warning" not in err


def test_kilometres_declared_as_metres_are_out_at_sea_and_spend_nothing(
    env, service, key, ca_bundle, tmp_path, capsys
) -> None:
    """Issue 49: areas read in the wrong CRS land in the ocean, where a search spends its
    calls and finds nothing. Web mercator in kilometres, declared in metres (too large for
    the degrees check, inside the CRS's world-wide area of use): 557 km from land, refused
    before any call naming the row, the distance and both fixes; trusted, it runs."""
    tracts = gpd.read_file(TRACTS).iloc[:2].to_crs("EPSG:3857")
    tracts["geometry"] = tracts.geometry.scale(1e-3, 1e-3, origin=(0, 0))
    path = tmp_path / "kilometres.gpkg"
    tracts.to_file(path)
    out = str(tmp_path / "ids.parquet")
    code, _, err = run(
        ["search", str(path), "--id-column", "tract", "--out", out, "--quiet"], capsys
    )
    assert code == 2, err
    assert (
        "parcelsearch: error: areas '023300', '025800' lie about 557, 557 km from the "
        "nearest land (farther than 50 km) once read in EPSG:3857: out at sea" in err
    )
    assert "Declare the CRS they are really in with --crs EPSG:CODE." in err
    assert "If the CRS is right, pass --trust-crs." in err
    assert not PYTHON.search(err) and served(service, key) == 0
    code, _, err = run(["plan", str(path), "--id-column", "tract"], capsys)
    assert code == 2 and "from the nearest land" in err and served(service, key) == 0

    client = _client(service, ca_bundle, key, tmp_path)
    with pytest.raises(InputError, match="If the CRS is right, pass trust_crs=True") as caught:
        parcelsearch.search(tracts, client=client, id_column="tract", progress=False)
    assert (
        caught.value.row == "023300"
        and "areas.set_crs(" in str(caught.value.render("python"))
        and served(service, key) == 0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NothingMatchedWarning)
        trusted = parcelsearch.search(
            tracts, client=client, id_column="tract", progress=False, trust_crs=True
        )
    assert trusted.calls == served(service, key) > 0 and trusted.nothing_matched


def test_areas_far_from_every_active_market_spend_nothing_when_the_list_is_cached(
    env, service, key, ca_bundle, tmp_path, capsys
) -> None:
    """Issue 49: with the market list in the cache (the reference service's markets are in
    TX, AZ, ID, NM, NC), San Francisco's tracts are refused before any call, naming the row,
    the distance and --trust-markets / trust_markets=True; without the list at hand nothing
    is said (no call is spent to check); trusted, the search runs."""
    tracts = gpd.read_file(TRACTS).iloc[:2]
    path = tmp_path / "tracts.geojson"
    tracts.to_file(path)
    base = [
        "search",
        str(path),
        "--id-column",
        "tract",
        "--quiet",
        "--out",
        str(tmp_path / "ids.parquet"),
    ]
    code, listed, err = run(["markets"], capsys)
    assert code == 0 and "Abilene, TX" in listed and served(service, key) == 1
    code, _, err = run(base, capsys)
    assert code == 2, err
    assert "parcelsearch: error: areas '023300', '025800' lie about 646, 647" in err
    assert (
        " km from every state with an active market (farther than 50 km from AZ, ID, NC, "
        f"NM, TX: 45 markets in the market list cached from {service.base_url} (fetched "
        in " ".join(err.split())
    )
    assert " ago; if that service now serves other parcels, delete " in " ".join(err.split())
    assert (
        "to fetch its list again)), where the vendor has no parcels to find; nothing was "
        "planned or spent." in " ".join(err.split())
    )
    assert "If the areas are right, pass --trust-markets." in err
    assert not PYTHON.search(err) and served(service, key) == 1

    client = _client(service, ca_bundle, key, tmp_path)
    with pytest.raises(InputError, match="If the areas are right, pass trust_markets=True"):
        parcelsearch.search(tracts, client=client, id_column="tract", progress=False)
    with pytest.raises(InputError, match="pass trust_markets=True"):
        parcelsearch.price(tracts, client=client, id_column="tract")  # its survey unspent
    assert served(service, key) == 1
    elsewhere = parcelsearch.Client(
        api_key=key,
        base_url=service.base_url,
        ca_bundle=ca_bundle,
        cache_dir=tmp_path / "other",
        rate=40,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NothingMatchedWarning)
        unchecked = parcelsearch.search(
            tracts, client=elsewhere, id_column="tract", progress=False
        )  # no list at hand: no word
    assert unchecked.calls == served(service, key) - 1 > 0
    before = served(service, key)
    code, _, err = run([*base, "--trust-markets"], capsys)
    assert code == 0 and "--trust-markets" not in err, err
    assert served(service, key) > before
