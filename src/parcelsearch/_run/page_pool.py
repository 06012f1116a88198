"""Running (piece, page) jobs of one run on a thread pool while the calling thread keeps
watch, so an interrupt lands at once; :meth:`Fetcher.abort` stops everything: no attempt
starts after it, queued jobs are cancelled, requests on the wire are kept (or abandoned
after their timeout).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from parcelsearch._fetch.pacing import Cancelled
from parcelsearch._fetch.page import Page
from parcelsearch._run.fetching import Run, Stopped
from parcelsearch._run.page_checks import PageChecks
from parcelsearch._run.piece_state import PieceState
from parcelsearch.notices import LearntFactWarning

#: Seconds the watching thread waits between looks at the stop event and finished requests.
_TICK = 0.1


class Fetcher(PageChecks):
    """Runs pages on a thread pool; the main thread keeps watch, so interrupts land at once."""

    def __init__(self, run: Run, workers: int, bar: Any) -> None:
        self.run = run
        self.bar = bar
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="parcelsearch")
        self.failure: BaseException | None = None
        self.pending: dict[Future[tuple[Page, int]], tuple[PieceState, int]] = {}
        self._gate: Future[tuple[Page, int]] | None = None  # the job crossing the frontier
        self._held = 0  # jobs at the head of the waiting list found beyond ...
        self._frontier: tuple[Any, ...] = ()  # ... this frontier (looked at again once moved)
        #: Facts the client learnt in a worker, said by the watching thread as they come.
        self._learnt: list[LearntFactWarning] = []
        self._ids_read = 0  # GroupIDs read fresh in this run, none twice in a page
        run.client.tell = self._learnt.append

    def fetch(self, jobs: Iterable[tuple[PieceState, int]]) -> None:
        """Fetch every (piece, page) job; pieces whose answer changed are fetched again.

        Frontier gates: the run's first job goes alone, so what the vendor says to it (a
        redirect to learn, a refused key, a retired endpoint, a maintenance page, its page
        size) is said once, not once per worker; after it, a job deeper than any page
        answered, or with a longer request line than any answered, waits while another
        such job is on the wire (:meth:`Run.first_beyond` goes first), so a result window or
        a request-line limit is refused once. Each new frontier is crossed alone once."""
        waiting = list(jobs)
        pending = self.pending
        self._send(waiting)
        while pending:
            done, _ = wait(pending, timeout=_TICK, return_when=FIRST_COMPLETED)
            for future in done:
                state, page = pending.pop(future)
                if future is self._gate:
                    self._gate = None
                self.run.contacted = True
                waiting.extend((state, again) for again in self._settle(future, state, page))
            self._say_learnt()
            if self.failure is not None or self.run.stop.is_set():
                self.abort()
                return
            if done:
                self._send(waiting)

    def _say_learnt(self) -> None:
        """Say the facts learnt since the last look, each on its own line, now (before the
        rest is spent), not when the run ends."""
        while self._learnt:
            self.bar.note(self._learnt.pop(0))

    def _send(self, waiting: list[tuple[PieceState, int]]) -> None:
        """Submit the waiting jobs the gates let through (the rest stay in ``waiting``)."""
        if not waiting:
            return
        run = self.run
        if not run.contacted:
            if not self.pending:  # the run's first request, alone
                self._submit(waiting.pop(0), gate=True)
            return
        frontier = run.frontier()
        looked = self._held if self._gate is not None and frontier == self._frontier else 0
        held = waiting[:looked]  # beyond at the last look, and nothing moved since
        for job in waiting[looked:]:
            if run.beyond(*job):
                held.append(job)
            else:
                self._submit(job)
        if held and self._gate is None:
            first = run.first_beyond(held)
            held.remove(first)
            self._submit(first, gate=True)
        waiting[:] = held
        self._held, self._frontier = len(held), frontier

    def _submit(self, job: tuple[PieceState, int], gate: bool = False) -> None:
        future = self.pool.submit(self.run.fetch, *job)
        self.pending[future] = job
        if gate:
            self._gate = future

    def abort(self) -> None:
        """Stop: nothing starts after this; requests on the wire are kept or abandoned.

        Waits at most the client's response deadline (plus a second) for requests already
        sent; an interrupt while waiting is not caught (a second Ctrl-C exits at once).
        """
        self.run.stop.set()
        for future in self.pending:
            future.cancel()
        self.pool.shutdown(wait=False, cancel_futures=True)
        self._drain(self.pending)
        self.pending = {}
        self._gate = None

    def _settle(
        self, future: Future[tuple[Page, int]], state: PieceState, page_no: int
    ) -> list[int]:
        """Record one finished job; returns pages of this piece to fetch again, if any."""
        try:
            page, calls = future.result()
        except (Stopped, Cancelled):
            return []  # not started, or stopped before sending: nothing was spent
        except BaseException as exc:  # noqa: BLE001 - kept, the run stops after it
            state.unanswered(int(getattr(exc, "calls", 0)))
            return self._failed(state, page_no, exc)
        state.fetched(calls)
        if calls:
            self.run.answered_ok()
            self._read_ids(page)
        self.run.answered(state, page_no)
        if page_no == 1 and state.rows is None:
            state.counted(page)
            self._keep(state, page_no, page)
            return state.missing() if state.refetches else []  # fetched again: finish it
        if state.rows is None or state.failure is not None:
            return []  # a page of the answer this piece was fetched again to replace
        if (page.rows, page.pages) != (state.rows, state.pages):
            return [] if self.run.stop.is_set() else self._refetch(state, page)
        if self._overlaps(state, page_no, page):
            return self._check_order(state, page_no, page)
        slipped = self._slipped(state, page_no, page)
        if slipped is not None:
            return self._contradicts(state, slipped)
        self._keep(state, page_no, page)
        return []

    def _drain(self, pending: dict[Future[tuple[Page, int]], tuple[PieceState, int]]) -> None:
        """Keep what requests on the wire bring back (or abandon them after their timeout)."""
        running = {f: job for f, job in pending.items() if not f.cancelled()}
        finished, _ = wait(running, timeout=self.run.client.response_deadline + 1.0)
        for future in finished:
            state, page = running[future]
            self._settle(future, state, page)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self._say_learnt()
        if self.run.client.tell == self._learnt.append:
            self.run.client.tell = None
