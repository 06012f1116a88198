"""Warnings the toolkit gives on purpose: one sentence, spoken in the caller's dialect.

A :class:`ParcelSearchWarning` carries its advice as :class:`~parcelsearch.errors.Hint`
values, like an error does, so the same notice reads ``id_column='area_id'`` in Python and
``--id-column area_id`` on the command line (:meth:`ParcelSearchWarning.render`).

:func:`warn` attributes the warning to the first caller outside parcelsearch (the user's own
line in a script or notebook, never a line of the package). The command line shows these
warnings as ``parcelsearch: warning: …`` lines (:func:`as_messages`), never with a Python file
path or source line.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from parcelsearch.errors import Dialect, Hint, ParcelSearchError

__all__ = [
    "ParcelSearchWarning",
    "RowNumberIdsWarning",
    "NothingMatchedWarning",
    "CoordinatesWarning",
    "KeptFileWarning",
    "OldPagesWarning",
    "PartialResultWarning",
    "LearntFactWarning",
    "warn",
    "as_messages",
]

_PACKAGE = str(Path(__file__).resolve().parent)


class ParcelSearchWarning(UserWarning):
    """Base class of the warnings parcelsearch gives on purpose.

    Parameters
    ----------
    message
        What happened, one sentence.
    hints
        What the user can change (rendered as sentences in the caller's dialect).
    """

    def __init__(self, message: str, *, hints: Sequence[Hint] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hints = tuple(hints)

    def render(self, dialect: Dialect = "python") -> str:
        """The message and its hints spelled for ``dialect`` (as errors render)."""
        return ParcelSearchError(self.message, hints=self.hints).render(dialect)

    def __str__(self) -> str:
        return self.render("python")


class KeptFileWarning(ParcelSearchWarning):
    """Something kept in the cache folder (``vendors.json``, a kept plan) was not used as it
    stood: it failed a check, or stopped working, and is learnt or made again."""


class LearntFactWarning(ParcelSearchWarning):
    """A fact of the vendor learnt from its answers, not as assumed (its page size): kept
    in its profile, the run adapts (re-priced) and says so once."""


class RowNumberIdsWarning(ParcelSearchWarning):
    """The areas had no id column and no index of their own: row numbers are the ids."""


class NothingMatchedWarning(ParcelSearchWarning):
    """A search spent calls and matched no parcel at all."""


class PartialResultWarning(ParcelSearchWarning):
    """``allow_partial``: the search returned what fitted (``result.complete`` is ``False``);
    the message names what is missing and how to resume."""


class CoordinatesWarning(ParcelSearchWarning):
    """Coordinates that look wrongly placed (e.g. a CRS that puts them in the ocean)."""


class OldPagesWarning(ParcelSearchWarning):
    """A search served cached pages over a day old: says how old, and how to re-check them."""


def warn(warning: ParcelSearchWarning) -> None:
    """Issue ``warning`` at the first caller outside the parcelsearch package."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        warning,
        type(warning),
        frame.f_code.co_filename,
        frame.f_lineno,
        module=frame.f_globals.get("__name__"),
        registry=registry,
    )


@contextmanager
def as_messages(stream: Callable[[], TextIO] = lambda: sys.stderr) -> Iterator[None]:
    """Within the block, every warning is printed as one ``parcelsearch: warning: …`` line
    in the command line's dialect (flags and variables), without file paths."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = message.render("cli") if isinstance(message, ParcelSearchWarning) else str(message)
        print(f"parcelsearch: warning: {text}", file=stream(), flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always", ParcelSearchWarning)
        warnings.showwarning = show
        yield
