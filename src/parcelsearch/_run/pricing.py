"""A search's price before it spends: page 1 exactly, the later pages estimated.

Phase 1 of a search (:mod:`parcelsearch._run.search_run`) fetches page 1 of every piece not cached:
that many calls, exactly. How many later pages the pieces have is known only from page 1 —
or, before it, from the run history, when the same request rings were searched before
(:meth:`parcelsearch.stores.history.History.previous`). :func:`estimate` adds those up;
:class:`Price` says the figure with one word for how well it is known, the same word
wherever that figure is shown:

- **exactly**: every page's count is known (after phase 1, or nothing left to fetch);
- **about**: estimated from the run history (every piece to fetch was searched before);
- **at least**: some pieces were never searched, so their later pages are not known yet;
- **about … (95 % interval a–b)**: after a survey (:mod:`parcelsearch.planning.survey`): page 1
  of a sample of the pieces never searched, and the rest estimated from it; or, without a
  survey, learnt from earlier pieces nearby (:mod:`parcelsearch._run.density`).

:func:`surveyed` makes that last price; :func:`quota_line` says what it would leave of the
key's quota.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from parcelsearch.settings import DEFAULT_SURVEY_SHARE
from parcelsearch.stores.history import Previous

__all__ = ["Price", "BLOCK_WIDTH", "estimate", "exact_rest", "surveyed", "quota_line", "share_text"]


def _noun(n: int) -> str:
    return "call" if n == 1 else "calls"


def _calls(n: int) -> str:
    return f"{n:,} {_noun(n)}"


def share_text(share: float) -> str:
    """The survey's share as a price line says it: ``"a tenth of"``, ``"0.2 of"``."""
    return "a tenth of" if share == 0.1 else f"{share:g} of"


@dataclass(frozen=True)
class Price:
    """The price of a search (:func:`parcelsearch.price`, the price lines).

    What a run will spend: ``first`` calls for page 1 (exact), ``later`` for the later
    pages (``known``: ``"exact"``, ``"estimated"`` from the run history, ``"surveyed"``
    with the interval ``low``–``high``, ``"learnt"`` from earlier pieces nearby with its
    interval, or ``"lower"`` bound when some pieces were never searched), ``spent`` already
    spent in this run.

    ``worst`` is the later pages' cost if every piece re-read its pages (with
    ``refresh="changed"``, when every piece had changed), when that differs.
    """

    first: int
    later: int
    known: str = "exact"
    pieces: int = 0
    spent: int = 0
    worst: int | None = None
    #: Of ``later``: the verify sample's pages, dropped first when the rest does not fit.
    sample: int = 0
    #: After a survey: the low end of the 95 % interval of :attr:`total`.
    low: int | None = None
    #: After a survey: the high end of the 95 % interval of :attr:`total`.
    high: int | None = None
    #: The pieces surveyed (their page 1 is in ``spent``).
    surveyed: int = 0
    #: The pieces never searched (surveyed, or estimated from the survey).
    unknown: int = 0
    #: Of ``later``: exactly known (pages told by page 1, not cached).
    exact_later: int = 0
    #: ``known="learnt"``: the earlier pieces nearby the price of the pieces never searched
    #: was learnt from (:mod:`parcelsearch._run.density`), no survey.
    learnt_from: int = 0
    #: :func:`parcelsearch._run.asking_price.known_price` when some pieces are not priced:
    #: the calls of the survey's first round that would price them; and the quota line.
    survey: int = 0
    quota: str = ""
    #: The survey stopped at its cap (:attr:`share` of a low bound of the whole) with
    #: the interval still wide: the price line says so, and the share that would narrow it
    #: to about ±20 % (:attr:`wider_share`, ``None`` when the share is all already).
    capped: bool = False
    share: float = DEFAULT_SURVEY_SHARE
    wider_share: float | None = None
    #: After a survey: what its draw took the pieces' weights from (``"population"``,
    #: ``"area"`` or ``"equal"``), when the estimator says; shown in the block.
    measure: str = ""
    #: The month plan, when the quota cannot hold the job and ``allow_partial`` finishes the
    #: whole areas that fit: ``"this month: 418 more calls (areas …, complete); the other
    #: 388 after 2026-12-01 00:00 UTC"``; and the calls it spends (:attr:`planned`).
    plan: str = ""
    planned: int | None = None

    @property
    def total(self) -> int:
        """Calls the whole run needs: spent + page 1 + later pages."""
        return self.spent + self.first + self.later

    @property
    def needed(self) -> int:
        """:attr:`total` without the verify sample (which is dropped first when short)."""
        return self.total - self.sample

    @property
    def word(self) -> str:
        """``"exactly"``, ``"about"`` or ``"at least"``: how well :attr:`total` is known."""
        return {
            "exact": "exactly",
            "estimated": "about",
            "surveyed": "about",
            "learnt": "about",
        }.get(self.known, "at least")

    @property
    def remaining(self) -> int:
        """Calls still to spend (:attr:`total` less what was spent)."""
        return self.first + self.later

    @property
    def upper(self) -> int:
        """The most the whole run is expected to need (the interval's top, else the total)."""
        return self.high if self.high is not None else self.total

    def interval(self) -> str:
        """``", 95% interval 790–905"``, or nothing when the price has none."""
        if self.low is None or self.high is None:
            return ""
        return f", 95% interval {self.low:,}–{self.high:,}"

    def needs(self) -> str:
        """``"about 271 calls"`` (the whole run's price, with its word and interval)."""
        return f"{self.word} {_calls(self.total)}{self.interval()}"

    def parts(self) -> str:
        """How :attr:`total` is made: the page 1s, the later pages, what was spent."""
        if self.known == "surveyed":
            return self._surveyed_parts()
        if self.known == "learnt":
            return self._learnt_parts()
        first = (
            f"exactly {self.first:,} for page 1 of {self.pieces:,} piece{'s' * (self.pieces != 1)}"
            if self.first
            else ""
        )
        later = {
            "exact": f"exactly {self.later:,} for the later pages",
            "estimated": f"about {self.later:,} for the later pages, from what earlier runs found",
        }.get(
            self.known,
            (f"at least {self.later:,} for the later pages" if self.later else "the later pages")
            + ", counted once page 1 says how many",
        )
        if self.sample:
            later += f" ({self.sample:,} of them the verify sample, dropped first when short)"
        if self.worst is not None and self.worst > self.later:
            later += f", {self.worst:,} if every piece changed"
        spent = f"{self.spent:,} already spent" if self.spent else ""
        return "; ".join(p for p in (spent, first, later) if p)

    def _surveyed_parts(self) -> str:
        spent = (
            f"{self.spent:,} already spent, {self.surveyed:,} of them a survey (page 1 of "
            f"{self.surveyed:,} of the {self.unknown:,} pieces never searched)"
        )
        first = (
            f"exactly {self.first:,} for page 1 of the other {self.first:,} "
            f"piece{'s' * (self.first != 1)}"
            if self.first
            else ""
        )
        guessed = self.later - self.exact_later
        later = (
            f"exactly {self.exact_later:,} for the later pages page 1 told"
            if self.exact_later
            else ""
        )
        rest = f"about {guessed:,} for the other pieces' later pages, from the survey"
        if self.learnt_from:
            rest += f" and {self.learnt_from:,} earlier pieces nearby"
        if self.capped and self.high is not None and self.low is not None:
            share = math.ceil(100 * (self.high - self.low) / 2 / max(1, self.total))
            rest += (
                f"; the interval is ±{share}%: the survey stopped at its cap, "
                f"{share_text(self.share)} a low bound of the search's cost"
            )
            if self.wider_share is not None:
                rest += f" (a survey share of {self.wider_share:g} would narrow it to about ±20%)"
        return "; ".join(p for p in (spent, first, later, rest) if p)

    def _learnt_parts(self) -> str:
        spent = f"{self.spent:,} already spent" if self.spent else ""
        first = (
            f"exactly {self.first:,} for page 1 of {self.first:,} piece{'s' * (self.first != 1)}"
            if self.first
            else ""
        )
        later = (
            f"exactly {self.exact_later:,} for the later pages page 1 told"
            if self.exact_later
            else ""
        )
        guessed = self.later - self.exact_later
        rest = (
            f"about {guessed:,} for the later pages of the {self.unknown:,} pieces never "
            f"searched, learnt from {self.learnt_from:,} earlier pieces nearby (no survey)"
        )
        return "; ".join(p for p in (spent, first, later, rest) if p)

    def free_line(self) -> str:
        """The price known without spending, as a plan shows it: ``"price: about 223 calls,
        95% interval 194–252 (…)"``, or ``"price: at least 107 calls (…); a survey of about
        11 calls would price the rest"``; then the quota line, when known."""
        text = self.line()
        if self.known == "lower" and self.survey:
            text += f"; a survey of about {_calls(self.survey)} would price the rest"
            if self.survey >= self.first:
                text += " exactly (page 1 of each piece never searched)"
        return f"{text}; {self.quota}" if self.quota else text

    def refusal(self) -> str:
        """The price as a refusal says it: ``at least 6 calls`` when only the page 1s are
        known, else with its parts."""
        if self.known == "lower" and not self.later and not self.spent:
            return self.needs()
        return f"{self.needs()} ({self.parts()})"

    def block(self) -> list[str]:
        """The price as a block of short lines (each at most :data:`BLOCK_WIDTH`
        characters), always in this order, each only when it has something to say: the
        estimate and its interval (and the survey's measure); what was spent and on what;
        what is exact; what is estimated (and if every piece changed); the verify sample;
        how wide a capped survey left the interval, and the share that would narrow it;
        the quota; the month plan."""
        head = f"price: {self.needs()}"
        if self.measure:
            head += f" (survey drawn by {self.measure})"
        lines = [head]
        if self.spent:
            on = (
                ""
                if not self.surveyed
                else f", {'' if self.surveyed == self.spent else f'{self.surveyed:,} '}on a "
                f"survey: page 1 of {self.surveyed:,} of {self.unknown:,} pieces never "
                "searched"
            )
            lines.append(f"spent: {_calls(self.spent)} so far{on}")
        exact = []
        if self.first:
            exact.append(
                f"{self.first:,} for page 1 of {self.first:,} piece{'s' * (self.first != 1)}"
            )
        exact_later = self.later if self.known == "exact" else self.exact_later
        if exact_later:
            exact.append(f"{exact_later:,} for later pages page 1 told")
        if exact:
            lines.append("exact: " + "; ".join(exact))
        guessed = self.later - exact_later
        if self.known != "exact":
            source = {
                "surveyed": "from the survey",
                "learnt": f"learnt from {self.learnt_from:,} earlier pieces nearby",
                "estimated": "from what earlier runs found",
            }.get(self.known, "")
            if self.known == "lower":
                lines.append("estimated: the later pages, counted once page 1 says how many")
            else:
                worst = (
                    f"; {self.worst:,} if every piece changed"
                    if self.worst is not None and self.worst > self.later
                    else ""
                )
                lines.append(f"estimated: about {guessed:,} for later pages, {source}{worst}")
        if self.sample:
            lines.append(
                f"sample: {self.sample:,} of the later pages are the verify sample, "
                "dropped first when short"
            )
        if self.capped and self.high is not None and self.low is not None:
            share = math.ceil(100 * (self.high - self.low) / 2 / max(1, self.total))
            lines.append(
                f"interval: ±{share}%: the survey stopped at its cap, "
                f"{share_text(self.share)} a low bound of the search's cost"
            )
            if self.wider_share is not None:
                lines.append(
                    f"narrower: a survey share of {self.wider_share:g} would narrow it "
                    "to about ±20%"
                )
        if self.quota:
            lines.append(self.quota)
        if self.plan:  # "this month: …" then "the other … after …", a line each
            now, _, later = self.plan.partition("; ")
            lines += [f"plan: {now}", *([f"then: {later}"] if later else [])]
        return [_fit(line) for line in lines]

    def line(self) -> str:
        """The price line shown before spending: ``price: about 271 calls (…)``."""
        return f"price: {self.needs()} ({self.parts()})"

    def __str__(self) -> str:
        return self.line()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's display of a price (a notebook): its :meth:`block`."""
        printer.text("\n".join(self.block()))


#: The widest line of a price block (:meth:`Price.block`).
BLOCK_WIDTH = 100


def _fit(line: str) -> str:
    """A block's line within :data:`BLOCK_WIDTH` (cut with an ellipsis, never wrapped)."""
    return line if len(line) <= BLOCK_WIDTH else line[: BLOCK_WIDTH - 1] + "…"


def estimate(
    first: Sequence[tuple[int | None, Previous | None]],
    *,
    mode: str,
    fraction: float = 0.0,
    cached_later: int = 0,
    known_later: int = 0,
) -> Price:
    """The price before phase 1, for the pieces whose page 1 must be fetched.

    Parameters
    ----------
    first
        Per such piece: the pages its page 1 already told (``None`` when not known) and its
        last record in the run history (``None`` when never searched).
    mode
        The refresh mode: with ``"changed"``, a piece searched before re-reads its later
        pages only if it changed (estimated: none did, plus the verify sample's share).
    fraction
        The verify sample's fraction (``refresh="changed"``).
    cached_later
        Pieces whose page 1 came from the cache and that have later pages: counted as
        cached too (they usually are), which makes the figure an estimate.
    known_later
        Later pages of the pieces whose page 1 came from the cache that are not cached
        themselves: exactly that many calls (a resume's price is never "about 0").
    """
    later = worst = unknown = 0
    inferred: list[int] = []  # refresh="changed": later pages of pieces searched before
    for pages, previous in first:
        known = pages if pages is not None else (previous.pages if previous else None)
        if known is None:
            unknown += 1
            continue
        rest = max(0, known - 1)
        worst += rest
        if mode == "changed" and previous is not None and previous.digests:
            if rest:
                inferred.append(rest)
        else:
            later += rest
    sampled = 0
    if inferred and fraction > 0:  # the verify sample: ceil(fraction × n) pieces, their mean
        sampled = round(math.ceil(fraction * len(inferred)) * sum(inferred) / len(inferred))
    later += sampled + known_later
    return Price(
        first=len(first),
        later=later,
        pieces=len(first),
        sample=sampled,
        known="lower" if unknown else ("estimated" if first or cached_later else "exact"),
        worst=worst if mode == "changed" and worst > later else None,
    )


def exact_rest(jobs: int, spent: int) -> Price:
    """The price after phase 1: ``jobs`` later pages, exactly, after ``spent`` calls."""
    return Price(first=0, later=jobs, known="exact", spent=spent)


def surveyed(
    *,
    spent: int,
    first: int,
    exact_later: int,
    history_later: int,
    estimated: int,
    low: int,
    high: int,
    surveyed_pieces: int,
    unknown: int,
    learnt_from: int = 0,
) -> Price:
    """The price after a survey.

    Parameters
    ----------
    spent
        Calls this run spent (the survey's).
    first
        Page 1s still to fetch.
    exact_later
        Later pages page 1 told (stored or surveyed) that are not cached.
    history_later
        Later pages of pieces the run history knows (estimated).
    estimated, low, high
        The later pages of the pieces not surveyed, estimated from the survey, and their
        95 % interval.
    surveyed_pieces, unknown
        Pieces surveyed, of ``unknown`` never searched.
    learnt_from
        Not 0: the estimate was learnt from that many earlier pieces nearby, for every
        piece never searched when none was surveyed (``known="learnt"``), else for those
        they surround.
    """
    later = exact_later + history_later + estimated
    base = spent + first + exact_later + history_later
    known = "learnt" if learnt_from and not surveyed_pieces else "surveyed"
    return Price(
        first=first,
        later=later,
        known=known,
        pieces=first,
        spent=spent,
        low=base + low,
        high=base + high,
        surveyed=surveyed_pieces,
        unknown=unknown,
        exact_later=exact_later,
        learnt_from=learnt_from,
    )


def quota_line(
    price: Price, left: int | None, limit: int | None, period: str | None, *, source: str = ""
) -> str:
    """What the run would leave of the key's quota: ``left`` calls now, of ``limit`` per
    ``period`` (``"month"`` or ``"lifetime"``); empty when no quota is known. ``source``:
    where the quota came from when the user did not give it (``"your profile"``), said
    first: ``quota (from your profile): …``."""
    if left is None or limit is None or period is None:
        return ""
    head = f"quota (from {source}):" if source else "quota:"
    need = price.remaining
    word = "exactly" if price.known == "exact" else "about"
    when = "this month" if period == "month" else "for good"
    if need <= left:
        return f"{head} it would leave {word} {left - need:,} of the {left:,} left {when}"
    short = need - left
    if period == "month" and limit > 0:
        months = math.ceil(short / limit)
        rest = "needs" if source else "the rest needs"  # the line within the block's width
        return (
            f"{head} {left:,} left this month, {word} {short:,} short: {rest} "
            f"{months} more month{'s' * (months != 1)} at {limit:,} a month"
        )
    return f"{head} {left:,} left {when}, {word} {short:,} short"
