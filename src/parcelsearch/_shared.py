"""Small facts shared by the toolkit and the reference service: months, data files, counts.

The toolkit's ledger and the service's key store count calls per UTC calendar month; both
name a month the same way here. Bundled data files are found in one place. Every count a
user gives (a budget, workers, a key's quota) is checked by one rule, :func:`check_count`,
which both command lines translate into their flag dialect (:func:`count_argument`).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from parcelsearch.errors import ConfigurationError, Hint

__all__ = [
    "month_of",
    "next_month_start",
    "data_path",
    "check_count",
    "count_argument",
    "plural",
    "package_version",
]


def month_of(moment: datetime | float) -> str:
    """The calendar month (UTC) of a datetime or unix time, as ``YYYY-MM``."""
    if not isinstance(moment, datetime):  # the service asks once a call: no datetime made
        utc = time.gmtime(moment)
        return f"{utc.tm_year:04d}-{utc.tm_mon:02d}"
    return moment.astimezone(UTC).strftime("%Y-%m")


def next_month_start(moment: datetime | float) -> datetime:
    """The first instant (UTC) of the month after ``moment``: when a monthly quota resets."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    moment = moment.astimezone(UTC)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def data_path(name: str = "") -> Path:
    """Path of a bundled data file (``data/`` in the source tree), or of the folder itself.

    Raises
    ------
    FileNotFoundError
        When the named file is not bundled.
    """
    path = Path(str(resources.files("parcelsearch") / "data")) / name
    if not path.exists():
        raise FileNotFoundError(f"bundled data file {name!r} is missing from {path.parent}")
    return path


def check_count(value: object, minimum: int, name: str = "", hints: Sequence[Hint] = ()) -> int:
    """``value`` when it is a whole number (not a bool) of at least ``minimum``.

    Parameters
    ----------
    value
        What the user gave.
    minimum
        The smallest count allowed (0 or 1).
    name
        The argument's name, which starts the message (``budget must be …``); without one
        (an argparse type, where argparse names the flag) the message starts with ``must``.
    hints
        What to change, rendered in the dialect of where the value was given.

    Raises
    ------
    ConfigurationError
        ``[name] must be a whole number >= minimum, got value``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        subject = f"{name} must" if name else "must"
        raise ConfigurationError(
            f"{subject} be a whole number >= {minimum}, got {value!r}", hints=list(hints)
        )
    return value


def count_argument(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: the text as a count, by :func:`check_count`'s rule.

    The one error, spelled for the command line: ``argument --budget: must be a whole number
    >= 0, got -1``.
    """

    def parse(text: str) -> int:
        try:
            value: object = int(text)
        except ValueError:
            value = text
        try:
            return check_count(value, minimum)
        except ConfigurationError as exc:
            raise argparse.ArgumentTypeError(exc.render("cli")) from None

    return parse


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 piece"``, ``"2 pieces"``, ``"1 call"``, ``"0 calls"``: how both command lines
    print a count."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def package_version() -> str:
    """The installed distribution's version: pyproject.toml is the one place it is written."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("parcelsearch")
    except PackageNotFoundError:  # a source tree on sys.path that was never installed
        return "0+unknown"


#: Characters a terminal acts on rather than shows: C0 and C1 controls (escape sequences,
#: carriage returns, bells) and the bidirectional overrides that reorder a line.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str, keep: str = "") -> str:
    """``text`` safe to print on a terminal (what a store or a vendor wrote is shown, never
    run): each control character but those in ``keep`` as its escape (``\\x1b``)."""
    return _CONTROLS.sub(
        lambda m: (
            m.group() if m.group() in keep else m.group().encode("unicode_escape").decode("ascii")
        ),
        text,
    )
