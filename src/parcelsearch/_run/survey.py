"""The survey: page 1 of a stratified random sample of the pieces, and the whole price
estimated from it with a 95 % interval.

A piece costs ``max(1, pages)`` calls, and page 1 tells ``pages``: surveying ``n`` of the
``N`` pieces whose count is unknown gives exact costs for those ``n``. The pieces are
stratified by their area (equal-count strata, smallest to largest), so large and small
pieces are both sampled; within a stratum the sample is simple random. The cost of the
unknown pieces is estimated as one call a piece and a ratio of calls beyond the first to
area (a combined ratio estimator over the strata, with the finite-population
correction); the interval is Student's t on the Satterthwaite degrees of freedom,
widened by :data:`SKEW_MARGIN`, never below what is known for sure (the surveyed
costs and one call for every piece not surveyed).

The survey grows in rounds (:func:`plan_rounds`): a pilot, then as many more pieces as
the pilot says bring the interval's half-width to :data:`TARGET_HALF_WIDTH` of the
estimate, never more than :data:`MAX_SHARE` of the least the whole can cost (the surveyed
costs and one call for every other piece), so never more than a tenth of the true total.
When that cap stops it with the half-width above :data:`USEFUL_HALF_WIDTH`
(:func:`capped`), the price line says so: the interval is what it is. Surveyed pages are
the search's own page 1s (cached and used): a survey is never waste.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Estimate", "Strata", "estimate", "TARGET_HALF_WIDTH", "MAX_SHARE",
           "t_quantile", "stratify", "capped"]

#: The half-width (a fraction of the estimate) the survey aims at.
TARGET_HALF_WIDTH = 0.12
#: The half-width (a fraction of the estimate) above which a capped survey says so.
USEFUL_HALF_WIDTH = 0.20
#: The survey's cost at most, as a fraction of the least the whole can cost.
MAX_SHARE = 0.10
#: The interval's widening for skewed costs (a few pieces with many pages).
SKEW_MARGIN = 1.5
#: Of the first round, the share taken with certainty: the largest pieces.
CERTAIN_SHARE = 0.5
#: Strata at most, pieces in a stratum at least, and pieces surveyed at least in each.
MAX_STRATA = 12
STRATUM_PIECES = 25
MIN_PER_STRATUM = 3
#: Below this many unknown pieces the survey is every piece (a census).
CENSUS_BELOW = 30

# Student's t, 97.5 % quantile, by degrees of freedom (then 1.96 beyond 120).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042,
         40: 2.021, 60: 2.000, 120: 1.980}


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
    def half_width(self) -> float:
        """Half the interval, as a fraction of :attr:`value`."""
        return (self.high - self.low) / 2 / max(1, self.value)


class Strata:
    """The unknown pieces in strata by area: the largest ``certain`` pieces surveyed with
    certainty (a take-all stratum: the few pieces that could hold most of the pages are
    never left to chance), the others in equal-count strata from small to large, each in
    a random order (the survey takes each stratum's next pieces, so rounds extend one
    random sample)."""

    def __init__(self, areas: Sequence[float], seed: int | str = 0, certain: int = 0,
                 first: int = 0) -> None:
        order = sorted(range(len(areas)), key=lambda i: (-areas[i], i))
        self.areas = list(areas)
        self.certain = order[:certain]
        rest = order[certain:][::-1]
        # As many strata as the first round fills with MIN_PER_STRATUM pieces each.
        count = max(1, min(MAX_STRATA, len(rest) // STRATUM_PIECES,
                           (first - certain) // MIN_PER_STRATUM))
        rng = random.Random(seed)
        self.members: list[list[int]] = []
        for h in range(count):
            part = rest[h * len(rest) // count:(h + 1) * len(rest) // count]
            rng.shuffle(part)
            self.members.append(part)
        self.taken = [0] * count
        self._certain_taken = False

    @property
    def size(self) -> int:
        return len(self.areas)

    def take(self, n: int) -> list[int]:
        """``n`` more pieces (indices): the take-all stratum first, then the others in
        proportion to their size (at least :data:`MIN_PER_STRATUM` each, as far as there
        are pieces)."""
        chosen: list[int] = []
        if not self._certain_taken:
            chosen.extend(self.certain)
            n -= len(self.certain)
            self._certain_taken = True
        total = sum(len(m) for m in self.members)
        if total == 0:
            return chosen
        goal = min(total, sum(self.taken) + max(0, n))
        wanted = [min(len(m), max(MIN_PER_STRATUM, math.floor(goal * len(m) / total)))
                  for m in self.members]
        h = 0
        while sum(wanted) < goal:  # the rounding's remainder, one piece a stratum with room
            if wanted[h] < len(self.members[h]):
                wanted[h] += 1
            h = (h + 1) % len(wanted)
        for h, members in enumerate(self.members):
            more = max(0, wanted[h] - self.taken[h])
            chosen.extend(members[self.taken[h]:self.taken[h] + more])
            self.taken[h] += more
        return chosen

    def sampled(self) -> list[list[int]]:
        """Per stratum (the take-all one not among them), the pieces surveyed so far."""
        return [m[:k] for m, k in zip(self.members, self.taken, strict=True)]


def stratify(areas: Sequence[float], seed: int | str = 0) -> Strata:
    """The strata of the pieces whose ``areas`` are given, the survey's take-all stratum
    half of its first round (see :class:`Strata`, :func:`pilot_size`)."""
    first = pilot_size(len(areas))
    return Strata(areas, seed, certain=math.ceil(CERTAIN_SHARE * first), first=first)


def _ratio(pairs: list[tuple[float, float]]) -> float:
    """Calls beyond the first per m² in one stratum's sample (0 if no area)."""
    area = sum(x for x, _ in pairs)
    return sum(y - 1 for _, y in pairs) / area if area > 0 else 0.0


def estimate(strata: Strata, costs: dict[int, int]) -> Estimate:
    """The cost of every piece in ``strata`` from the surveyed ``costs`` (index → calls).

    The take-all stratum counts as surveyed. Elsewhere a piece costs one call and ``r``
    more per m², ``r`` the sampled pieces' ratio of calls beyond the first to area (a
    combined ratio estimator): stratum ``h`` contributes ``N_h + r X_h + N_h ē_h`` and
    ``N_h² (1 − n_h/N_h) s²_h / n_h`` to the variance, ``e = y − 1 − r x`` the residuals
    (``s²_h`` at least ``1/(2 n_h)``, so an interval is never falsely exact).
    """
    groups = [[(strata.areas[i], float(costs[i])) for i in taken] for taken in strata.sampled()]
    r = _ratio([pair for pairs in groups for pair in pairs])
    value = float(sum(costs[i] for i in strata.certain))
    variance = 0.0
    dfs: list[tuple[float, int]] = []
    for members, pairs in zip(strata.members, groups, strict=True):
        big_n, n = len(members), len(pairs)
        if n == 0:
            continue
        residuals = [y - 1 - r * x for x, y in pairs]
        mean = sum(residuals) / n
        value += big_n * (1 + mean) + r * sum(strata.areas[i] for i in members)
        s2 = sum((e - mean) ** 2 for e in residuals) / (n - 1) if n > 1 else 0.0
        s2 = max(s2, 0.5 / n)
        part = big_n ** 2 * (1 - n / big_n) * s2 / n
        variance += part
        if n > 1 and part > 0:
            dfs.append((part, n - 1))
    # Satterthwaite's degrees of freedom of the stratified variance.
    df = variance ** 2 / sum(p ** 2 / d for p, d in dfs) if dfs else 1.0
    # One degree of freedom to the ratio; SKEW_MARGIN for the long right tail of pages per
    # piece, which a t interval from a small sample does not see (measured: bench/).
    half = SKEW_MARGIN * t_quantile(df - 1) * math.sqrt(variance)
    surveyed = sum(costs.values())
    floor = surveyed + strata.size - len(costs)  # one call at least for each other piece
    point = max(float(floor), value)
    return Estimate(value=round(point), low=max(floor, math.floor(point - half)),
                    high=max(floor, math.ceil(point + half)), surveyed=len(costs),
                    pieces=strata.size, surveyed_calls=surveyed)


def pilot_size(pieces: int) -> int:
    """The survey's first round: every piece below :data:`CENSUS_BELOW`, else 7 % of the
    pieces, at least 12 but never more than :data:`MAX_SHARE` of them (every piece costs a
    call at least, so the pilot is within that share of the whole)."""
    if pieces < CENSUS_BELOW:
        return pieces
    return min(math.floor(MAX_SHARE * pieces), max(math.ceil(0.07 * pieces), 12))


def capped(current: Estimate, known: int) -> bool:
    """Whether the survey stopped at its cap (:data:`MAX_SHARE`) with the interval's
    half-width still above :data:`USEFUL_HALF_WIDTH` of the whole (``known``: as for
    :func:`next_round`)."""
    half = (current.high - current.low) / 2
    return (current.surveyed < current.pieces
            and half > USEFUL_HALF_WIDTH * (current.value + known)
            and next_round(current, known) == 0)


def next_round(current: Estimate, known: int) -> int:
    """How many more pieces to survey after ``current`` (0: enough), given ``known`` calls
    of the whole run known without a survey: as many as bring the half-width to
    :data:`TARGET_HALF_WIDTH` of the whole (the half-width shrinks as 1/√n), within
    :data:`MAX_SHARE` of the whole."""
    n, big_n = current.surveyed, current.pieces
    whole = current.value + known
    half = (current.high - current.low) / 2
    if n >= big_n or half <= TARGET_HALF_WIDTH * whole:
        return 0
    # Within the share of the least the whole can be (the surveyed costs and one call for
    # every other piece): never more than a tenth of the true total.
    least = current.surveyed_calls + big_n - n + known
    cap = max(0, math.floor(MAX_SHARE * least) - n)
    if cap == 0:
        return 0
    wanted = math.ceil(n * (half / (TARGET_HALF_WIDTH * whole)) ** 2 * 1.1) - n
    return max(0, min(cap, big_n - n, max(wanted, MIN_PER_STRATUM)))
