"""Fewer vertices within a distance of a line: straight segments placed freely (not only
through the line's own vertices), for tolerance mode's covers.

Douglas–Peucker keeps a subset of the line's vertices, so every kept segment starts and
ends *on* the line and may stray from it by the distance on one side only. A segment
whose ends may sit anywhere within the distance can stray on both sides: along a smooth
curve it may be about √2 times as long. :func:`fitted` walks the line once and stretches
each segment as far as one straight line can pass within the distance of every vertex in
order (the *cone* of directions from the segment's start that does so: Sklansky and
Gonzalez 1980, Zhao and Saalfeld 1997); the segment ends at the foot of the farthest of
those vertices, which starts the next one (fewer vertices than Douglas–Peucker at the same
distance, in about the same time: ``docs/guide/planning.md``, "Figures behind these choices").

Why the fitted line stays within the distance of the line (what
:func:`parcelsearch.planning.tiling.covers.cover` relies on; the tests check it on random
lines): ``docs/guide/planning.md``, "How a tolerance cover is made".
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["fitted"]


def fitted(xy: np.ndarray, distance: float) -> np.ndarray:
    """An open line of fewer vertices, from ``xy[0]`` to ``xy[-1]``, passing within
    ``distance`` of every vertex of ``xy`` in order.

    Parameters
    ----------
    xy
        ``(n, 2)`` vertices of an open line (a ring's first and last vertex are kept as
        they are, so a closed ring stays closed).
    distance
        Greatest distance from a vertex of ``xy`` to the fitted segment it belongs to, in
        the units of ``xy``; positive.

    Returns
    -------
    numpy.ndarray
        ``(m, 2)`` vertices, ``m ≤ n``; its ends are ``xy``'s ends.

    Examples
    --------
    >>> arc = np.column_stack([np.linspace(0, 10, 21), np.sin(np.linspace(0, 3.14, 21))])
    >>> len(fitted(arc, 0.3)), len(fitted(arc, 1.1))
    (3, 2)
    """
    xs = xy[:, 0].tolist()
    ys = xy[:, 1].tolist()
    out = [(xs[0], ys[0])]
    start = 0
    while start < len(xs) - 1:
        start, vertex = _segment(xs, ys, out[-1], start + 1, distance)
        if vertex is not None:
            out.append(vertex)
    out.append((xs[-1], ys[-1]))
    return np.asarray(out)


def _segment(
    xs: list[float], ys: list[float], origin: tuple[float, float], first: int, distance: float
) -> tuple[int, tuple[float, float] | None]:
    """The longest segment from ``origin`` passing within ``distance`` of the vertices from
    ``first`` on, in order: the index of the last vertex it serves and its end point.

    The segment serves the vertices up to the farthest along it and ends at that vertex's
    foot, so it never runs past the vertices it serves and the next segment starts beside
    the next vertex (a line that turns back, into a narrow inlet and out, is followed in
    and out). ``None`` for the end point when the segment runs straight to the line's last
    vertex."""
    sx, sy = origin
    n = len(xs)
    bx = by = 0.0  # the direction angles are measured from: to the first vertex off the origin
    lo, hi = -math.inf, math.inf
    hypot, atan2, asin = math.hypot, math.atan2, math.asin  # local names: a hot loop
    k = first
    while k < n:
        dx, dy = xs[k] - sx, ys[k] - sy
        r = hypot(dx, dy)
        if r > distance:
            if not (bx or by):
                bx, by = dx / r, dy / r
            angle = atan2(bx * dy - by * dx, bx * dx + by * dy)
            spread = asin(distance / r)
            low, high = angle - spread, angle + spread
            if low < lo:
                low = lo
            if high > hi:
                high = hi
            if low > high:
                break
            lo, hi = low, high
        k += 1
    last = k - 1
    if not (bx or by):  # every vertex left lies within the distance of the origin
        return last, None
    heading = math.atan2(by, bx) + (lo + hi) / 2
    ux, uy = math.cos(heading), math.sin(heading)
    farthest, reach = first, -math.inf
    for j in range(first, last + 1):  # the farthest foot along the heading (the first of ties)
        foot = (xs[j] - sx) * ux + (ys[j] - sy) * uy
        if foot > reach:
            farthest, reach = j, foot
    if farthest == n - 1:
        dx, dy = xs[-1] - sx, ys[-1] - sy
        if lo <= math.atan2(bx * dy - by * dx, bx * dx + by * dy) <= hi:
            return farthest, None
    return farthest, (sx + reach * ux, sy + reach * uy)
