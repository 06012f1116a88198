"""Refreshing a search cheaply: which pieces changed, which to sample, what may be missed.

``refresh="changed"`` re-reads page 1 of every piece (one call each) and compares it with
the last complete record of the same request ring (:mod:`parcelsearch.stores.history`, else the
cached pages): a different ``rows`` or a different page 1 means *changed*, and only changed
pieces fetch their other pages again. A piece with one page is re-read whole by that call. A
piece with more pages whose page 1 is unchanged keeps its cached pages: *unchanged by
inference*. The inference misses a change that keeps the count and page 1 (one GroupID
replacing another beyond page 1), so a random sample of the inferred pieces
(``verify_sample``, checked with the other options in :mod:`parcelsearch._run.options`)
re-reads its other pages; how many of them had changed gives an estimate, with a 95 % Wilson
interval scaled to the pieces not sampled, of the changed pieces missed.

Examples
--------
>>> estimate_missed(sampled=20, found=0, population=180)["missed_interval"]
[0.0, 29.0]
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pandas as pd

from parcelsearch.stores.history import (
    History,
    PieceRecord,
    Previous,
    RunRecord,
    areas_fingerprint,
    page_digest,
)

if TYPE_CHECKING:
    from parcelsearch._fetch.page import Page
    from parcelsearch._run.piece_state import PieceState
    from parcelsearch.result import SearchResult

__all__ = [
    "PieceCheck",
    "RunRefresh",
    "classify",
    "sample",
    "estimate_missed",
    "digests_of",
    "status_of",
    "record_of",
]

#: z of a two-sided 95 % interval.
_Z95 = 1.959963984540054


def digests_of(
    rows: int | None, pages: int | None, data: Mapping[int, tuple[str, ...]]
) -> tuple[str, ...]:
    """The page digests of a piece, page 1 first, up to the first page not held."""
    if rows is None or pages is None:
        return ()
    out = []
    for k in range(1, max(1, pages) + 1):
        if k not in data:
            break
        out.append(page_digest(rows, pages, data[k]))
    return tuple(out)


@dataclass
class PieceCheck:
    """What refresh knows about one piece: the last record, and what this run decided."""

    previous: Previous | None = None
    #: Pages 2..n must come from the network (changed, sampled, new, or stale in the cache).
    reread: bool = False
    changed: bool | None = None
    sampled: bool = False
    #: Pages 2..n in the cache belong to an answer older than page 1 (an unfinished refresh).
    stale: bool = False


def classify(
    check: PieceCheck, rows: int | None, pages: int | None, page1: tuple[str, ...] | None
) -> None:
    """Decide from a fresh page 1 whether the piece changed (``check`` updated in place)."""
    previous = check.previous
    if rows is None or pages is None or page1 is None:
        return
    if previous is None or not previous.digests:
        check.changed, check.reread = None, True  # never read before: read it all
        return
    same = (previous.rows, previous.pages) == (rows, pages) and previous.digests[0] == page_digest(
        rows, pages, page1
    )
    check.changed = not same
    check.reread = not same


def sample(candidates: Sequence[Any], fraction: float, seed: str) -> list[Any]:
    """A random sample (seeded by the run id: reproducible) of ``ceil(fraction × n)``
    candidates (at least one when ``fraction > 0`` and there are candidates)."""
    if fraction <= 0 or not candidates:
        return []
    size = min(len(candidates), max(1, math.ceil(fraction * len(candidates))))
    return random.Random(seed).sample(list(candidates), size)


def _wilson(found: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``found / n``."""
    p = found / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def estimate_missed(*, sampled: int, found: int, population: int) -> dict[str, Any]:
    """The changed pieces inference may have missed among ``population`` inferred pieces
    not sampled, from ``found`` changed among ``sampled`` re-read (95 % Wilson interval).

    With nothing sampled nothing is known: the interval is [0, population].
    """
    if sampled == 0:
        return {
            "sampled": 0,
            "found_changed": 0,
            "population": population,
            "missed_estimate": None,
            "missed_interval": [0.0, float(population)],
            "confidence": 0.95,
        }
    low, high = _wilson(found, sampled)
    return {
        "sampled": sampled,
        "found_changed": found,
        "population": population,
        "missed_estimate": round(found / sampled * population, 1),
        "missed_interval": [round(low * population, 1), round(high * population, 1)],
        "confidence": 0.95,
    }


def status_of(done: bool, calls: int, check: PieceCheck | None, mode: str) -> str:
    """How this run knows a piece's pages (see
    :data:`parcelsearch.stores.history.PIECE_STATUSES`)."""
    if not done:
        return "incomplete"
    if check is not None and mode == "changed":
        if check.sampled:
            return "sampled"
        if not check.reread and check.previous is not None and check.changed is False:
            return (
                "read"
                if check.previous.pages is not None and check.previous.pages <= 1
                else "inferred"
            )
    return "cached" if calls == 0 else "read"


def record_of(
    area_id: Any,
    piece_id: int,
    polygon_json: str,
    rows: int | None,
    pages: int | None,
    data: Mapping[int, tuple[str, ...]],
    status: str,
    changed: bool | None,
) -> PieceRecord:
    """The history's record of one piece."""
    return PieceRecord(
        area_id, piece_id, polygon_json, rows, pages, status, changed, digests_of(rows, pages, data)
    )


#: Reads a stored page of a piece (``None``: not stored): the pipeline's ``Run.cached``.
Cached = Callable[["PieceState", int], "Page | None"]


def _cached_record(state: PieceState, cached: Cached) -> Previous | None:
    """The pages the cache holds for a piece the history does not know, as a record."""
    first = cached(state, 1)
    if first is None:
        return None
    data = {1: first.data}
    for k in range(2, max(1, first.pages) + 1):
        hit = cached(state, k)
        if hit is None or (hit.rows, hit.pages) != (first.rows, first.pages):
            break
        data[k] = hit.data
    return Previous(first.rows, first.pages, digests_of(first.rows, first.pages, data))


def _key(state: PieceState) -> tuple[Hashable, int]:
    """A piece's key among a run's (a piece id counts within its area)."""
    return state.piece.area_id, state.piece.piece_id


class RunRefresh:
    """The refresh side of one run: the last records, the decisions, the sample, the record.

    The pipeline calls it at four points: :meth:`start` (before page 1s are priced),
    :meth:`decide` (after page 1 of every piece is known), :meth:`shrink_sample` (when phase
    2 does not fit, the sample goes first) and :meth:`record` (once, when the run ends).
    What follows from the decisions is derived from them, never kept beside them:
    :meth:`rereads` (whether a piece's pages must come from the network), :meth:`changed`,
    :meth:`verification` and :meth:`columns` (reads: they change nothing).
    """

    def __init__(
        self,
        mode: str,
        fraction: float,
        history: History | None,
        *,
        base_url: str,
        path: str,
        run_id: str,
    ) -> None:
        self.mode = mode
        self.fraction = fraction
        self.history = history
        self.base_url = base_url
        self.path = path
        self.run_id = run_id
        #: Each piece's check, by (area id, piece id).
        self.checks: dict[tuple[Hashable, int], PieceCheck] = {}
        #: Where the run is: ``"loading"`` the last records (the stores are read), ``"page 1"``
        #: (:meth:`start` done: ``"changed"`` re-reads every page 1), ``"decided"``.
        self.stage = "loading"
        self.sample_dropped = ""
        self.started = datetime.now(UTC).isoformat()
        self.recorded = False

    def check(self, state: PieceState) -> PieceCheck:
        """What refresh knows about a piece (a blank check for a piece not started)."""
        return self.checks.get(_key(state)) or PieceCheck()

    def rereads(self, state: PieceState) -> bool:
        """Whether this piece's pages must come from the network, not a store: before
        :meth:`decide`, every page 1 of a ``"changed"`` refresh; after it, the pieces changed,
        never seen, stale in the cache, or sampled."""
        if self.stage != "decided":
            return self.stage == "page 1" and self.mode == "changed"
        check = self.check(state)
        return check.reread or check.stale or check.sampled

    def changed(self, state: PieceState) -> bool | None:
        """Whether a piece changed since its last record (``None``: not known): as decided
        from page 1, or, for a piece sampled (``"changed"``) or read whole (other modes),
        from its pages now beside the record's."""
        check = self.check(state)
        if check.previous is None or not state.done:
            return check.changed
        differs = digests_of(state.rows, state.pages, state.data) != check.previous.digests
        if self.mode != "changed":
            return differs  # read whole (from the network or the cache): compared
        return True if check.sampled and differs else check.changed

    def start(self, states: Sequence[PieceState], cached: Cached) -> None:
        """Load what the history knows (with ``"changed"``, for a piece it does not know:
        what the cache holds, read through ``cached``); with ``"changed"`` every page 1 is
        then re-read."""
        if self.history is not None:
            previous, stale = self.history.previous(
                self.base_url, self.path, [s.piece.polygon_json for s in states]
            )
        else:
            previous, stale = {}, set()
        self.stage = "loading"
        for state in states:
            check = self.checks.setdefault(_key(state), PieceCheck())
            check.previous = previous.get(state.piece.polygon_json)
            if check.previous is None and self.mode == "changed":
                check.previous = _cached_record(state, cached)
            check.stale = state.piece.polygon_json in stale
        self.stage = "page 1"

    def decide(self, states: Sequence[PieceState]) -> None:
        """After phase 1: which pieces re-read their other pages (changed, never seen, stale
        in the cache, or sampled), and which are unchanged by inference."""
        inferred = []
        for state in states:
            check = self.checks.setdefault(_key(state), PieceCheck())
            if self.mode == "changed":
                classify(check, state.rows, state.pages, state.data.get(1))
                if check.changed is False and (state.pages or 0) > 1:
                    inferred.append(state)
        for state in sample(inferred, self.fraction, self.run_id):
            self.check(state).sampled = True
        self.stage = "decided"

    def shrink_sample(self, states: Sequence[PieceState], why: str) -> bool:
        """Drop the verify sample (phase 2 does not fit with it); ``True`` if there was one."""
        sampled = [s for s in states if self.check(s).sampled]
        for state in sampled:
            self.check(state).sampled = False
        if sampled:
            self.sample_dropped = why
        return bool(sampled)

    def verification(self, states: Sequence[PieceState]) -> dict[str, Any]:
        """The verify sample's outcome and the estimate of changed pieces missed."""
        if self.mode != "changed":
            return {}
        inferred = sampled = found = 0
        for state in states:
            check = self.check(state)
            if not state.done or check.changed is not False and not check.sampled:
                continue
            if check.sampled:
                sampled += 1
                found += bool(self.changed(state))
            elif (state.pages or 0) > 1:
                inferred += 1
        out = estimate_missed(sampled=sampled, found=found, population=inferred)
        out["fraction"] = self.fraction
        if self.sample_dropped:
            out["sample_dropped"] = self.sample_dropped
        return out

    def columns(self, states: Sequence[PieceState]) -> tuple[list[str], list[bool | None]]:
        """Per piece (in order): how this run knows it (status) and whether it changed."""
        statuses: list[str] = []
        changed: list[bool | None] = []
        for state in states:
            check = self.check(state)
            statuses.append(status_of(state.done, state.calls, check, self.mode))
            changed.append(self.changed(state))
        return statuses, changed

    def record(self, result: SearchResult, states: Sequence[PieceState], fingerprint: str) -> None:
        """Write the run into the history (once; nothing without a history)."""
        if self.history is None or self.recorded:
            return
        self.recorded = True
        tiles = result.tiles
        pieces = [
            record_of(
                s.piece.area_id,
                s.piece.piece_id,
                s.piece.polygon_json,
                s.rows,
                s.pages,
                s.data,
                str(status),
                None if pd.isna(changed) else bool(changed),
            )
            for s, status, changed in zip(states, tiles["status"], tiles["changed"], strict=True)
        ]
        plan = result.plan
        self.history.record(
            RunRecord(
                run_id=self.run_id,
                started=self.started,
                finished=datetime.now(UTC).isoformat(),
                fingerprint=fingerprint,
                base_url=self.base_url,
                path=self.path,
                areas_fingerprint=areas_fingerprint(plan),
                areas=len(plan.areas),
                id_name=plan.id_name,
                tolerance=float(plan.tolerance),
                mode=self.mode,
                complete=bool(result.complete),
                calls=int(result.calls),
                pieces=pieces,
                ids=result.ids,
                areas_ids=list(plan.areas.index),
                areas_complete=list(result.areas_complete or []),
                verification=result.verification,
            )
        )
