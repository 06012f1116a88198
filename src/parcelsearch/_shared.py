"""Small facts shared by the toolkit and the reference service: calendar months and data files.

The toolkit's ledger and the service's key store count calls per UTC calendar month; both
name a month the same way here. Bundled data files are found in one place.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

__all__ = ["month_of", "next_month_start", "data_path"]


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
