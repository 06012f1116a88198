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
            assert spent <= 0.1 * total  # a tenth of the least possible, so of the truth
            assert estimate.low >= spent  # never below what is known for sure
    assert held >= 0.95 * trials, f"{held} of {trials}"


def test_an_interval_is_never_falsely_exact() -> None:
    """Every surveyed piece costing one call does not make the others certain."""
    areas = [float(a) for a in range(1, 101)]
    estimate, spent = _survey(areas, [1] * 100, "s")
    assert estimate.value == 100 and estimate.high > 100 and estimate.low == 100


def test_the_survey_never_passes_a_tenth_of_the_least_the_whole_can_cost() -> None:
    assert all(survey.pilot_size(n) <= 0.1 * n for n in range(survey.CENSUS_BELOW, 2000))
    # Every piece one call but for a few very large ones: the estimate's low end would allow
    # a bigger survey, the least the whole can cost does not.
    areas = [1.0] * 95 + [1e6] * 5
    costs = [1] * 95 + [40] * 5
    for trial in range(20):
        _, spent = _survey(areas, costs, f"t{trial}")
        assert spent <= 0.1 * sum(costs)


def test_a_survey_stopped_at_its_cap_with_a_wide_interval_says_so() -> None:
    from parcelsearch._run.pricing import surveyed

    rng = random.Random(7)
    areas = [rng.lognormvariate(11, 1.0) for _ in range(300)]
    costs = [1 if rng.random() < 0.9 else rng.randint(20, 60) for _ in range(300)]  # patchy
    estimate, spent = _survey(areas, costs, "p")
    assert survey.capped(estimate, 0) and estimate.half_width > 0.2
    price = surveyed(spent=spent, first=300 - spent, exact_later=0, history_later=0,
                     estimated=estimate.value - 300, low=estimate.low - 300,
                     high=estimate.high - 300, surveyed_pieces=spent, unknown=300)
    import dataclasses

    line = dataclasses.replace(price, capped=True).line()
    assert "the survey stopped at its cap, a tenth of the least the search can cost" in line
    assert "stopped at its cap" not in price.line()
    narrow, _ = _survey([1.0] * 1000, [2] * 1000, "n")  # even density: narrow, not said
    assert not survey.capped(narrow, 0)
