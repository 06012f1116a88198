"""What a search shows while it runs: price lines, each whole on its own line, and one
progress bar per phase, made with its total known.

A price line is printed only while no bar is open (the bar of the phase before is closed
first), so a log never holds a line cut by a bar's carriage return. Each bar is made with
its total (tqdm's notebook widget sizes itself from the total it is made with, so a bar
made with ``total=None`` stays a 20-pixel square, full from the start). In a Jupyter
kernel the lines go to stdout (JupyterLab shows stderr as a pink warning block), else to
stderr, away from a command's output.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from tqdm.auto import tqdm

from parcelsearch import notices
from parcelsearch.notices import ParcelSearchWarning

__all__ = ["Progress", "stream", "in_kernel"]


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (its shell is IPython's ZMQ one)."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def stream() -> TextIO:
    """Where price lines and notices go: stdout in a Jupyter kernel, else stderr."""
    return sys.stdout if in_kernel() else sys.stderr


class Progress:
    """The phases' bars (one at a time) and the lines between them; silent when not
    ``shown``. :class:`~parcelsearch._run.page_pool.Fetcher` calls :meth:`update` and
    grows :attr:`total` when a piece is fetched again."""

    def __init__(self, shown: bool) -> None:
        self.shown = shown
        self._bar: Any = None

    def start(self, label: str, total: int, done: int = 0) -> None:
        """A new bar for a phase of ``total`` pages, ``done`` of them already there."""
        self.close()
        if self.shown:
            self._bar = tqdm(total=total, initial=done, desc=label, unit=" page", file=stream())

    def say(self, line: str) -> None:
        """A whole line (the bar before it closed first)."""
        if self.shown:
            self.close()
            print(line, file=stream(), flush=True)

    def note(self, warning: ParcelSearchWarning) -> None:
        """Issue ``warning`` now, on its own line: an open bar is cleared while it is shown
        (where warnings are shown as they come) and drawn again below it."""
        if self._bar is None:
            notices.warn(warning)
            return
        with tqdm.external_write_mode(file=stream()):
            notices.warn(warning)

    def update(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    @property
    def total(self) -> int:
        return int(self._bar.total) if self._bar is not None else 0

    @total.setter
    def total(self, value: int) -> None:
        if self._bar is not None:
            self._bar.total = value

    def refresh(self) -> None:
        if self._bar is not None:
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
