"""How a fetched page is judged against its piece: the GroupIDs it shares with a neighbour
(a condominium, a slipped page, an unstable order), a failed page, a piece fetched again.
"""

from __future__ import annotations

from typing import Any

from parcelsearch._fetch.pacing import Cancelled
from parcelsearch._fetch.page import Page
from parcelsearch._run.fetching import (
    MAX_REFETCHES,
    SHARED,
    SLIPPED,
    PageBaseLearned,
    Run,
    Stopped,
    log,
    piece_failure,
)
from parcelsearch._run.piece_state import PieceState
from parcelsearch.errors import (
    BadPolygonError,
    MalformedResponseError,
    PageGoneError,
    ParcelSearchError,
    ResultWindowError,
    UnstableOrderError,
)

#: GroupIDs read from a vendor, none twice in a page, after which it is known to list each
#: GroupID once (a vendor listing a condominium's parcels each shows repeats long before).
LISTS_ONCE_AFTER = 200


class PageChecks:
    """The checks of :class:`~parcelsearch._run.page_pool.Fetcher` on each page settled."""

    run: Run
    bar: Any
    failure: BaseException | None
    _ids_read: int

    def _contradicts(self, state: PieceState, why: str) -> list[int]:
        """This piece's pages contradict each other (``why``): read whole again from the
        network when some came from a store (an earlier run may have kept a slipped page),
        else it fails: never complete."""
        if state.cached_pages and not state.refetches:
            return self._refetch(state, None, why.split(":")[0])
        state.fail(why)
        log.warning("area %r piece %s failed: %s", state.piece.area_id, state.piece.piece_id, why)
        return []

    def _read_ids(self, page: Page) -> None:
        """What a fresh page teaches of how the vendor lists GroupIDs: twice in one page,
        it lists a condominium's parcels each; none twice in :data:`LISTS_ONCE_AFTER` read,
        it lists each once (kept in its profile either way)."""
        client = self.run.client
        if client.vendor.ids_once is False or not page.data:
            return
        if len(set(page.data)) < len(page.data):
            client.learn(ids_once=False)
            return
        self._ids_read += len(page.data)
        if client.vendor.ids_once is None and self._ids_read >= LISTS_ONCE_AFTER:
            client.learn(ids_once=True)

    def _slipped(self, state: PieceState, page_no: int, page: Page) -> str | None:
        """Why this page contradicts a neighbour (``None``: it does not): it shares the
        GroupID at their boundary, which a vendor listing each GroupID once never does —
        its offset paging slipped over an order that shifted, and GroupIDs are missing."""
        if self.run.client.vendor.ids_once is not True or not page.data:
            return None
        before, after = state.data.get(page_no - 1), state.data.get(page_no + 1)
        if before and before[-1] == page.data[0]:
            lower, upper = page_no - 1, page_no
        elif after and after[0] == page.data[-1]:
            lower, upper = page_no, page_no + 1
        else:
            return None
        return f"page {upper} begins with the last GroupID of page {lower}{SLIPPED}"

    def _failed(self, state: PieceState, page_no: int, exc: BaseException) -> list[int]:
        """A page's final error: the run's (it stops), or this piece's (it fails alone)."""
        if not getattr(exc, "alone", None) and not piece_failure(exc):
            self.failure = self.failure or exc
            self.run.stop.set()
            return []
        stopping = self.run.stop.is_set()  # another failure, told when it settles, is the run's
        if isinstance(exc, ResultWindowError) and page_no > 1 and state.pages is not None:
            if exc.messages:  # the vendor's refusal (pages not sent are not told each)
                self.run.window_refused(page_no)
                log.warning(
                    "area %r piece %s: %s", state.piece.area_id, state.piece.piece_id, exc.message
                )
            return []  # too deep: the search splits the piece (its pages > the window learnt)
        if isinstance(exc, PageGoneError):
            if state.rows is None or stopping:
                return []  # the piece is being read again already, or the run ends
            return self._refetch(state, None, str(exc))
        if (
            not stopping
            and page_no == 1
            and isinstance(exc, BadPolygonError | MalformedResponseError)
            and self._learned_zero(state)
        ):
            return []
        state.fail(getattr(exc, "message", None) or str(exc))
        log.warning(
            "area %r piece %s failed: %s", state.piece.area_id, state.piece.piece_id, state.failure
        )
        return []

    def _learned_zero(self, state: PieceState) -> bool:
        """Whether a suspicious answer came from a vendor that counts pages from 0 (asked
        once per base URL); then the run reads everything again (``PageBaseLearned``)."""
        if self.run.client.page_base_known:
            return False
        try:
            base = self.run.page_base(state)
        except (Stopped, Cancelled):
            return False
        except ParcelSearchError as exc:
            self.failure = self.failure or exc
            self.run.stop.set()
            return True
        if base == 0:
            self.failure = self.failure or PageBaseLearned()
            self.run.stop.set()
            return True
        return False

    @staticmethod
    def _overlaps(state: PieceState, page_no: int, page: Page) -> bool:
        """Whether ``page`` shares GroupIDs with another page of its piece in a way a stable
        order does not explain. One GroupID may hold several parcels (a condominium), and a
        vendor that counts them in ``rows`` and keeps them together in its order may split
        them at a page boundary: the last GroupID of page k is then the first of page k + 1.
        Any other shared GroupID is suspect."""
        ids = set(page.data)
        for other, data in state.data.items():
            common = ids.intersection(data)
            if other == page_no or not common:
                continue
            lower, upper = (data, page.data) if other < page_no else (page.data, data)
            if abs(other - page_no) == 1 and common == {lower[-1]} and upper[0] == lower[-1]:
                continue
            return True
        return False

    def _check_order(self, state: PieceState, page_no: int, page: Page) -> list[int]:
        """Pages of one piece share GroupIDs: a vendor counting from 0 (asked once), else an
        order that is not stable (page 1 read again differs: the piece fails), else real
        duplicates (kept) — unless the vendor lists each GroupID once: then a slipped page
        (:meth:`_contradicts`)."""
        if self._learned_zero(state):
            return []
        try:
            again = self.run.read_again(state, 1)
        except (Stopped, Cancelled):
            return []
        except BaseException as exc:  # noqa: BLE001 - judged like any page's failure
            return self._failed(state, 1, exc)
        if again.data != state.data.get(1):
            state.fail(
                str(
                    UnstableOrderError(
                        "pages of this piece overlap and page 1 read again differs: the vendor's "
                        "order is not stable across pages, so its pages cannot be trusted to hold "
                        "every GroupID"
                    )
                )
            )
            log.warning(
                "area %r piece %s failed: %s",
                state.piece.area_id,
                state.piece.piece_id,
                state.failure,
            )
            return []
        if self.run.client.vendor.ids_once is True:  # no condominium explains it
            return self._contradicts(state, SHARED)
        self._keep(state, page_no, page)
        return []

    def _keep(self, state: PieceState, page_no: int, page: Page) -> None:
        if state.keep(page_no, page):
            self.bar.update(1)

    def _refetch(self, state: PieceState, page: Page | None, gone: str = "") -> list[int]:
        """Pages of one piece came from different answers (or a page promised by page 1 is
        gone): fetch that piece again from page 1, only it."""
        if state.refetches >= MAX_REFETCHES:
            if page is None:
                state.fail(
                    f"{gone}; still so through {MAX_REFETCHES} fresh reads of the "
                    "piece: the vendor's answer keeps changing"
                )
                return []
            self.failure = self.failure or _changing(state, page)
            self.run.stop.set()
            return []
        if page is None:
            log.warning(
                "area %r piece %s: %s; reading this piece again from page 1",
                state.piece.area_id,
                state.piece.piece_id,
                gone,
            )
        else:
            log.warning(
                "area %r piece %s: page %s reports rows=%s, pages=%s but page 1 "
                "reported rows=%s, pages=%s; fetching this piece again",
                state.piece.area_id,
                state.piece.piece_id,
                page.page,
                page.rows,
                page.pages,
                state.rows,
                state.pages,
            )
        self.bar.total += max(1, page.pages if page is not None else state.pages or 1)
        self.bar.refresh()
        state.reset()
        return [1]


def _changing(state: PieceState, page: Page) -> ParcelSearchError:
    piece = state.piece
    return ParcelSearchError(
        f"area {piece.area_id!r} piece {piece.piece_id}: page {page.page} reports "
        f"rows={page.rows}, pages={page.pages} but page 1 reported rows={state.rows}, "
        f"pages={state.pages}, through {MAX_REFETCHES} fresh fetches of the piece: the "
        "service's data keep changing. Everything fetched is cached; search again later."
    )
