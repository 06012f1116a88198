"""What one piece of a search has produced so far: its pages' GroupIDs, its calls, its
failure; changed only through its transitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from parcelsearch._fetch.page import Page
from parcelsearch.planning.plans import Piece


@dataclass(frozen=True)
class PieceState:
    """What one piece has produced so far (the run's counts are sums over these).

    Read by anyone; changed only through its transitions: :meth:`stored` (a page read from
    a store), :meth:`unanswered`, :meth:`probed` and :meth:`fetched` (calls), :meth:`keep` (a
    page's GroupIDs), :meth:`fail`, :meth:`cut` (split for the vendor's result window),
    :meth:`reset` (fetched again from page 1) and :meth:`start_over`. It guards that itself:
    assigning a field from outside raises :class:`dataclasses.FrozenInstanceError`, and
    :attr:`data` is a read-only view (assigning a page raises :class:`TypeError`).
    """

    piece: Piece
    rows: int | None = None
    pages: int | None = None
    #: The GroupIDs of each page kept, by page number (a read-only view; :meth:`keep` adds).
    data: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    calls: int = 0
    #: Of :attr:`calls`, those spent probing the vendor (its page numbering, ``page=0``;
    #: page 1 read again to check its order): counted in the budget like any call, and shown.
    probes: int = 0
    cached_pages: int = 0
    refetches: int = 0  # > 0: fetched again, so its pages never come from a store again
    #: Why this piece failed (the vendor's words), or ``None``: its area is not complete.
    failure: str | None = None
    #: When the oldest page read from a store was fetched (``None``: none was).
    oldest: datetime | None = None
    #: Split into smaller pieces (it has more pages than the vendor's result window): its
    #: GroupIDs are theirs, and its own pages are not fetched further.
    split: bool = False
    _kept: dict[int, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kept = dict(self.data)
        self._set(_kept=kept, data=MappingProxyType(kept))

    def _set(self, **values: Any) -> None:
        """The transitions' one way to change fields (the instance refuses assignment)."""
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def done(self) -> bool:
        if self.split:
            return self.failure is None
        return (
            self.failure is None and self.pages is not None and len(self.data) >= max(1, self.pages)
        )

    def missing(self) -> list[int]:
        """Pages still to fetch (page 1 first; none once the piece failed or was split)."""
        if self.failure is not None or self.split:
            return []
        if self.pages is None:
            return [1]
        return [k for k in range(1, max(1, self.pages) + 1) if k not in self.data]

    def stored(self, page_no: int, page: Page) -> None:
        """Page ``page_no`` read from a store when priced (page 1 sets the counts)."""
        if page_no == 1:
            self._set(rows=page.rows, pages=page.pages)
        self._kept[page_no] = page.data
        self._set(cached_pages=self.cached_pages + 1)
        if self.oldest is None or page.fetched_at < self.oldest:
            self._set(oldest=page.fetched_at)

    def unanswered(self, calls: int) -> None:
        """Calls an attempt spent on this piece without bringing a page back."""
        self._set(calls=self.calls + calls)

    def probed(self, calls: int) -> None:
        """Calls spent probing the vendor for this piece (answered or not)."""
        self._set(calls=self.calls + calls, probes=self.probes + calls)

    def fetched(self, calls: int) -> None:
        """A page came back: for ``calls`` calls, or claimed from a shared store (0)."""
        self._set(calls=self.calls + calls, cached_pages=self.cached_pages + (calls == 0))

    def counted(self, page: Page) -> None:
        """Page 1's answer: how many rows and pages this piece has."""
        self._set(rows=page.rows, pages=page.pages)

    def keep(self, page_no: int, page: Page) -> bool:
        """Keep a page's GroupIDs; ``False`` if it was kept already."""
        if page_no in self._kept:
            return False
        self._kept[page_no] = page.data
        return True

    def fail(self, why: str) -> None:
        """This piece failed (``why``: the vendor's words); its area is not complete."""
        self._set(failure=why)

    def cut(self) -> None:
        """Split into smaller pieces (more pages than the vendor's result window): its own
        later pages are not fetched; the pieces it was cut into hold its GroupIDs."""
        self._set(split=True)

    def reset(self) -> None:
        """Fetched again from page 1, never from a store: what it had is dropped."""
        self._kept.clear()
        self._set(rows=None, pages=None, oldest=None, refetches=self.refetches + 1)

    def start_over(self) -> None:
        """Read again from the start (the vendor's page numbers were learnt): as
        :meth:`reset`, its failure forgotten."""
        self.reset()
        self._set(failure=None)
