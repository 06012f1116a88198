"""A price line before the first call, and refusals that name the whole price (issue 41,
point 3), on the command line and in Python; calls witnessed by the service's request log."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from _cli import PYTHON, run, served

import parcelsearch
from parcelsearch._shared import next_month_start
from parcelsearch.cli.searching import PriceQuestion
from parcelsearch.maps.describe import plan_spec
from parcelsearch.notices import PartialResultWarning
from parcelsearch.planning import survey
from parcelsearch_service import synth
from parcelsearch_service.synth import fabric_for

TRACTS = Path(__file__).resolve().parents[1] / "data" / "sf_tracts_2020.geojson"


def test_the_command_line_prices_before_spending(env, service, key, tmp_path: Path, capsys) -> None:
    areas = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(areas)
    base = ["search", str(areas), "--id-column", "area_id", "--out", str(tmp_path / "a.csv")]
    code, _, err = run(base, capsys)
    assert code == 0, err
    full = served(service, key)
    assert "price: at least 7 calls\nexact: 7 for page 1 of 7 pieces\n" in err
    assert (
        f"price: exactly {full} calls\nspent: 7 calls so far\nexact: {full - 7} for later "
        "pages page 1 told\n"
    ) in err

    # The same areas again, every page re-read: the whole price is known before the first
    # call, and the refusal names it with the same word.
    code, _, err = run([*base, "--refresh", "--budget", "7"], capsys)
    assert code == 3 and served(service, key) == full  # nothing spent
    assert (
        f"price: about {full} calls\nexact: 7 for page 1 of 7 pieces\nestimated: about "
        f"{full - 7} for later pages, from what earlier runs found\n"
    ) in err
    assert f"this search needs about {full} calls (" in err and f"--budget {full}." in err
    assert "at least" not in err

    code, _, err = run([*base, "--refresh", "--budget", str(full)], capsys)
    assert code == 0, err
    assert served(service, key) == 2 * full  # following the advice was enough, and exact


def test_python_progress_prices_before_spending(make_client, demo_areas, service, capsys) -> None:
    client = make_client()
    first = parcelsearch.search(demo_areas, client=client)
    assert "price: at least 7 calls" in capsys.readouterr().err
    with pytest.raises(parcelsearch.QuotaWouldExceedError) as refused:
        parcelsearch.search(demo_areas, client=client, refresh="all", budget=7)
    err = capsys.readouterr().err
    assert f"price: about {first.calls} calls" in err
    assert f"needs about {first.calls} calls" in str(refused.value)
    assert f"budget={first.calls}." in str(refused.value)
    assert len(service.keys.requests(client.key_name)) == first.calls


# -- issue 49: the price before the bulk, the survey and the decision point -----------------


def _search_argv(tmp_path: Path, areas: Any, *extra: str) -> list[str]:
    path = tmp_path / "areas.gpkg"
    if not path.exists():
        areas.to_file(path)
    return ["search", str(path), "--id-column", "area_id", "--out", str(tmp_path / "a.csv"), *extra]


@pytest.mark.slow
def test_a_search_above_the_threshold_asks_before_its_bulk(
    env, service, key, tmp_path: Path, capsys, monkeypatch
) -> None:
    """The '309-call case', scaled: seven pieces whose pages cost well above --ask-above.
    Page 1 of each (the survey: every piece, they are few) is spent, then the search stops
    without a terminal and without --yes; --yes goes on; a --budget covering it goes on."""
    monkeypatch.delenv("PARCELSEARCH_ASK_ABOVE")  # the default a person gets: 100
    argv = _search_argv(tmp_path, parcelsearch.demo_areas())
    code, _, err = run([*argv, "--ask-above", "5"], capsys)
    assert code == 3, err
    assert served(service, key) == 7  # the survey only: page 1 of each piece
    lines = err.splitlines()
    price = next(line for line in lines if line.startswith("price: exactly"))
    total = int(price.split()[2])
    assert total - 7 > 5
    assert (
        f"this search needs exactly {total} calls: {total - 7} calls still to spend, "
        "more than the 5 a search spends without asking" in err
    )
    assert "Pass --yes to spend them" in err and f"--budget {total - 7}" in err
    assert f"--ask-above {total - 7}" in err and not PYTHON.search(err)

    # A run without a terminal, without --yes, under the default threshold: the same stop
    # (the cached page 1s are not paid again), nothing spent past the decision point.
    code, _, err = run([*argv, "--ask-above", str(total - 8)], capsys)
    assert code == 3 and served(service, key) == 7, err

    # On a terminal the user is asked, and no is no.
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or "n")
    code, _, err = run([*argv, "--ask-above", "5"], capsys)
    assert code == 3 and served(service, key) == 7
    assert asked == [
        f"spend exactly {total - 7} calls in all ({total - 7:,} still to spend)? [y/N] "
    ]
    monkeypatch.setattr("builtins.input", lambda q: "y")
    code, _, err = run([*argv, "--ask-above", "5"], capsys)
    assert code == 0 and served(service, key) == total, err

    # Another cache: --yes spends without asking, a budget covering the price goes on.
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    for flags in (["--yes"], ["--budget", str(total)]):
        monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / f"cache{flags[0]}"))
        before = served(service, key)
        code, _, err = run([*argv, "--ask-above", "5", *flags], capsys)
        assert code == 0 and served(service, key) == before + total, err


def test_python_decides_with_an_argument_never_a_prompt(
    make_client, demo_areas, service, monkeypatch
) -> None:
    client = make_client()
    monkeypatch.setattr("builtins.input", lambda q: pytest.fail("asked on stdin"))
    with pytest.raises(parcelsearch.PriceNotConfirmedError) as stopped:
        parcelsearch.search(demo_areas, client=client, ask_above=5, progress=False)
    assert len(service.keys.requests(client.key_name)) == 7
    text = str(stopped.value)
    assert "Pass confirm=True to spend them" in text and "ask_above=" in text
    assert stopped.value.result is not None and not stopped.value.result.complete
    result = parcelsearch.search(
        demo_areas, client=client, ask_above=5, confirm=True, progress=False
    )
    assert result.complete
    assert len(service.keys.requests(client.key_name)) == result.calls + 7


def _cut(areas: gpd.GeoDataFrame, parts: int) -> gpd.GeoDataFrame:
    """Each area cut by a ``parts`` × ``parts`` grid over its bounds (block-like parts)."""
    shapes = []
    for geom in areas.geometry:
        x0, y0, x1, y1 = geom.bounds
        for i in range(parts):
            for j in range(parts):
                cell = shapely.box(
                    x0 + (x1 - x0) * i / parts,
                    y0 + (y1 - y0) * j / parts,
                    x0 + (x1 - x0) * (i + 1) / parts,
                    y0 + (y1 - y0) * (j + 1) / parts,
                )
                shapes.extend(
                    p
                    for p in shapely.get_parts(geom.intersection(cell))
                    if isinstance(p, shapely.Polygon) and p.area > 1e-9
                )
    return gpd.GeoDataFrame({"area_id": range(len(shapes))}, geometry=shapes, crs=4326)


def _sf_blocks(
    start_own_service: Any, tmp_path: Path, name: str
) -> tuple[gpd.GeoDataFrame, Any, parcelsearch.Client]:
    """SF's tracts cut into block-like areas; a service of their own on a synthetic fabric;
    a client (cache in ``tmp_path``) of a new key ``name`` on it."""
    areas = _cut(gpd.read_file(TRACTS), 2)
    svc = start_own_service(parcels=fabric_for(areas))
    key = svc.keys.create(name, key_type="production", quota=100_000, per_second=1_000)
    client = parcelsearch.Client(
        api_key=key,
        base_url=svc.base_url,
        ca_bundle=str(svc.ca_path),
        cache_dir=tmp_path / "cache",
        rate=200,
    )
    return areas, svc, client


@pytest.mark.slow
def test_san_francisco_tracts_get_an_interval_before_more_than_the_survey(
    start_own_service, tmp_path: Path, capsys
) -> None:
    """A 288-tract-like case: SF's tracts cut into ~100 block-like areas under a synthetic
    fabric. The survey (a sample of page 1s, at most a tenth of the estimate) is all that is
    spent before the price with its 95 % interval, which holds the true total."""
    name = "sf-price"
    areas, svc, client = _sf_blocks(start_own_service, tmp_path, name)
    with pytest.raises(parcelsearch.PriceNotConfirmedError) as stopped:
        parcelsearch.search(areas, client=client, ask_above=50, quota="1500/month")
    lines = capsys.readouterr().err.splitlines()
    surveyed = len(svc.keys.requests(name))
    said = next(
        re.match(r"survey: page 1 of (\d+) of the (\d+) pieces", line)
        for line in lines
        if line.startswith("survey: ")
    )
    assert said is not None and int(said[1]) <= surveyed < int(said[2])
    price = next(line for line in lines if "95% interval" in line and line.startswith("price"))
    low, high = (
        int(x.replace(",", ""))
        for x in re.search(r"95% interval ([\d,]+)–([\d,]+)", price).groups()
    )
    assert any(
        line.startswith(f"spent: {surveyed} calls so far, on a survey: page 1 of {surveyed} of")
        for line in lines
    ), lines
    assert sum(line.count("never waste") for line in lines) == 1  # said once, by the survey
    assert "95% interval" in str(stopped.value)
    left = 1500 - surveyed
    assert any(
        re.fullmatch(rf"quota: it would leave about [\d,]+ of the {left:,} left this month", line)
        for line in lines
    ), lines
    result = parcelsearch.search(areas, client=client, confirm=True, progress=False)
    true_total = len(svc.keys.requests(name))
    assert result.complete and true_total == surveyed + result.calls
    assert low <= true_total <= high
    assert surveyed <= 0.1 * true_total + 1  # the survey: about a tenth at most


def test_allow_partial_returns_the_partial_result_in_python(
    make_client, demo_areas, service
) -> None:
    client = make_client()
    with pytest.warns(PartialResultWarning, match="is partial") as told:
        result = parcelsearch.search(
            demo_areas, client=client, budget=9, allow_partial=True, progress=False
        )
    assert not result.complete and 7 < result.calls <= 9  # whole areas, the cheapest first
    assert len(service.keys.requests(client.key_name)) == result.calls
    message = str(told[0].message)
    assert "not complete" in message and "search again with budget=" in message


def test_price_lines_are_whole_lines_apart_from_the_bar(
    env, service, key, tmp_path: Path, capsys
) -> None:
    """Every price block is whole lines of their own (no bar's carriage return in them, no
    word cut, at most 100 characters), and on a resume the first price is the calls still
    needed, never 'about 0'."""
    argv = _search_argv(tmp_path, parcelsearch.demo_areas())
    code, _, err = run([*argv, "--budget", "9", "--allow-partial"], capsys)
    assert code == 3, err
    spent = served(service, key)
    code, _, err = run(argv, capsys)
    assert code == 0, err
    prices = [line for line in err.split("\n") if "price:" in line]
    assert prices and all(
        line.startswith("price: ") and "\r" not in line and line.endswith("calls")
        for line in prices
    )
    blocks = [
        line
        for line in err.split("\n")
        if line.split(":")[0] in ("price", "spent", "exact", "estimated")
    ]
    assert len(blocks) > len(prices) and all(len(line) <= 100 for line in blocks)
    first = prices[0]
    assert "about 0 " not in first and not first.startswith("price: exactly 0 ")
    needed = served(service, key) - spent
    assert first.startswith(f"price: exactly {needed} call")


def test_price_in_python_pays_only_the_survey_and_the_search_reuses_it(
    make_client, demo_areas, service
) -> None:
    client = make_client()
    price = parcelsearch.price(demo_areas, client=client)
    assert len(service.keys.requests(client.key_name)) == price.spent == 7  # page 1s only
    assert str(price).startswith(f"price: exactly {price.total} calls")
    asked: list[parcelsearch.Price] = []
    result = parcelsearch.search(
        demo_areas,
        client=client,
        ask_above=1,
        progress=False,
        confirm=lambda told: asked.append(told) or True,
    )
    assert asked == [price]  # one price for the job: asked with price()'s figures
    assert result.calls == price.remaining  # the surveyed pages were reused, as priced
    assert len(service.keys.requests(client.key_name)) == price.total
    again = parcelsearch.price(demo_areas, client=client)
    assert (again.total, again.spent) == (0, 0)  # all cached: nothing to pay
    with pytest.raises(parcelsearch.ConfigurationError, match="refresh='all'"):
        parcelsearch.price(demo_areas, client=client, refresh="changed")


def test_a_budget_with_allow_partial_is_the_cap_chosen_and_not_asked(
    make_client, demo_areas, service
) -> None:
    client = make_client()
    with pytest.warns(PartialResultWarning):
        result = parcelsearch.search(
            demo_areas, client=client, ask_above=5, budget=9, allow_partial=True, progress=False
        )
    assert not result.complete and 7 < result.calls <= 9
    assert len(service.keys.requests(client.key_name)) == result.calls


@pytest.mark.slow
def test_neighbouring_areas_are_priced_from_earlier_searches_without_a_survey(
    start_own_service, tmp_path: Path, capsys
) -> None:
    """Issue 49's "learnt": SF's tracts cut into block-like areas, every other one searched
    first; the others (their neighbours) are then priced from the density those earlier
    pieces showed: no survey (the service's log: not one call before the decision point),
    a price "learnt from N earlier pieces nearby" whose 95 % interval holds the true total."""
    name = "sf-learnt"
    areas, svc, client = _sf_blocks(start_own_service, tmp_path, name)
    # Every other area first; of the others, those on the mainland (inside the first's
    # pieces, not an island off the coast) second.
    first, second = areas.iloc[::2], areas.iloc[1::2]
    second = second[
        shapely.within(
            shapely.centroid(second.geometry.to_numpy()),
            shapely.box(-122.515, 37.705, -122.385, 37.805),
        )
    ]
    planned = parcelsearch.plan(second)
    # before any search: the minimum, a survey's size
    unseen = parcelsearch.known_price(planned, client)
    assert unseen.known == "lower" and unseen.survey == survey.pilot_size(len(planned.pieces))
    assert f"a survey of about {unseen.survey} calls would price the rest" in repr(planned)
    parcelsearch.search(first, client=client, confirm=True, progress=False)
    before = len(svc.keys.requests(name))
    capsys.readouterr()
    # The plan's own repr and map: the learnt price and what it leaves of the quota, free.
    known = parcelsearch.known_price(planned, client, quota="1500/month")
    assert len(svc.keys.requests(name)) == before and known.known == "learnt"
    shown = repr(planned)
    assert f"price: about {known.total} calls, 95% interval {known.low}–{known.high}" in shown
    assert "earlier pieces nearby" in shown and f"of the {1500 - before:,} left this month" in shown
    assert "learnt from" in planned._repr_html_()
    assert "learnt from" in plan_spec(planned).subtitle
    with pytest.raises(parcelsearch.PriceNotConfirmedError) as stopped:
        parcelsearch.search(second, client=client, ask_above=20)
    assert len(svc.keys.requests(name)) == before  # no survey: nothing spent
    lines = capsys.readouterr().err.splitlines()
    assert not any(line.startswith("survey: ") for line in lines), lines
    price = next(line for line in lines if "95% interval" in line and line.startswith("price"))
    learnt = re.search(
        r"\nestimated: about [\d,]+ for later pages, learnt from (\d+) earlier "
        r"pieces nearby\n",
        "\n".join(lines) + "\n",
    )
    assert learnt is not None and int(learnt[1]) >= 20, lines
    low, high = (
        int(x.replace(",", ""))
        for x in re.search(r"95% interval ([\d,]+)–([\d,]+)", price).groups()
    )
    assert "learnt from" in str(stopped.value)
    # A learnt price that does not fit the budget is refused before any call.
    with pytest.raises(parcelsearch.QuotaWouldExceedError) as refused:
        parcelsearch.search(second, client=client, budget=50, progress=False)
    assert "learnt from" in str(refused.value)
    assert "stopped before spending (0 calls spent)." in str(refused.value)
    assert len(svc.keys.requests(name)) == before
    result = parcelsearch.search(second, client=client, confirm=True, progress=False)
    true_total = len(svc.keys.requests(name)) - before
    assert result.complete and true_total == result.calls
    assert low <= true_total <= high, (low, true_total, high)
    assert (known.low, known.high) == (low, high)  # the plan said what the search said
    done = parcelsearch.known_price(planned, client)
    assert (done.known, done.total) == ("exact", 0)  # all cached now
    assert repr(planned).count("price: exactly 0 calls") == 1


def _squares_varying(seed: int) -> tuple[gpd.GeoDataFrame, gpd.GeoDataFrame]:
    """80 squares of mixed sizes (60 to 900 m a side) over 12 km of a town, and a fabric
    under them whose density falls from a random centre to a twentieth at the far edge
    (the bench's "80 squares, varying")."""
    rng = np.random.default_rng(seed)
    sides = np.exp(rng.uniform(math.log(60), math.log(900), 80)) / 111_000
    corners = rng.uniform(0, 12_000, (80, 2)) / 111_000 + (-97.35, 32.75)
    areas = gpd.GeoDataFrame(
        {"area_id": range(80)},
        crs=4326,
        geometry=[
            shapely.box(x, y, x + side * 1.19, y + side)
            for (x, y), side in zip(corners, sides, strict=True)
        ],
    )
    parcels = fabric_for(areas, seed=seed)
    xy = shapely.get_coordinates(parcels.geometry.representative_point())
    unit = (xy - xy.min(axis=0)) / np.ptp(xy, axis=0)
    keep = np.clip(1.0 - 1.9 * np.hypot(*(unit - rng.random(2)).T) / math.sqrt(2), 0.05, 1.0)
    return areas, parcels[rng.random(len(parcels)) < keep].reset_index(drop=True)


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "asked_by"), [(1, "search"), (3, "search"), (5, "price")])
def test_a_wide_interval_names_the_survey_share_that_narrows_it(
    start_own_service, tmp_path: Path, capsys, seed: int, asked_by: str
) -> None:
    """80 squares of mixed sizes under density varying across the town: a tenth of the
    least the search can cost leaves the interval wider than ±20 %; the price line and the
    decision point name the survey share that narrows it (in each dialect). Asked for, that
    share's survey (the first survey's pages cached, not paid again) brings the interval
    within ±20 % of the estimate, holding the true total, and spends within that share of
    it; witnessed by the service's request log."""
    areas, parcels = _squares_varying(seed)
    svc = start_own_service(parcels=parcels)
    name = f"squares-{seed}"
    key = svc.keys.create(name, key_type="production", quota=100_000, per_second=1_000)
    client = parcelsearch.Client(
        api_key=key,
        base_url=svc.base_url,
        ca_bundle=str(svc.ca_path),
        cache_dir=tmp_path / "cache",
        rate=200,
    )
    with pytest.raises(parcelsearch.PriceNotConfirmedError) as stopped:
        parcelsearch.search(areas, client=client, ask_above=20)
    first = len(svc.keys.requests(name))
    price = capsys.readouterr().err
    said = re.search(
        r"\ninterval: ±(\d+)%: the survey stopped at its cap, a tenth of a low "
        r"bound of the search's cost\nnarrower: a survey share of ([\d.]+) "
        r"would narrow it to about ±20%\n",
        price,
    )
    assert said is not None and int(said[1]) > 20, price
    share = float(said[2])
    assert f"survey_share={share:g}" in str(stopped.value)
    assert f"--survey-share {share:g}" in stopped.value.render("cli")
    assert stopped.value.survey_share == share

    if asked_by == "search":  # stops at the decision point again, narrower
        with pytest.raises(parcelsearch.PriceNotConfirmedError) as again:
            parcelsearch.search(
                areas, client=client, ask_above=20, survey_share=stopped.value.survey_share
            )
        assert again.value.survey_share is None  # narrow enough: nothing more to name
        price = capsys.readouterr().err
        value, low, high = (
            int(x.replace(",", ""))
            for x in re.search(
                r"price: about ([\d,]+) calls, 95% interval ([\d,]+)–([\d,]+)", price
            ).groups()
        )
        assert "stopped at its cap" not in price, price
    else:  # priced with it, paying only the survey
        priced = parcelsearch.price(areas, client=client, survey_share=share)
        value, low, high = priced.total, priced.low, priced.high
        assert priced.wider_share is None and not priced.capped
    second = len(svc.keys.requests(name)) - first
    assert (high - low) / 2 <= 0.2 * value
    result = parcelsearch.search(areas, client=client, confirm=True, progress=False)
    true_total = len(svc.keys.requests(name))
    # The price is of the run that states it: the first survey's page 1s were spent
    # before it (a survey that reaches most pieces states a narrow interval, which the
    # first survey's calls would fall outside).
    assert result.complete and low <= true_total - first <= high
    assert true_total == first + second + result.calls  # the surveyed pages were reused
    assert 0 < second <= share * true_total


@pytest.mark.slow
def test_on_a_terminal_the_decision_point_offers_to_survey_more(
    start_own_service, tmp_path: Path, capsys, monkeypatch
) -> None:
    """The command line's decision point after a survey stopped at its cap: a third answer,
    `s`, surveys more (the share the price named; the pages surveyed so far cached, not paid
    again), prices again within ±20 % and asks again; `y` then spends the rest. Every call
    witnessed by the service's request log."""
    areas, parcels = _squares_varying(1)
    svc = start_own_service(parcels=parcels)
    key = svc.keys.create("squares-asked", key_type="production", quota=100_000, per_second=1_000)
    for name, value in (
        ("API_KEY", key),
        ("CACHE_DIR", str(tmp_path / "cache")),
        ("RATE", "200"),
        ("ASK_ABOVE", "20"),
    ):
        monkeypatch.setenv(f"PARCELSEARCH_{name}", value)
    argv = [
        *_search_argv(tmp_path, areas),
        "--base-url",
        svc.base_url,
        "--ca-bundle",
        str(svc.ca_path),
    ]
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked: list[str] = []
    answers = iter(["s", "y"])
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or next(answers))
    code, _, err = run(argv, capsys)
    assert code == 0, err
    share = float(re.search(r"narrower: a survey share of ([\d.]+) would narrow it", err)[1])
    assert asked[0].endswith(
        f"[y/N, or s: survey more first (a survey share of {share:g}) "
        "to narrow the interval to about ±20%] "
    )
    assert asked[1].endswith("[y/N] ")  # narrow now: nothing more to offer
    prices = [
        line for line in err.splitlines() if line.startswith("price: about") and "interval" in line
    ]
    assert len(prices) == 2 and err.count("the survey stopped at its cap") == 1
    value, low, high = (
        int(x.replace(",", ""))
        for x in re.match(
            r"price: about ([\d,]+) calls, 95% interval ([\d,]+)–([\d,]+)", prices[1]
        ).groups()
    )
    assert (high - low) / 2 <= 0.2 * value
    log = svc.keys.requests("squares-asked")
    true_total = len(log)
    # The second price is of the search `s` ran again: the first survey's page 1s were
    # spent before it (the first price block's spent line says how many).
    first = int(re.search(r"^spent: ([\d,]+) calls? so far", err, re.M)[1].replace(",", ""))
    assert low <= true_total - first <= high
    # Nothing paid twice: surveying more read only pages not read before.
    assert not log.duplicated(["path", "polygon_sha256", "page"]).any()

    # Without a terminal the question is never asked, and no third answer is offered.
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache2"))
    before = len(svc.keys.requests("squares-asked"))
    code, _, err = run(argv, capsys)
    assert code == 3 and "--survey-share" in err and len(asked) == 2
    assert len(svc.keys.requests("squares-asked")) - before <= 0.1 * true_total


# -- issue 56: nothing past what you chose; one price per job ----------------------------------


def _metro_and_rural(rng_seed: int = 1) -> tuple[gpd.GeoDataFrame, gpd.GeoDataFrame]:
    """The metro county's case, scaled: 60 sparse squares (about a page each) and one small
    square holding most of the parcels (flats stacked over its lots, over a hundred pages): the
    survey, which rarely draws the small square, prices the job low."""
    step, side = 900 / 111_000, 500 / 111_000
    boxes = [
        shapely.box(
            -97.35 + (i % 10) * step,
            32.75 + (i // 10) * step,
            -97.35 + (i % 10) * step + side * 1.19,
            32.75 + (i // 10) * step + side,
        )
        for i in range(60)
    ]
    metro = shapely.box(
        -97.35 + 10 * step, 32.75, -97.35 + 10 * step + 200 / 111_000 * 1.19, 32.75 + 200 / 111_000
    )
    areas = gpd.GeoDataFrame({"area_id": range(61)}, geometry=[*boxes, metro], crs=4326)
    parcels = fabric_for(areas)
    inside = parcels.geometry.representative_point().within(metro).to_numpy()
    rng = np.random.default_rng(rng_seed)
    flats = [
        parcels[inside].assign(group_id=synth.group_ids(int(inside.sum()), rng)) for _ in range(100)
    ]
    kept = pd.concat(
        [parcels[~inside & (rng.random(len(parcels)) < 0.05)], parcels[inside], *flats],
        ignore_index=True,
    )
    kept["parcel_id"] = kept["parcel_id"].iloc[0] + np.arange(len(kept))
    return areas, gpd.GeoDataFrame(kept, crs=parcels.crs)


def _own_client(svc: Any, name: str, tmp_path: Path) -> parcelsearch.Client:
    key = svc.keys.create(name, key_type="production", quota=100_000, per_second=1_000)
    return parcelsearch.Client(
        api_key=key,
        base_url=svc.base_url,
        ca_bundle=str(svc.ca_path),
        cache_dir=tmp_path / "cache",
        rate=200,
    )


@pytest.mark.slow
def test_a_price_that_rises_past_what_was_chosen_stops_and_asks_again(
    start_own_service, tmp_path: Path
) -> None:
    """The survey prices the metro case low; the user says yes to its interval's top; page
    1 of every piece shows the exact price above it: the run stops before spending past
    what was chosen and asks again with the new figures (the service's log the witness)."""
    areas, parcels = _metro_and_rural()
    svc = start_own_service(parcels=parcels)
    client = _own_client(svc, "metro", tmp_path)
    asked: list[tuple[parcelsearch.Price, int]] = []

    def confirm(price: parcelsearch.Price) -> bool:
        asked.append((price, len(svc.keys.requests("metro"))))
        return len(asked) == 1  # yes to the survey's price, no to anything after

    with pytest.raises(parcelsearch.PriceNotConfirmedError) as stopped:
        parcelsearch.search(areas, client=client, ask_above=5, confirm=confirm, progress=False)
    spent = len(svc.keys.requests("metro"))
    (first, _), (second, seen) = asked
    assert first.known == "surveyed" and first.high is not None
    assert second.known == "exact" and second.total > first.high
    assert seen == spent <= first.high  # nothing past the interval's top chosen
    assert "the price rose past what was chosen" in str(stopped.value)
    assert f"more than the {first.high:,} calls chosen" in str(stopped.value)
    result = parcelsearch.search(areas, client=client, confirm=True, progress=False)
    assert result.complete
    assert len(svc.keys.requests("metro")) == second.total  # the exact price held


def _interval(err: str) -> tuple[int, int, int, int]:
    """The surveyed price line's estimate, interval and spent."""
    line = next(line for line in err.splitlines() if line.startswith("price: about"))
    found = re.match(r"price: about ([\d,]+) calls, 95% interval ([\d,]+)–([\d,]+)", line)
    assert found is not None, line
    value, low, high = (int(x.replace(",", "")) for x in found.groups())
    spent = re.search(r"\nspent: ([\d,]+) calls? so far", err)
    assert spent is not None, err
    return value, low, high, int(spent[1].replace(",", ""))


@pytest.mark.slow
def test_the_command_line_spends_nothing_past_what_was_chosen(
    start_own_service, tmp_path: Path, capsys, monkeypatch
) -> None:
    """The issue's metro case on the command line, without a terminal and without --yes:
    an estimate under --ask-above whose interval's top is over it is asked (stopped, after
    the survey only); under an --ask-above over the top nothing is asked, and the exact
    price after page 1 of every piece, above it, stops the run before spending past it;
    on a terminal the same question is asked with the new figures. The log the witness."""
    areas, parcels = _metro_and_rural()
    svc = start_own_service(parcels=parcels)
    key = svc.keys.create("metro-cli", key_type="production", quota=100_000, per_second=1_000)
    for name, value in (("API_KEY", key), ("RATE", "200")):
        monkeypatch.setenv(f"PARCELSEARCH_{name}", value)
    argv = [
        *_search_argv(tmp_path, areas),
        "--base-url",
        svc.base_url,
        "--ca-bundle",
        str(svc.ca_path),
    ]

    def served_here() -> int:
        return len(svc.keys.requests("metro-cli"))

    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache1"))
    code, _, err = run([*argv, "--ask-above", "1000000"], capsys)  # the figures, to choose by
    value, low, high, spent = _interval(err)
    truth = served_here()
    assert code == 0 and truth > high  # the survey priced it low: its interval missed

    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache2"))
    code, _, err = run([*argv, "--ask-above", str(value - spent)], capsys)
    assert code == 3 and served_here() - truth == spent, err  # asked: the top is over it
    assert f"still to spend at the interval's top, more than the {value - spent:,}" in err

    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache3"))
    before = served_here()
    code, _, err = run([*argv, "--ask-above", str(high - spent)], capsys)
    assert code == 3, err
    assert served_here() - before <= high  # nothing past what was chosen (--ask-above)
    assert (
        f"the price rose past what was chosen: this search needs exactly {truth:,} calls "
        f"in all, more than the {high:,} calls chosen"
    ) in err

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or "y")
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache4"))
    before = served_here()
    code, _, err = run([*argv, "--ask-above", str(high - spent)], capsys)
    assert code == 0 and served_here() - before == truth, err
    assert asked == [
        f"spend exactly {truth:,} calls in all ({truth - 61:,} still to spend)? [y/N] "
    ]


@pytest.mark.slow
def test_price_then_search_asks_at_once_with_the_same_figures(
    start_own_service, tmp_path: Path
) -> None:
    """price() then search() of the same job: 0 calls between the price and the question,
    one total, and "spent" is this job's (a price of another set neither adds to it nor
    hides it). The service's log the witness."""
    areas, parcels = _metro_and_rural()
    svc = start_own_service(parcels=parcels)
    client = _own_client(svc, "metro-price", tmp_path)
    other = parcelsearch.price(areas.iloc[:35], client=client)
    assert other.spent > 0
    priced = parcelsearch.price(areas, client=client)
    assert priced.spent > 0 and priced.known == "surveyed"
    served = len(svc.keys.requests("metro-price"))
    assert served == other.spent + priced.spent
    with pytest.raises(parcelsearch.PriceNotConfirmedError) as stopped:
        parcelsearch.search(areas, client=client, ask_above=5, progress=False)
    assert len(svc.keys.requests("metro-price")) == served  # asked at once: 0 calls
    text = str(stopped.value)
    assert f"this search needs {priced.needs()}:" in text
    assert f"({priced.spent} calls spent on the survey" in text
    assert stopped.value.needed == priced.remaining
    asked: list[parcelsearch.Price] = []
    result = parcelsearch.search(
        areas,
        client=client,
        ask_above=5,
        progress=False,
        confirm=lambda price: asked.append(price) or True,
    )
    assert asked[0] == priced  # one price for the job, however often it is asked
    assert result.complete


def test_in_a_notebook_the_decision_is_a_short_card_not_a_stack(
    make_client, demo_areas, service, capsys
) -> None:
    """IPython (a notebook's kernel) shows the decision as a short card: the message, the
    price block with the figures asked about, the code to run next; no internal frames.
    Elsewhere the plain message."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    try:
        shell.user_ns.update(parcelsearch=parcelsearch, areas=demo_areas, client=make_client())
        shell.run_cell("parcelsearch.search(areas, client=client, ask_above=5, progress=False)")
        out = capsys.readouterr().out
        shell.run_cell("parcelsearch.price(areas, client=client)")
        priced = capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()
    lines = out.strip().splitlines()
    assert lines[0] == "PriceNotConfirmedError:", out
    assert "Traceback" not in out and "search_run" not in out and ".py" not in out
    assert any(line.startswith("  price: exactly ") for line in lines), out
    assert "  spent: 7 calls so far" in lines and "  exact: 10 for later pages page 1 told" in lines
    assert lines[lines.index("next:") + 1] == "  pass confirm=True to spend them"
    assert all(len(line) <= 100 for line in lines)
    shown = priced.splitlines()  # a price shows its block: "Out[…]: " and its lines
    assert shown[0].startswith("Out[") and shown[1] == "price: exactly 10 calls", priced
    assert shown[2] == "exact: 10 for later pages page 1 told"


def test_when_the_quota_cannot_hold_the_job_the_question_is_the_month_plan(
    make_client, demo_areas, service, monkeypatch
) -> None:
    """A 12-a-month key for a 17-call job, with allow_partial: the question names what can
    happen — this month's calls on whole areas, the rest after the quota resets — and the
    run spends exactly what it said (the service's log the witness); the command line asks
    the same on a terminal."""
    client = make_client(key_overrides={"quota": 12, "per_second": 50}, rate=40)
    asked: list[parcelsearch.Price] = []
    with pytest.warns(PartialResultWarning):
        result = parcelsearch.search(
            demo_areas,
            client=client,
            quota="12/month",
            ask_above=1,
            allow_partial=True,
            progress=False,
            confirm=lambda price: asked.append(price) or True,
        )
    (price,) = asked
    assert price.planned is not None and 0 < price.planned <= 12 - 7
    reset = f"{next_month_start(time.time()):%Y-%m-%d} 00:00 UTC"
    assert re.fullmatch(
        rf"this month: {price.planned} more calls? \(areas .+, complete\); the "
        rf"other {price.remaining - price.planned} after {reset}",
        price.plan,
    )
    now, later = price.plan.split("; ")
    assert price.block()[-2:] == [f"plan: {now}", f"then: {later}"]
    served = len(service.keys.requests(client.key_name))
    assert served == result.calls == 7 + price.planned  # the survey, then what it said
    assert not result.complete

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    questions: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: questions.append(q) or "n")
    stopped = PriceQuestion()(price)
    assert not stopped and questions == [f"{price.plan}: spend the {price.planned} now? [y/N] "]


def test_the_command_line_month_plan_spends_exactly_what_it_said(
    env, service, key, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or "y")
    argv = _search_argv(
        tmp_path,
        parcelsearch.demo_areas(),
        "--quota",
        "12/month",
        "--allow-partial",
        "--ask-above",
        "1",
    )
    code, _, err = run(argv, capsys)
    assert code == 3, err  # partial: the rest waits for the month's reset
    said = re.search(
        r"\nplan: this month: (\d+) more calls? \(areas .+, complete\)\nthen: the "
        r"other (\d+) after \d{4}-\d\d-01 00:00 UTC\n",
        err,
    )
    assert said is not None, err
    assert served(service, key) == 7 + int(said[1])  # the survey, then exactly the plan
    assert len(asked) == 1 and asked[0].startswith("this month: ")


def test_the_vendors_quota_refusal_says_what_the_job_still_needs_and_when(
    make_client, demo_areas, service
) -> None:
    """A key whose quota the run does not know (no quota=): the vendor refuses at its end;
    the error says what the search still needs and when a monthly quota resets."""
    client = make_client(key_overrides={"quota": 10, "per_second": 50}, rate=40)
    with pytest.raises(parcelsearch.QuotaExhaustedError) as refused:
        parcelsearch.search(demo_areas, client=client, progress=False)
    served = len(service.keys.requests(client.key_name))
    text = str(refused.value)
    still = re.search(
        r"This search still needs (?:exactly|at least) (\d+) calls? to finish "
        r"\((\d+) of (\d+) areas complete, everything fetched cached\)",
        text,
    )
    assert still is not None, text
    result = refused.value.result
    assert int(still[1]) == 17 - result.calls, text  # the demo job is 17 calls
    reset = f"{next_month_start(time.time()):%Y-%m-%d} 00:00 UTC"
    assert f"a monthly quota (a production key's) resets on {reset}" in text
    assert served >= result.calls
