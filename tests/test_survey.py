"""The survey (issue 49): page 1 of a stratified sample, the largest pieces with certainty,
and the whole price with a 95 % interval that holds the truth (bench/price_estimate.py
measures it over real area sets; here, populations whose totals are known)."""

from __future__ import annotations

import random

from parcelsearch._run import survey


def _survey(areas: list[float], costs: list[int], seed: str) -> tuple[survey.Estimate, int]:
    strata = survey.stratify(areas, seed)
    known: dict[int, int] = {}
    step = survey.pilot_size(len(areas))
    while step:
        chosen = strata.take(step)
        if not chosen:
            break
        assert not set(chosen) & set(known)  # rounds extend one sample, never repeat
        known.update({i: costs[i] for i in chosen})
        current = survey.estimate(strata, known)
        step = survey.next_round(current, 0)
    return current, len(known)


def _population(n: int, seed: int) -> tuple[list[float], list[int]]:
    rng = random.Random(seed)
    areas = [rng.lognormvariate(11, 1.0) for _ in range(n)]
    density = [rng.uniform(0.2, 1.8) for _ in range(n)]
    costs = [max(1, -(-int(a * d / 1_500) // 100)) for a, d in zip(areas, density, strict=True)]
    return areas, costs


def test_few_pieces_are_all_read_and_the_price_is_exact() -> None:
    areas, costs = _population(20, 1)
    estimate, spent = _survey(areas, costs, "s")
    assert spent == 20 and estimate.value == estimate.low == estimate.high == sum(costs)


def test_the_largest_pieces_are_surveyed_with_certainty() -> None:
    areas, _ = _population(200, 2)
    strata = survey.stratify(areas, "s")
    first = strata.take(survey.pilot_size(200))
    largest = sorted(range(200), key=lambda i: -areas[i])[:len(strata.certain)]
    assert strata.certain and set(largest) <= set(first)
    assert len(first) == survey.pilot_size(200) <= 0.1 * 200


def test_the_same_seed_surveys_the_same_pieces() -> None:
    areas, _ = _population(150, 3)
    assert survey.stratify(areas, "a").take(12) == survey.stratify(areas, "a").take(12)
    assert survey.stratify(areas, "a").take(12) != survey.stratify(areas, "b").take(12)


def test_the_interval_holds_the_true_total_and_the_survey_stays_a_tenth() -> None:
    held = trials = 0
    for population in range(40):
        areas, costs = _population(200, 100 + population)
        total = sum(costs)
        for trial in range(10):
            estimate, spent = _survey(areas, costs, f"{population}-{trial}")
            trials += 1
            held += estimate.low <= total <= estimate.high
            assert spent <= 0.1 * total + survey.MIN_PER_STRATUM
            assert estimate.low >= spent  # never below what is known for sure
    assert held >= 0.95 * trials, f"{held} of {trials}"


def test_an_interval_is_never_falsely_exact() -> None:
    """Every surveyed piece costing one call does not make the others certain."""
    areas = [float(a) for a in range(1, 101)]
    estimate, spent = _survey(areas, [1] * 100, "s")
    assert estimate.value == 100 and estimate.high > 100 and estimate.low == 100
