"""How the commands print: counts of things, and tables of rows on the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from parcelsearch._shared import plural

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["plural", "print_table"]


def print_table(frame: pd.DataFrame, where: str = "") -> None:
    """``frame`` as a terminal table of areas (the first rows; ``where`` the rest are)."""
    from parcelsearch import outputs  # lazy: geopandas, pyarrow

    print(outputs.terminal_table(frame, noun="area", where=where))
