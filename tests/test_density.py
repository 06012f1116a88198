"""The price learnt from earlier pieces nearby (:mod:`parcelsearch._run.density`): a local
ratio of calls to area, its interval from the earlier pieces' own leave-one-out errors,
and only the pieces the earlier ones surround."""

from __future__ import annotations

import math

import numpy as np
import shapely

from parcelsearch._run.density import LEAST, area_m2, learn

CELL = 0.002  # degrees: blocks of about 180 m × 220 m


def _cells(rows: int, cols: int, x0: float = -122.45, y0: float = 37.75) -> list[shapely.Polygon]:
    return [
        shapely.box(x0 + i * CELL, y0 + j * CELL, x0 + (i + 1) * CELL, y0 + (j + 1) * CELL)
        for j in range(rows)
        for i in range(cols)
    ]


def _calls(polygon: shapely.Polygon, density: float, rng: np.random.Generator) -> int:
    """A piece's calls under ``density`` parcels a m², rows drawn about their mean."""
    rows = rng.poisson(density * area_m2(polygon))
    return max(1, math.ceil(rows / 100))


def test_interleaved_pieces_are_learnt_with_an_interval_holding_the_truth() -> None:
    rng = np.random.default_rng(4)
    cells = _cells(12, 12)
    # Density rising from west to east: neighbouring pieces share it.
    density = [0.002 + 0.02 * (c.centroid.x + 122.45) / (12 * CELL) for c in cells]
    calls = [_calls(c, d, rng) for c, d in zip(cells, density, strict=True)]
    earlier = [(c, k) for n, (c, k) in enumerate(zip(cells, calls, strict=True)) if n % 2 == 0]
    unknown = [c for n, c in enumerate(cells) if n % 2 == 1]
    truth = sum(k for n, k in enumerate(calls) if n % 2 == 1)
    learnt = learn(unknown, earlier)
    assert learnt is not None and learnt.members == tuple(range(len(unknown)))
    assert learnt.pieces == len(unknown) and learnt.earlier == len(earlier)
    assert learnt.low <= truth <= learnt.high, (learnt, truth)
    assert learnt.low < learnt.value < learnt.high  # never falsely exact
    assert learnt.low >= len(unknown)  # one call a piece at least


def test_pieces_far_from_every_earlier_one_are_left_to_the_survey() -> None:
    rng = np.random.default_rng(5)
    cells = _cells(6, 6)
    earlier = [(c, _calls(c, 0.01, rng)) for c in cells]
    inside = shapely.box(
        -122.45 + 2.5 * CELL, 37.75 + 2.5 * CELL, -122.45 + 3.5 * CELL, 37.75 + 3.5 * CELL
    )
    far = shapely.affinity.translate(inside, xoff=1.0)  # a degree east: 90 km off
    learnt = learn([far, inside], earlier)
    assert learnt is not None and learnt.members == (1,)  # only the surrounded one
    assert learn([far], earlier) is None


def test_too_few_earlier_pieces_teach_nothing() -> None:
    cells = _cells(4, 5)[: LEAST - 1]
    assert learn(_cells(1, 1), [(c, 3) for c in cells]) is None
    assert learn([], [(c, 3) for c in _cells(6, 6)]) is None


def _noisy_gradient(noise: float) -> list[tuple[shapely.Polygon, int]]:
    """Earlier pieces whose calls rise eastwards, with ``noise`` calls of spread about it."""
    rng = np.random.default_rng(8)
    return [
        (c, max(1, round(2 + n % 8 + rng.normal(0, noise)))) for n, c in enumerate(_cells(8, 8))
    ]


def test_the_interval_widens_where_the_earlier_pieces_disagree() -> None:
    cells = _cells(8, 8)
    even = [(c, 3) for c in cells]
    unknown = _cells(2, 2, x0=-122.45 + 3 * CELL, y0=37.75 + 3 * CELL)
    calm, wild = learn(unknown, even), learn(unknown, _noisy_gradient(3.0))
    assert calm is not None and wild is not None
    assert calm.value == 4 * 3  # the same ratio everywhere: exactly its calls
    assert wild.high - wild.low > 3 * (calm.high - calm.low)


def test_earlier_pieces_that_do_not_predict_are_no_evidence() -> None:
    """Issue 56: earlier pieces are evidence only where they predict. Calls that jump
    between neighbours (1, 1, 12, 1, 1, 12 …) are predicted worse by the neighbours than
    by the earlier pieces' mean: nothing is learnt, the pieces are surveyed."""
    unknown = _cells(2, 2, x0=-122.45 + 3 * CELL, y0=37.75 + 3 * CELL)
    assert learn(unknown, [(c, 1 if n % 3 else 12) for n, c in enumerate(_cells(8, 8))]) is None
    assert learn(unknown, _noisy_gradient(1.0)) is not None


def test_a_survey_of_the_others_and_the_learnt_part_add_up() -> None:
    from parcelsearch._run.surveying import _with_learnt
    from parcelsearch.planning.survey import Estimate

    learnt = learn(_cells(2, 2, x0=-122.45 + 3 * CELL, y0=37.75 + 3 * CELL), _noisy_gradient(2.0))
    assert learnt is not None
    census = _with_learnt(Estimate(value=9, low=9, high=9, surveyed=3, pieces=3), learnt)
    assert census.value == 9 + learnt.value and census.pieces == 3 + learnt.pieces
    assert (census.low, census.high) == (9 + learnt.low, 9 + learnt.high)  # the census exact
    sampled = _with_learnt(Estimate(value=100, low=70, high=140, surveyed=10, pieces=60), learnt)
    below, above = 100 + learnt.value - sampled.low, sampled.high - 100 - learnt.value
    assert below == math.ceil(math.hypot(30, learnt.value - learnt.low))  # in quadrature
    assert above == math.ceil(math.hypot(40, learnt.high - learnt.value))
    assert sampled.low >= 60 + learnt.pieces  # one call a piece at least
