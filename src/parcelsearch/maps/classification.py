"""Classes of parcels matched per piece, and their colours."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from parcelsearch.maps.features import is_missing

__all__ = ["PALETTE", "class_breaks", "class_colour", "class_colours", "class_label"]

#: Sequential palette for parcels matched per piece (ColorBrewer YlGnBu, 5 classes): the first
#: colour is for pieces that matched nothing, the others for up to four classes of counts.
PALETTE = ("#ffffcc", "#a1dab4", "#41b6c4", "#2c7fb8", "#253494")


def class_breaks(values: Iterable[Any], classes: int = len(PALETTE) - 1) -> list[tuple[int, int]]:
    """Integer classes ``(low, high)`` for positive counts, by nearest-rank quantiles.

    Zero (and missing values) get no class here: the maps draw them apart. Every positive
    value falls in exactly one class; classes never overlap and there are at most ``classes``.

    Examples
    --------
    >>> class_breaks([0, 1, 2, 3, 4, 5, 6, 7, 8])
    [(1, 2), (3, 4), (5, 6), (7, 8)]
    >>> class_breaks([5, 5, 5])
    [(1, 5)]
    """
    positive = sorted(int(v) for v in values if not is_missing(v) and int(v) > 0)
    if not positive:
        return []
    n = len(positive)
    uppers = sorted({positive[math.ceil(n * k / classes) - 1] for k in range(1, classes + 1)})
    lows = [1, *(u + 1 for u in uppers[:-1])]
    return list(zip(lows, uppers, strict=True))


def class_label(low: int, high: int) -> str:
    """``"3"`` or ``"3–7"``."""
    return f"{low:,}" if low == high else f"{low:,}–{high:,}"


def class_colour(rows: int, breaks: Sequence[tuple[int, int]]) -> str:
    """The palette colour for ``rows``: the first for zero, then spread over the classes."""
    if rows <= 0:
        return PALETTE[0]
    index = next(i for i, (_, high) in enumerate(breaks) if rows <= high)
    return class_colours(len(breaks))[index]


def class_colours(n: int) -> tuple[str, ...]:
    """``n`` colours of the palette (after the zero colour), spread from light to dark."""
    ramp = PALETTE[1:]
    if n >= len(ramp):
        return ramp
    return tuple(ramp[round(i * (len(ramp) - 1) / max(n - 1, 1))] for i in range(n))
