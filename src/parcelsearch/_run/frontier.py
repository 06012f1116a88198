"""The frontier gates of one run: the deepest page and the longest request line the vendor
answered, beyond which a request waits while another is on the wire (a result window or a
request-line limit is refused once).
"""

from __future__ import annotations

import threading
from typing import Any

from parcelsearch._run.piece_state import PieceState
from parcelsearch.client import Client


class FrontierGates:
    """What :class:`~parcelsearch._run.fetching.Run` knows of the frontier, and its gates."""

    client: Client
    path: str
    lock: threading.Lock
    deepest: int
    longest: int
    window_bound: bool
    _lines: dict[str, int]

    def line(self, state: PieceState, page: int) -> int:
        """The request line (bytes) page ``page`` of this piece is sent with."""
        ring = state.piece.polygon_json
        first = self._lines.get(ring)
        if first is None:
            first = self._lines[ring] = self.client.line_bytes(ring, 1, path=self.path)
        base = self.client.page_base
        return first + len(str(page - 1 + base)) - len(str(base))

    def answered(self, state: PieceState, page: int) -> None:
        """The vendor answered page ``page`` of this piece (now or when it was stored): the
        frontier moves out to it."""
        line = self.line(state, page)
        with self.lock:
            self.deepest = max(self.deepest, page)
            self.longest = max(self.longest, line)
            window = self.client.result_window
            if self.window_bound and window is not None and self.deepest >= window:
                self.window_bound = False  # answered as deep as the bound: it is the window

    def window_refused(self, page: int) -> None:
        """The vendor refused page ``page`` as beyond its result window: the window learnt
        is exact when its words stated it, or when ``page`` was the next after the deepest
        answered; else it is an upper bound, and the pages up to it are gated shallowest
        first (a second refusal, if any, is then at the next page: exact)."""
        window = self.client.result_window
        with self.lock:
            self.window_bound = window is not None and page - 1 <= window and window > self.deepest

    def beyond(self, state: PieceState, page: int) -> bool:
        """Whether this request goes beyond the frontier: deeper than any page answered
        (while the result window is not known exactly) or a longer line than any answered.
        Requests that will not be sent (beyond a window or line limit known) are not."""
        client = self.client
        window = client.result_window
        if window is not None and page > 1 and (page > window or (state.pages or 0) > window):
            return False
        line = self.line(state, page)
        if client.max_request_bytes_source == "learnt" and line > client.max_request_bytes:
            return False
        deep = page > self.deepest and (window is None or self.window_bound)
        return deep or line > self.longest

    def frontier(self) -> tuple[Any, ...]:
        """What :meth:`beyond` depends on, to tell when it may answer otherwise."""
        client = self.client
        return (
            self.deepest,
            self.longest,
            self.window_bound,
            client.result_window,
            client.max_request_bytes,
            client.max_request_bytes_source,
            client.page_base,
        )

    def first_beyond(self, held: list[tuple[PieceState, int]]) -> tuple[PieceState, int]:
        """Which of the requests beyond the frontier goes first: the deepest, then the
        longest line (answered, it opens the gate for every other; refused, it teaches what
        the vendor takes); while the window is an upper bound only, the shallowest, of the
        piece with the fewest pages (the likeliest to fit it, so its page is not wasted)."""

        def order(job: tuple[PieceState, int]) -> tuple[int, int, int]:
            state, page = job
            depth = page if page > self.deepest else 0
            if self.window_bound:
                return (-depth, -(state.pages or 0), self.line(state, page))
            return (depth, self.line(state, page), 0)

        return max(held, key=order)
