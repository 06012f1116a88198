"""The survey as it stood before issues 56 and 61 (drawn in proportion to area), kept
callable so ``bench/price_estimate.py`` prints today's figures beside it. A frozen copy of
``parcelsearch.planning.survey`` at that time; not used by the package."""

# ruff: noqa
from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Estimate",
    "Sample",
    "estimate",
    "TARGET_HALF_WIDTH",
    "MAX_SHARE",
    "t_quantile",
    "sample",
    "capped",
    "curve_order",
    "cap_base",
    "wider_share",
]

#: The half-width the survey's rounds aim at, a fraction of the least the whole can cost
#: (so at most that fraction of the estimate).
TARGET_HALF_WIDTH = 0.10
#: The half-width (a fraction of the estimate) above which a capped survey says so.
USEFUL_HALF_WIDTH = 0.20
#: The survey's cost at most, as a fraction of a sure low bound of the whole (:func:`cap_base`),
#: unless the user chooses another share (``survey_share``, ``--survey-share``).
MAX_SHARE = 0.10
#: The widening of an interval learnt from earlier pieces nearby (:mod:`.density`) for
#: skewed costs (a few pieces with many pages).
SKEW_MARGIN = 1.5
#: The survey's interval's widening: none (bench/price_estimate.py: 833 of 840 intervals
#: held the truth without; a margin held a few more and left more of them over 20 %).
SURVEY_MARGIN = 1.0
#: The survey's cap is a tenth of the estimate less this many half-widths, when that is
#: more than the least the whole can cost (:func:`cap_base`).
CAP_HALF_WIDTHS = 1.5
#: The survey's variance is at least this share of the successive differences' (the
#: model-based :func:`design_variance` may say less, never below this).
SD_SHARE = 0.8
#: Surveyed neighbours that predict a piece's ratio in :func:`design_variance`.
NEIGHBOURS = 4
#: Populations and random starts :func:`design_variance` runs the design on.
POPULATIONS = 20
STARTS = 50
#: Of the first round, the share taken with certainty: the largest pieces.
CERTAIN_SHARE = 0.5
#: Pieces a further round surveys at least.
MIN_ROUND = 3
#: Below this many unknown pieces the survey is every piece (a census).
CENSUS_BELOW = 30

# Student's t, 97.5 % quantile, by degrees of freedom (then 1.96 beyond 120).
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


def t_quantile(df: float) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (conservative:
    the table's entry at or below ``df``)."""
    if df >= 1000:
        return 1.96
    below = [k for k in _T975 if k <= max(1.0, df)]
    return _T975[max(below)]


@dataclass(frozen=True)
class Estimate:
    """The cost of the unknown pieces: ``value`` calls, 95 % interval ``low``–``high``;
    ``surveyed`` of ``pieces`` pieces were surveyed (their cost exact)."""

    value: int
    low: int
    high: int
    surveyed: int
    pieces: int
    #: The calls the surveyed pieces cost (exactly).
    surveyed_calls: int = 0

    @property
    def half(self) -> float:
        """Half the interval, in calls."""
        return (self.high - self.low) / 2

    @property
    def half_width(self) -> float:
        """Half the interval, as a fraction of :attr:`value`."""
        return self.half / max(1, self.value)

    @property
    def least(self) -> int:
        """The least these pieces can cost: the surveyed calls and one call for every other
        piece."""
        return self.surveyed_calls + self.pieces - self.surveyed


def _hilbert(x: int, y: int) -> int:
    """The position of cell (``x``, ``y``) on a Hilbert curve through a 2^16 × 2^16 grid."""
    d, s, side = 0, 1 << 15, (1 << 16) - 1
    while s:
        rx, ry = int(x & s > 0), int(y & s > 0)
        d += s * s * ((3 * rx) ^ ry)
        if ry == 0:
            if rx == 1:
                x, y = side - x, side - y
            x, y = y, x
        s >>= 1
    return d


def curve_order(centres: Sequence[tuple[float, float]]) -> list[int]:
    """Each centre's position on a Hilbert curve through their bounding square (near
    centres, near positions)."""
    if not centres:
        return []
    xs, ys = [c[0] for c in centres], [c[1] for c in centres]
    x0, y0 = min(xs), min(ys)
    span = max(max(xs) - x0, max(ys) - y0)
    scale = ((1 << 16) - 1) / span if span > 0 else 0.0
    return [_hilbert(int((x - x0) * scale), int((y - y0) * scale)) for x, y in centres]


def _van_der_corput(k: int) -> float:
    """The ``k``-th point of the base-2 van der Corput sequence (0, ½, ¼, ¾, …)."""
    value, step = 0.0, 0.5
    while k:
        if k & 1:
            value += step
        k >>= 1
        step /= 2
    return value


class Sample:
    """The survey's sample of the unknown pieces: the largest ``certain`` pieces with
    certainty, the others drawn with probability proportional to their area along a
    Hilbert curve through their centres (see the module's text); each draw is a point
    ``(u + vdc(k)) mod 1`` of the line, ``u`` the seeded random start, so rounds extend
    one sample and a piece drawn twice is surveyed (and paid) once."""

    def __init__(
        self,
        areas: Sequence[float],
        centres: Sequence[tuple[float, float]],
        seed: int | str = 0,
        certain: int = 0,
    ) -> None:
        if len(centres) != len(areas):
            raise ValueError(f"{len(areas)} areas but {len(centres)} centres")
        by_size = sorted(range(len(areas)), key=lambda i: (-areas[i], i))
        self.areas = list(areas)
        self.centres = [(float(x), float(y)) for x, y in centres]
        self.certain = by_size[:certain]
        taken = set(self.certain)
        position = curve_order(centres)
        #: The other pieces in curve order, and each one's length on the line.
        self.line = sorted(
            (i for i in range(len(areas)) if i not in taken), key=lambda i: (position[i], i)
        )
        sizes = [max(0.0, self.areas[i]) for i in self.line]
        if sum(sizes) <= 0:
            sizes = [1.0] * len(sizes)
        self.sizes = sizes
        self.ends = list(itertools.accumulate(sizes))
        self.length = self.ends[-1] if self.ends else 0.0
        self.start = random.Random(seed).random()
        #: Each draw so far: its place in :attr:`line`.
        self.draws: list[int] = []
        self._drawn: set[int] = set()
        self._certain_taken = False

    @property
    def size(self) -> int:
        """How many pieces (surveyed or not)."""
        return len(self.areas)

    def _draw(self) -> int:
        point = (self.start + _van_der_corput(len(self.draws))) % 1.0 * self.length
        place = min(bisect.bisect_right(self.ends, point), len(self.line) - 1)
        while self.sizes[place] <= 0:  # a point on a piece's end: the next with a length
            place = (place + 1) % len(self.line)
        self.draws.append(place)
        return place

    def take(self, n: int) -> list[int]:
        """``n`` more pieces (indices): the certain ones first, then the next draws'
        pieces not surveyed yet; every piece left when ``n`` reaches them all (a census).
        Fewer when draws keep landing on pieces already surveyed (large ones): the
        estimate counts every draw."""
        chosen: list[int] = []
        if not self._certain_taken:
            chosen.extend(self.certain)
            n -= len(self.certain)
            self._certain_taken = True
        left = [place for place in range(len(self.line)) if place not in self._drawn]
        if n >= len(left):  # every piece: the census needs no draws
            self._drawn.update(left)
            return chosen + [self.line[place] for place in left]
        tries = 0
        while n > 0 and tries < 64 * len(self.line):
            tries += 1
            place = self._draw()
            if place not in self._drawn:
                self._drawn.add(place)
                chosen.append(self.line[place])
                n -= 1
        return chosen


def sample(
    areas: Sequence[float],
    centres: Sequence[tuple[float, float]],
    seed: int | str = 0,
    share: float = MAX_SHARE,
) -> Sample:
    """The survey's sample of the pieces whose ``areas`` (m²) and ``centres`` (any planar
    coordinates, e.g. longitude and latitude) are given: its take-all part
    :data:`CERTAIN_SHARE` of the first round (see :class:`Sample`, :func:`pilot_size`; at
    least one draw is left to the line)."""
    first = pilot_size(len(areas), share)
    certain = math.ceil(CERTAIN_SHARE * first)
    if first < len(areas):
        certain = min(certain, first - 1)
    return Sample(areas, centres, seed, certain=certain)


def _beyond_first(cost: int, rows: int | None, page_size: int) -> float:
    """A surveyed piece's calls beyond the first as the draws' variable: from its rows,
    ``max(0, rows / page_size − ½)`` (the pages' rounding left out: it is half a call a
    piece on average and no part of the density the draws estimate), else ``cost − 1``."""
    if rows is None:
        return float(cost - 1)
    return max(0.0, rows / max(1, page_size) - 0.5)


def estimate(
    drawn: Sample,
    costs: dict[int, int],
    rows: dict[int, int | None] | None = None,
    page_size: int = 100,
) -> Estimate:
    """The cost of every piece in ``drawn`` from the surveyed ``costs`` (index → calls) and,
    where page 1 told them, their ``rows`` (index → rows) at ``page_size`` rows a page.

    The certain pieces count as surveyed; a census is exact. Elsewhere a piece costs one
    call, and the calls beyond the first of the pieces on the line are ``L/n Σ z_k``,
    ``z_k = w/x`` of the ``k``-th draw's piece (``x`` its length, ``L`` the line's, ``w``
    its calls beyond the first from its rows without the pages' rounding,
    :func:`_beyond_first`), plus each surveyed piece's rounding exactly (its calls beyond
    the first less ``w``). The variance is the larger of :func:`design_variance` (the
    design run again on populations made from the sample) and :data:`SD_SHARE` of
    ``L² Σ (z_(k) − z_(k−1))² / (2 n (n − 1))`` over the draws in curve order (the
    successive differences; that alone with :data:`NEIGHBOURS` or fewer pieces
    surveyed on the line), plus the rounding of the
    ``M`` pieces on the line not surveyed (1/12 of a call² each, the variance of a uniform
    fraction), at least ``½ M²/n²`` (an interval is never falsely exact), and Student's t
    on ``n − 1`` degrees of freedom. bench/price_estimate.py measures the rows side by
    side with the pages alone.
    """
    surveyed = sum(costs.values())
    floor = surveyed + drawn.size - len(costs)  # one call at least for each other piece
    if len(costs) >= drawn.size:  # a census: exact
        return Estimate(
            value=floor,
            low=floor,
            high=floor,
            surveyed=len(costs),
            pieces=drawn.size,
            surveyed_calls=surveyed,
        )
    if not drawn.draws:
        raise ValueError("no piece drawn yet: take() a round before estimating")
    told = rows or {}
    n, pieces = len(drawn.draws), len(drawn.line)
    smooth = {
        p: _beyond_first(costs[drawn.line[p]], told.get(drawn.line[p]), page_size)
        for p in set(drawn.draws)
    }
    ratio_of = {p: smooth[p] / drawn.sizes[p] for p in smooth}
    ratios = [ratio_of[p] for p in sorted(drawn.draws)]
    rounding = sum(costs[drawn.line[p]] - 1 - smooth[p] for p in smooth)
    value = (
        sum(costs[i] for i in drawn.certain) + pieces + rounding + drawn.length * sum(ratios) / n
    )
    steps = sum((b - a) ** 2 for a, b in itertools.pairwise(ratios))
    variance = drawn.length**2 * steps / (2 * n * (n - 1)) if n > 1 else 0.0
    if len(smooth) > NEIGHBOURS:
        variance = max(SD_SHARE * variance, design_variance(drawn, ratio_of, n))
    if any(told.get(drawn.line[p]) is not None for p in smooth):
        variance += (pieces - len(smooth)) / 12
    variance = max(variance, 0.5 * pieces**2 / n**2)
    half = SURVEY_MARGIN * t_quantile(n - 1) * math.sqrt(variance)
    point = max(float(floor), value)
    return Estimate(
        value=round(point),
        low=max(floor, math.floor(point - half)),
        high=max(floor, math.ceil(point + half)),
        surveyed=len(costs),
        pieces=drawn.size,
        surveyed_calls=surveyed,
    )


def _pseudo_population(drawn: Sample, known: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """Every piece on the line's ratio as the surveyed pieces predict it (the inverse-distance
    mean of the :data:`NEIGHBOURS` nearest surveyed centres; a surveyed piece's own from the
    others), and the surveyed pieces' residuals against those predictions."""
    centres = np.asarray([drawn.centres[i] for i in drawn.line], dtype=float)
    places = sorted(known)
    ratios = np.asarray([known[p] for p in places])
    gaps = np.hypot(
        centres[:, None, 0] - centres[None, places, 0],
        centres[:, None, 1] - centres[None, places, 1],
    )
    gaps[places, range(len(places))] = np.inf  # a surveyed piece is predicted by the others
    nearest = np.argsort(gaps, axis=1)[:, :NEIGHBOURS]
    weights = 1.0 / np.maximum(np.take_along_axis(gaps, nearest, axis=1), 1e-12) ** 2
    predicted = (weights * ratios[nearest]).sum(axis=1) / weights.sum(axis=1)
    return predicted, ratios - predicted[places]


def design_variance(drawn: Sample, known: dict[int, float], n: int) -> float:
    """The variance of the survey's estimate of the line's calls beyond the first, by
    running its own design again on populations made like this one (a model-based
    bootstrap): each piece's ratio (calls beyond the first per unit of length) is what the
    surveyed pieces near it predict plus a residual drawn from the surveyed pieces' own
    (:func:`_pseudo_population`), the surveyed pieces keep theirs, and ``n`` draws from
    each of :data:`STARTS` random starts along the curve give the estimate's spread; the
    mean over :data:`POPULATIONS` such populations. ``known``: the surveyed pieces' ratios
    by their place on the line. Seeded by the sample: the same survey, the same variance.

    Where neighbours share density the systematic draw is more precise than successive
    differences say; this measures it (bench/price_estimate.py, 21 sets × 100 surveys:
    with :data:`SD_SHARE`, half-widths over 20 % of the estimate 89 → 47, the truth held in
    2,086 of 2,100 against 2,089)."""
    predicted, residuals = _pseudo_population(drawn, known)
    rng = np.random.default_rng([int(drawn.start * 2**32), n, len(known)])
    ends, length = np.asarray(drawn.ends), drawn.length
    steps = np.asarray([_van_der_corput(k) for k in range(n)])
    places = list(known)
    spreads = []
    for _ in range(POPULATIONS):
        population = np.maximum(0.0, predicted + rng.choice(residuals, size=len(predicted)))
        population[places] = [known[p] for p in places]
        points = (rng.random(STARTS)[:, None] + steps[None, :]) % 1.0 * length
        drawn_places = np.minimum(np.searchsorted(ends, points, side="right"), len(ends) - 1)
        spreads.append(float((length * population[drawn_places].mean(axis=1)).var(ddof=1)))
    return float(np.mean(spreads))


def pilot_size(pieces: int, share: float = MAX_SHARE) -> int:
    """The survey's first round: every piece below :data:`CENSUS_BELOW`, else 7 % of the
    pieces, at least 12 but never more than ``share`` of them (every piece costs a call at
    least, so the pilot is within that share of the whole), and one piece at least."""
    if pieces < CENSUS_BELOW:
        return pieces
    return max(1, min(math.floor(share * pieces), max(math.ceil(0.07 * pieces), 12)))


def capped(current: Estimate, known: int, share: float = MAX_SHARE) -> bool:
    """Whether the survey stopped at its cap (``share`` of :func:`cap_base`) with the
    interval's half-width still above :data:`USEFUL_HALF_WIDTH` of the whole (``known``: as
    for :func:`next_round`)."""
    return (
        current.surveyed < current.pieces
        and current.half > USEFUL_HALF_WIDTH * (current.value + known)
        and next_round(current, known, share) == 0
    )


def wider_share(current: Estimate, known: int, share: float = MAX_SHARE) -> float | None:
    """The survey share (of :func:`cap_base`, in hundredths) that would have brought a
    capped survey's half-width to :data:`USEFUL_HALF_WIDTH` of the whole (the half-width
    shrinks as 1/√n, with the rounds' 10 % to spare), at most 1; ``None`` when the survey
    was not capped (:func:`capped`) or ``share`` is 1 already."""
    if not capped(current, known, share) or share >= 1:
        return None
    n = current.surveyed
    wanted = n * (current.half / (USEFUL_HALF_WIDTH * (current.value + known))) ** 2 * 1.1
    needed = math.ceil(100 * wanted / cap_base(current, known)) / 100
    return min(1.0, max(needed, round(share + 0.01, 2)))


def cap_base(current: Estimate, known: int) -> float:
    """What the survey's cap is a tenth of: the least the whole can cost (the surveyed
    costs and one call for every other piece, with ``known`` calls known without a
    survey), or, once the interval says more, the estimate less 1.5 half-widths (at least
    2.9 standard errors below it: a one-sided 99.8 % bound, so a tenth of it is a tenth of
    the true total but for one survey in 500, and then only when it spends its whole cap)."""
    return max(float(current.least + known), current.value + known - CAP_HALF_WIDTHS * current.half)


def next_round(current: Estimate, known: int, share: float = MAX_SHARE) -> int:
    """How many more pieces to survey after ``current`` (0: enough), given ``known`` calls
    of the whole run known without a survey: as many as bring the half-width to
    :data:`TARGET_HALF_WIDTH` of the least the whole can cost (the surveyed costs and one
    call for every other piece; the half-width shrinks as 1/√n), within ``share`` (by
    default :data:`MAX_SHARE`) of :func:`cap_base`, so never more than that share of the
    true total (but for one survey in 500, see there).

    The target is held to the least, not to the estimate: a rule that stops once the
    half-width is small against the estimate stops sooner on the surveys that overestimate,
    and those intervals then miss the truth more often than 1 in 20 (measured on the dense
    sets of bench/price_estimate.py: 92–93 of 100 held; held to the least, 96–100 of 100)."""
    n, big_n, half = current.surveyed, current.pieces, current.half
    least = current.least + known
    if n >= big_n or half <= TARGET_HALF_WIDTH * least:
        return 0
    cap = max(0, math.floor(share * cap_base(current, known)) - n)
    if cap == 0:
        return 0
    wanted = math.ceil(n * (half / (TARGET_HALF_WIDTH * least)) ** 2 * 1.1) - n
    return max(0, min(cap, big_n - n, max(wanted, MIN_ROUND)))
