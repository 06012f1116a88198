"""The request log as a table: the rows of ``requests`` for one key, typed for reading."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = ["REQUEST_COLUMNS", "request_frame"]

#: The columns of the request log a reader is given, in order.
REQUEST_COLUMNS = ("time", "path", "polygon_sha256", "page", "status", "counted")


def request_frame(rows: Iterable[Any]) -> pd.DataFrame:
    """``rows`` of the request log (mappings with :data:`REQUEST_COLUMNS`) as a frame.

    Parameters
    ----------
    rows
        Rows as the store's cursor returns them, oldest first.

    Returns
    -------
    pandas.DataFrame
        ``time`` (UTC), ``path``, ``polygon_sha256``, ``page`` (nullable integers),
        ``status``, ``counted`` (booleans).
    """
    columns = list(REQUEST_COLUMNS)
    frame = pd.DataFrame([[r[c] for c in columns] for r in rows], columns=columns)
    frame["time"] = pd.to_datetime(frame["time"].astype(float), unit="s", utc=True)
    frame["page"] = frame["page"].astype("Int64")
    frame["status"] = frame["status"].astype("int64")
    frame["counted"] = frame["counted"].astype(bool)
    return frame
