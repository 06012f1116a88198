"""How the commands print: counts of things, and tables of rows on the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["plural", "print_table"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 piece"``, ``"2 pieces"``, ``"1 call"``, ``"0 calls"``."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def print_table(frame: pd.DataFrame, where: str = "") -> None:
    """``frame`` as a terminal table of areas (the first rows; ``where`` the rest are)."""
    from parcelsearch import outputs  # lazy: geopandas, pyarrow

    print(outputs.terminal_table(frame, noun="area", where=where))
