"""The survey's rounds: what a round's estimate says (:class:`Estimate`) and how many pieces
the next round surveys (:func:`next_round`), within the survey's cap (:func:`cap_base`); the
draws and the estimate itself are :mod:`parcelsearch.planning.survey`'s, which gives these
names too.

The survey grows in rounds: a pilot (:func:`pilot_size`), then as many more pieces as the
pilot says bring the interval's half-width to :data:`TARGET_HALF_WIDTH` of the least the
whole can cost, never more than :data:`MAX_SHARE` of a low bound of the whole. When that cap
stops it with the half-width above :data:`USEFUL_HALF_WIDTH` (:func:`capped`), the price line
says so, and :func:`wider_share` the share that would not have stopped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from parcelsearch.settings import DEFAULT_SURVEY_SHARE

__all__ = [
    "Estimate",
    "TARGET_HALF_WIDTH",
    "USEFUL_HALF_WIDTH",
    "MAX_SHARE",
    "LOW_END_SHARE",
    "MEASURES",
    "MEASURE_TEXT",
    "MIN_ROUND",
    "CENSUS_BELOW",
    "pilot_size",
    "capped",
    "wider_share",
    "cap_base",
    "next_round",
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
#: end of the interval, after the pilot (:func:`cap_base`; measured by
#: bench/price_estimate.py, its figures in bench/RESULTS.md).
LOW_END_SHARE = 0.25
#: The size measures a survey may draw by, in the order a tie is settled.
MEASURES = ("population", "area", "equal")
#: Each measure in a few words, for the price ("drawn by …").
MEASURE_TEXT = {
    "population": "by the people living in each piece",
    "area": "by each piece's area",
    "equal": "with equal chances",
}
#: Pieces a further round surveys at least.
MIN_ROUND = 3
#: Below this many unknown pieces the survey is every piece (a census).
CENSUS_BELOW = 30


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
    Never the low end itself, nor the pilot's: a few draws' low end can lie far above the
    truth, and a cap on it let a survey spend past its share (bench/price_estimate.py, its
    figures in bench/RESULTS.md)."""
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
    sets of bench/price_estimate.py, its figures in bench/RESULTS.md).
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
