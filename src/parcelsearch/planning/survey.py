"""The survey: page 1 of a spatially balanced sample of the pieces, drawn by the size
measure the pilot's pieces show predicts their calls best, and the whole price estimated
from it with a 95 % interval.

A piece costs ``max(1, pages)`` calls, and page 1 tells ``pages``: surveying ``n`` of the
``N`` pieces whose count is unknown gives exact costs for those ``n``. Calls need not follow
area: census tracts hold equal numbers of people whatever their size, and a state's few
small metro counties hold most of its parcels. So the draw knows three size measures of a
piece — its area, the people of the places inside it (the bundled population layer,
:mod:`parcelsearch.planning.population`, with a floor for pieces no place lies in) and
equal chances — and lets the data choose:

- the heaviest pieces (by their share of the area and of the people together) are surveyed
  with certainty (a take-all part: the few pieces that could hold most of the pages are
  never left to chance);
- the others are ordered along a Hilbert curve through their centres; a design lays them
  end to end, each as long as its chance, and draws points on that line at a random start
  and the van der Corput sequence's steps, so every round's prefix is spread evenly over
  the space and the sizes (:class:`Sample`);
- the pilot draws with every measure mixed (each piece's chance the mean of its shares of
  area, people and count), so small pieces have their chance; its surveyed pieces then
  estimate what each measure's own design would give (:meth:`Sample.choose`) and later
  rounds draw by the best, a share :data:`DEFENSIVE` of equal chances mixed in (a
  defensive mixture: every piece keeps a chance and no draw's weight passes four times the
  pieces', so the interval holds when the measure is wrong where the weight sits).

The calls beyond the first are estimated by importance weights over the designs mixed as
drawn (the balance heuristic: each draw over its chance in the mixture, unbiased whatever
the pilot chose), model-assisted (a regression on a constant and, once drawn by, the chosen
measure: the interval is as wide as what the measure leaves unexplained,
:func:`_model_assisted`), with the variance of independent draws from that mixture, or from
:data:`SUCCESSIVE_FROM` draws on by successive differences along the curve (neighbours
sharing density, :func:`_mean_variance`), times ``1 − π_min`` for pieces drawn without
replacement (:func:`_without_replacement`), and Student's t on the distinct surveyed pieces
less one; never
below what is known for sure (the surveyed costs and one call for every piece not
surveyed). :attr:`Estimate.measure` names the measure chosen. ``bench/price_estimate.py``
measures it on real boundaries with their real populations as the parcel density.

The survey grows in rounds (:func:`next_round`): a pilot, then as many more pieces as
the pilot says bring the interval's half-width to :data:`TARGET_HALF_WIDTH` of the least
the whole can cost (the surveyed costs and one call for every other piece; not of the
estimate, see :func:`next_round`), never more than :data:`MAX_SHARE` of a low bound of the
whole (:func:`cap_base`: that least and, after the pilot, a quarter of the way from it to
the interval's low end).
When that cap stops it with the half-width above :data:`USEFUL_HALF_WIDTH`
(:func:`capped`), the price line says so: the interval is what it is. Surveyed pages are
the search's own page 1s (cached and used): a survey is never waste.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from parcelsearch.settings import DEFAULT_SURVEY_SHARE

__all__ = [
    "Estimate",
    "Sample",
    "estimate",
    "TARGET_HALF_WIDTH",
    "MAX_SHARE",
    "MEASURES",
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
#: The survey's cost at most, as a fraction of a low bound of the whole (:func:`cap_base`),
#: unless the user chooses another share (``survey_share``, ``--survey-share``).
MAX_SHARE = DEFAULT_SURVEY_SHARE
#: How far the survey's cap's base goes from the least the whole can cost towards the low
#: end of the interval, after the pilot (:func:`cap_base`; bench/price_estimate.py: at ½ a
#: survey spent 11.2 % of the truth on a synthetic set, at ¼ at most 9.8 %, on the real-count
#: sets 8.3 %).
LOW_END_SHARE = 0.25
#: The widening of an interval learnt from earlier pieces nearby (:mod:`.density`) for
#: skewed costs (a few pieces with many pages).
SKEW_MARGIN = 1.5
#: The survey's interval's widening: a few draws' spread is as often below the truth's as
#: above it, and most where the calls sit in a few pieces (bench/price_estimate.py: without
#: it 36 and 37 of 40 intervals held on two sets of islands under varying density; with it
#: 38–40 on every set).
SURVEY_MARGIN = 1.2
#: From this many draws on, the variance is by successive differences along the curve
#: (:func:`_mean_variance`; bench/price_estimate.py: from 10 on no narrower, and four
#: synthetic sets fell to 38 of 40).
SUCCESSIVE_FROM = 20
#: Johnson's skewness correction, in its own units (:func:`_skew_shift`).
SKEW_SHIFTS = 1.0
#: The size measures a survey may draw by, in the order a tie is settled.
MEASURES = ("population", "area", "equal")
#: Each measure in a few words, for the price ("drawn by …").
MEASURE_TEXT = {
    "population": "by the people living in each piece",
    "area": "by each piece's area",
    "equal": "with equal chances",
}
#: The share of equal chances in the pilot's design (the rest: the size measures alike).
PILOT_EQUAL = 1 / 3
#: The share of equal chances in a design by a size measure (a defensive mixture).
DEFENSIVE = 0.25
#: A piece's people at least this share of the pieces' mean (no place lies in a rural
#: tract; it still has parcels).
POPULATION_FLOOR = 0.1
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
    #: The size measure the survey drew by after its pilot (one of :data:`MEASURES`;
    #: empty when no draw priced it: a census, or learnt from earlier pieces).
    measure: str = ""

    @property
    def measure_text(self) -> str:
        """The measure in a few words: ``"drawn by the people living in each piece"``
        (empty when :attr:`measure` is)."""
        return f"drawn {MEASURE_TEXT[self.measure]}" if self.measure in MEASURE_TEXT else ""

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
    """The survey's sample of the unknown pieces: the heaviest ``certain`` pieces with
    certainty (by their share of the area and of the people, :mod:`.population`, together),
    the others drawn along a Hilbert curve through their centres with the chances of a
    design (see the module's text): first the pilot's, every size measure and equal chances
    mixed; then, once :meth:`choose` has read the pilot, the measure whose design would
    have estimated the pilot's pieces best, with a share :data:`DEFENSIVE` of equal chances.
    Each design's draws are points ``(u + vdc(k)) mod 1`` of its own line (``u`` a seeded
    random start), so rounds extend one sample and a piece drawn twice is surveyed (and
    paid) once."""

    def __init__(
        self,
        areas: Sequence[float],
        centres: Sequence[tuple[float, float]],
        seed: int | str = 0,
        certain: int = 0,
        populations: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        if len(centres) != len(areas):
            raise ValueError(f"{len(areas)} areas but {len(centres)} centres")
        if populations is not None and len(populations) != len(areas):
            raise ValueError(f"{len(areas)} areas but {len(populations)} populations")
        self.areas = list(areas)
        self.centres = [(float(x), float(y)) for x, y in centres]
        sizes = _sizes(areas, populations)
        self._sizes = sizes
        heft = np.max(
            [x / x.sum() for m, x in sizes.items() if m != "equal" and x.sum() > 0]
            or [sizes["equal"]],
            axis=0,
        )
        by_size = sorted(range(len(areas)), key=lambda i: (-heft[i], i))
        self.certain = by_size[:certain]
        taken = set(self.certain)
        position = curve_order(centres)
        #: The other pieces in curve order.
        self.line = sorted(
            (i for i in range(len(areas)) if i not in taken), key=lambda i: (position[i], i)
        )
        on_line = np.asarray(self.line, dtype=int)
        #: Each size measure's shares of the line (the measures with any size there).
        self.shares = {
            m: x[on_line] / x[on_line].sum()
            for m, x in sizes.items()
            if len(on_line) and x[on_line].sum() > 0
        }
        #: The measure :meth:`choose` chose (``None`` before).
        self.measure: str | None = None
        self._random = random.Random(seed)
        #: Each design's chances on the line, and how many of the draws kept each one made.
        self.designs: list[np.ndarray] = []
        self._ends: list[np.ndarray] = []
        self._starts: list[float] = []
        self._steps: list[int] = []
        self.counts: list[int] = []
        if len(on_line):
            self._use(self._pilot_design())
        #: Each draw kept: its place in :attr:`line`, and its design.
        self.draws: list[int] = []
        self._design_of: list[int] = []
        #: The places that left the line for certainty (:meth:`_heavy`).
        self.removed: set[int] = set()
        self._drawn: set[int] = set()
        self._given: set[int] = set()
        self._heavy_done = False

    @property
    def size(self) -> int:
        """How many pieces (surveyed or not)."""
        return len(self.areas)

    def _use(self, chances: np.ndarray) -> None:
        self.designs.append(chances)
        ends = np.cumsum(chances)
        self._ends.append(ends / ends[-1])
        self._starts.append(self._random.random())
        self._steps.append(0)
        self.counts.append(0)

    def _pilot_design(self) -> np.ndarray:
        """The pilot's chances: :data:`PILOT_EQUAL` of them equal, the rest the size
        measures' shares, mixed alike."""
        sized = [x for m, x in self.shares.items() if m != "equal"]
        equal = self.shares["equal"]
        if not sized:
            return np.asarray(equal)
        return np.asarray(PILOT_EQUAL * equal + (1 - PILOT_EQUAL) * np.mean(sized, axis=0))

    @property
    def on_line(self) -> int:
        """How many pieces are left to the draws (not surveyed with certainty)."""
        return len(self.line) - len(self.removed)

    def _draw(self) -> int:
        design = len(self.designs) - 1
        point = (self._starts[design] + _van_der_corput(self._steps[design])) % 1.0
        place = min(
            int(np.searchsorted(self._ends[design], point, side="right")), len(self.line) - 1
        )
        while place in self.removed:  # a point at the very end of the line
            place -= 1
        self._steps[design] += 1
        self.counts[design] += 1
        self.draws.append(place)
        self._design_of.append(design)
        return place

    def mixture(self) -> np.ndarray:
        """The chance of each place on the line in one draw of the designs mixed as drawn
        (each design weighed by its draws): every draw's weight in :func:`estimate`."""
        total = sum(self.counts)
        return np.asarray(
            sum(c * d for c, d in zip(self.counts, self.designs, strict=True)) / max(1, total)
        )

    def design_of(self, measure: str) -> np.ndarray:
        """The chances of a design by ``measure`` (one of :attr:`shares`), a share
        :data:`DEFENSIVE` of them equal: every piece keeps a chance, and no draw weighs more
        than ``1 / DEFENSIVE`` times the pieces'."""
        chances = (1 - DEFENSIVE) * self.shares[measure] + DEFENSIVE / len(self.line)
        return np.asarray(chances / chances.sum())

    def choose(
        self, smooth: dict[int, float], certain: dict[int, float] | None = None
    ) -> str | None:
        """The size measure for the draws after the pilot, from the pilot's surveyed pieces
        (``smooth``: place on the line → calls beyond the first; ``certain``: the same of
        the pieces taken with certainty, by index): the one whose design over all the
        pieces would have the least variance, ``Σ y²/q − Y²``, as the surveyed pieces
        estimate it (the certain ones as they are, the drawn ones by their importance
        weights) — the measure that predicted the surveyed pieces' calls best, the heavy
        ones above all. Chosen once; later rounds draw by it."""
        if self.measure is not None or not self.draws:
            return self.measure
        known = certain or {}
        mixed = self.mixture()
        pieces = np.asarray([self.line[p] for p in self.draws])
        weights = 1.0 / (len(self.draws) * mixed[np.asarray(self.draws)])
        y = np.asarray([smooth[p] for p in self.draws])
        sure = np.asarray([known.get(i, 0.0) for i in self.certain])
        total = float((weights * y).sum() + sure.sum())
        spread = {}
        for measure, chances in self._everywhere().items():
            second = float(
                (weights * y * y / chances[pieces]).sum()
                + (sure * sure / chances[np.asarray(self.certain, dtype=int)]).sum()
            )
            spread[measure] = second - total * total
        self.measure = min(spread, key=lambda m: (spread[m], MEASURES.index(m)))
        self._use(self.design_of(self.measure))
        return self.measure

    def _everywhere(self) -> dict[str, np.ndarray]:
        """Each measure's design over every piece (certain ones too), as :meth:`design_of`
        lays it on the line."""
        count = len(self.areas)
        return {
            m: (1 - DEFENSIVE) * x / x.sum() + DEFENSIVE / count
            for m, x in self._sizes.items()
            if m in self.shares
        }

    def _heavy(self, n: int) -> None:
        """Once, after the choice: the pieces the chosen design would draw once or more in
        the draws so far and ``n`` more (chance × draws ≥ 1; ``n − 1`` of them at most,
        whether surveyed yet or not) leave the line and are surveyed with certainty. The draws that
        landed on them are dropped and every design is renormalised over the pieces left:
        the draws kept are draws from those (the estimate stays unbiased), and no later
        draw is spent on a piece that needs none."""
        if self.measure is None or self._heavy_done or not self.designs:
            return
        self._heavy_done = True
        chances = self.designs[-1]
        planned = len(self.draws) + n
        # Which pieces leave depends on the design and the counts only, never on which
        # pieces were drawn (the draws kept would then be no draws of the design left).
        heavy = [
            int(place)
            for place in np.argsort(-chances, kind="stable")[: max(0, n - 1)]
            if chances[place] * planned >= 1
        ][: self.on_line - 1]
        if not heavy:
            return
        self.removed.update(heavy)
        self.certain.extend(self.line[p] for p in heavy)
        kept = [
            (p, d)
            for p, d in zip(self.draws, self._design_of, strict=True)
            if p not in self.removed
        ]
        self.draws = [p for p, _ in kept]
        self._design_of = [d for _, d in kept]
        self.counts = [self._design_of.count(d) for d in range(len(self.designs))]
        for k, design in enumerate(self.designs):
            design[heavy] = 0.0
            design /= design.sum()
            self._ends[k] = np.cumsum(design) / design.sum()

    def take(self, n: int) -> list[int]:
        """``n`` more pieces (indices): the certain ones first, then the next draws'
        pieces not surveyed yet; every piece left when ``n`` reaches them all (a census).
        Fewer when draws keep landing on pieces already surveyed (heavy ones): the
        estimate counts every draw."""
        self._heavy(n)
        chosen = [i for i in self.certain if i not in self._given]
        self._given.update(chosen)
        n -= len(chosen)
        left = [
            place
            for place in range(len(self.line))
            if place not in self._drawn and place not in self.removed
        ]
        if n >= len(left):  # every piece: the census needs no draws
            self._drawn.update(left)
            self._given.update(self.line[place] for place in left)
            return chosen + [self.line[place] for place in left]
        tries = 0
        while n > 0 and tries < 64 * len(self.line):
            tries += 1
            place = self._draw()
            if place not in self._drawn:
                self._drawn.add(place)
                self._given.add(self.line[place])
                chosen.append(self.line[place])
                n -= 1
        return chosen


def _sizes(
    areas: Sequence[float], populations: Sequence[float] | np.ndarray | None
) -> dict[str, np.ndarray]:
    """The size measures of the pieces: their area, their people (when any piece has some;
    every piece with a floor of :data:`POPULATION_FLOOR` of the mean, for the pieces no
    place lies in) and equal chances."""
    sizes = {"area": np.maximum(np.asarray(areas, dtype=float), 0.0)}
    people = np.maximum(
        np.asarray(populations if populations is not None else [], dtype=float), 0.0
    )
    if people.sum() > 0:
        sizes["population"] = people + POPULATION_FLOOR * people.mean()
    sizes["equal"] = np.ones(len(areas))
    return sizes


def sample(
    areas: Sequence[float],
    centres: Sequence[tuple[float, float]],
    seed: int | str = 0,
    share: float = MAX_SHARE,
    populations: Sequence[float] | np.ndarray | None = None,
) -> Sample:
    """The survey's sample of the pieces whose ``areas`` (m²), ``centres`` (any planar
    coordinates, e.g. longitude and latitude) and, where known, ``populations`` (the people
    inside each, :func:`parcelsearch.planning.population.people_in`) are given: its take-all
    part :data:`CERTAIN_SHARE` of the first round (see :class:`Sample`,
    :func:`pilot_size`; at least one draw is left to the line)."""
    first = pilot_size(len(areas), share)
    certain = math.ceil(CERTAIN_SHARE * first)
    if first < len(areas):
        certain = min(certain, first - 1)
    return Sample(areas, centres, seed, certain=certain, populations=populations)


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
    call, and the calls beyond the first of the pieces on the line are ``1/n Σ z_k``,
    ``z_k = y_k / p̄_k`` of the ``k``-th draw's piece (``y`` its calls beyond the first from
    its rows without the pages' rounding, :func:`_beyond_first`; ``p̄`` its chance in one
    draw of the designs mixed as drawn, :meth:`Sample.mixture`: the balance heuristic, an
    unbiased estimate whatever the designs) — model-assisted, ``z_k`` the regression's total
    plus ``e_k / p̄_k`` (:func:`_model_assisted`) — plus each surveyed piece's rounding
    exactly. Its variance is :func:`_mean_variance` (``s_z² / n``, the draws' as if
    independent from the mixture; from :data:`SUCCESSIVE_FROM` draws on, by successive
    differences along the curve; times :func:`_without_replacement`), plus the rounding of
    the ``M`` pieces on the line not surveyed (1/12 of a call² each), at least ``½ M²/n²``
    (an interval is never falsely exact), and Student's t on the distinct surveyed pieces
    less one. The first estimate after the pilot chooses the measure later rounds draw by
    (:meth:`Sample.choose`).
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
            measure=drawn.measure or "",
        )
    if not drawn.draws:
        raise ValueError("no piece drawn yet: take() a round before estimating")
    told = rows or {}
    smooth = {
        p: _beyond_first(costs[drawn.line[p]], told.get(drawn.line[p]), page_size)
        for p in set(drawn.draws)
    }
    mixed = drawn.mixture()
    z = np.asarray([smooth[p] / mixed[p] for p in drawn.draws])
    assisted = _model_assisted(drawn, smooth, mixed)
    if assisted is not None:
        z = assisted
    n, distinct, pieces = len(z), len(smooth), drawn.on_line
    rounding = sum(costs[drawn.line[p]] - 1 - smooth[p] for p in smooth)
    value = sum(costs[i] for i in drawn.certain) + pieces + rounding + float(z.mean())
    variance = _mean_variance(drawn, z) if distinct > 1 else float(z.mean()) ** 2
    variance *= _without_replacement(drawn, mixed, distinct)
    if any(told.get(drawn.line[p]) is not None for p in smooth):
        variance += (pieces - distinct) / 12
    variance = max(variance, 0.5 * pieces**2 / n**2)
    half = SURVEY_MARGIN * t_quantile(distinct - 1) * math.sqrt(variance)
    point = max(float(floor), value)
    centre = point + _skew_shift(z)
    measure = (
        drawn.choose(
            smooth, {i: _beyond_first(costs[i], told.get(i), page_size) for i in drawn.certain}
        )
        or ""
    )
    return Estimate(
        value=round(point),
        low=max(floor, math.floor(centre - half)),
        high=max(floor, math.ceil(centre + half)),
        surveyed=len(costs),
        pieces=drawn.size,
        surveyed_calls=surveyed,
        measure=measure,
    )


def _model_assisted(
    drawn: Sample, smooth: dict[int, float], mixed: np.ndarray
) -> np.ndarray | None:
    """The draws as a model-assisted (GREG) estimate sees them: the calls beyond the first
    regressed on a constant and, once chosen, the measure's size (the regression weighed
    by the draws' importance weights ``1/p̄``), each draw's ``z`` the regression's total
    over the pieces on the line plus its residual over its chance, ``e_k / p̄_k``. Their
    mean is the regression's total (the residuals' weighted sum is 0 with a constant in
    the model; the measure is a term once later rounds have drawn by it, so estimating
    twice gives one answer; the constant alone where the draws' sizes cannot fit the
    measure); their spread is the residuals', so a measure that predicts the calls narrows
    the interval, and one that does not costs nothing but the fit. ``None`` with too few
    distinct draws for the fit (no more than its terms and one)."""
    live = np.ones(len(drawn.line))
    if drawn.removed:
        live[list(drawn.removed)] = 0.0
    terms = [live]
    if drawn.measure not in (None, "equal") and drawn.counts[-1] > 0:  # drawn by it yet
        size = drawn.shares[str(drawn.measure)] * live
        terms.append(size / max(float(size.sum()), 1e-300) * float(live.sum()))
    if len(set(drawn.draws)) <= len(terms) + 1:
        return None
    places = np.asarray(drawn.draws)
    x_all = np.asarray(terms)
    if np.linalg.matrix_rank(x_all[:, places].T) < len(terms):  # the draws cannot fit it
        x_all = x_all[:1]
    x = x_all[:, places].T
    y = np.asarray([smooth[p] for p in drawn.draws])
    weighted = x / mixed[places][:, None]
    try:
        beta = np.linalg.solve(weighted.T @ x, weighted.T @ y)
    except np.linalg.LinAlgError:
        return None
    return np.asarray(float(x_all.sum(axis=1) @ beta) + (y - x @ beta) / mixed[places])


def _without_replacement(drawn: Sample, mixed: np.ndarray, distinct: int) -> float:
    """The finite-population correction of the draws' variance, ``1 − π_min``: ``distinct``
    pieces surveyed of the line without replacement, ``π_min = distinct × min p̄`` the least
    chance of a piece on the line to be among them (``p̄`` its chance in one draw of the
    designs mixed as drawn, :meth:`Sample.mixture`). The variance of pieces drawn without
    replacement is near ``Σ (1 − π_i) (…)²`` (Hájek), each term at most ``1 − π_min`` of
    its independent-draws part: equal chances get the textbook ``1 − n/N``; a design that
    gives some pieces little chance, little or none."""
    live = np.delete(mixed, sorted(drawn.removed)) if drawn.removed else mixed
    if not len(live):
        return 1.0
    return max(0.0, 1.0 - distinct * float(live.min()))


def _mean_variance(drawn: Sample, z: np.ndarray) -> float:
    """The variance of ``z``'s mean: from :data:`SUCCESSIVE_FROM` draws on, by successive
    differences along the curve, design by design (each design's draws are spread evenly
    along its line, so neighbours on the curve sharing density are not counted as
    independent: ``Σ (z_(j+1) − z_(j))² / (2 m (m − 1))`` over a design's ``m`` draws in
    curve order, weighed by ``(m/n)²``); below that, as of independent draws, ``s_z²/n``
    (a few successive differences make a noisy variance)."""
    n = len(z)
    if n < SUCCESSIVE_FROM:
        return float(z.var(ddof=1)) / n
    total = 0.0
    for design in range(len(drawn.designs)):
        mine = sorted(
            (k for k, d in enumerate(drawn._design_of) if d == design), key=lambda k: drawn.draws[k]
        )
        m = len(mine)
        if m == 0:
            continue
        if m > 2:
            part = float(np.sum(np.diff(z[np.asarray(mine)]) ** 2)) / (2 * m * (m - 1))
        else:
            part = float(z.var(ddof=1)) / m
        total += (m / n) ** 2 * part
    return total


def _skew_shift(z: np.ndarray) -> float:
    """Johnson's (1978) correction of the t interval for a skewed variable: the interval's
    centre moves by ``SKEW_SHIFTS × μ₃ / (6 s² n)`` (``μ₃`` the draws' third central
    moment). A right-skewed sample that missed its heavy pieces has a low mean and a low
    spread together; this moves its interval towards them."""
    if len(z) < 3 or float(z.var(ddof=1)) <= 0:
        return 0.0
    centred = z - z.mean()
    return SKEW_SHIFTS * float((centred**3).mean()) / (6 * float(z.var(ddof=1)) * len(z))


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
    needed = math.ceil(100 * wanted / cap_base(current, known, share)) / 100
    return min(1.0, max(needed, round(share + 0.01, 2)))


def cap_base(current: Estimate, known: int, share: float = MAX_SHARE) -> float:
    """What the survey's cap is a share of: the least the whole can cost (the surveyed
    costs and one call for every other piece, with ``known`` calls known without a survey:
    a sure low bound) and, once past the pilot, :data:`LOW_END_SHARE` of the way from it to
    the low end of the current 95 % interval — a low bound that grows as the survey learns
    the whole is dear, where one call a piece is far below it (tracts of 4 calls a piece).
    Never the low end itself, nor the pilot's: a pilot's few draws once put its interval's
    low end at twice the truth, a later round's 11 % above it, and a cap on an estimate's
    low end once let a survey spend 10.3 % of a job (bench/price_estimate.py)."""
    least = float(current.least + known)
    if current.surveyed <= pilot_size(current.pieces, share):
        return least
    return least + LOW_END_SHARE * (current.low - current.least)


def next_round(current: Estimate, known: int, share: float = MAX_SHARE) -> int:
    """How many more pieces to survey after ``current`` (0: enough), given ``known`` calls
    of the whole run known without a survey: as many as bring the half-width to
    :data:`TARGET_HALF_WIDTH` of the least the whole can cost (the surveyed costs and one
    call for every other piece; the half-width shrinks as 1/√n), within ``share`` (by
    default :data:`MAX_SHARE`) of :func:`cap_base`, a low bound of the whole.

    The target is held to the least, not to the estimate: a rule that stops once the
    half-width is small against the estimate stops sooner on the surveys that overestimate,
    and those intervals then miss the truth more often than 1 in 20 (measured on the dense
    sets of bench/price_estimate.py: 92–93 of 100 held; held to the least, 96–100 of 100).
    Nor does a survey stop at its pilot, however narrow the pilot's interval (a few draws
    that missed the heavy pieces look alike): one round by the chosen measure follows,
    within the cap."""
    n, big_n, half = current.surveyed, current.pieces, current.half
    least = current.least + known
    pilot = n <= pilot_size(big_n, share)  # a pilot's few draws never end a survey
    if n >= big_n or (half <= TARGET_HALF_WIDTH * least and not pilot):
        return 0
    cap = max(0, math.floor(share * cap_base(current, known, share)) - n)
    if cap == 0:
        return 0
    wanted = math.ceil(n * (half / (TARGET_HALF_WIDTH * least)) ** 2 * 1.1) - n
    return max(0, min(cap, big_n - n, max(wanted, MIN_ROUND)))
