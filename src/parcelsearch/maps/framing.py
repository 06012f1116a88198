"""First views that show the pieces: one view when the areas are close, else small multiples.

Study areas a few kilometres across but hundreds of kilometres apart fit one view only as
specks. :func:`first_views` groups areas that can share a panel (each still at least
``MIN_PX`` pixels across) and returns one :class:`View` per group; an empty tuple means one
view fitted to everything shows every area well enough. A single interactive map cannot show
panels: it opens fitted to every area but its :func:`outliers` (areas far from all the
others, listed to go to), tiny areas shown by markers, or on the densest group when the areas
are towns far apart (:func:`focus_of`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from parcelsearch.maps.spec import (
    MAP_SIZE,
    PANEL_SIZE,
    WIDGET_SIZE,
    Bounds,
    View,
    mercator_y,
    pixels,
    union,
    view_of,
)

__all__ = [
    "MAX_PANELS",
    "MIN_PX",
    "OUTLIER_FACTOR",
    "SPECK_PX",
    "first_views",
    "focus_of",
    "outliers",
]

#: An area is "visible" in a view when its larger side spans at least this many pixels.
MIN_PX = 40
#: More groups than this → one overview (with markers) instead of a wall of panels.
MAX_PANELS = 9
#: Above this many areas, grouping is skipped (one overview): it costs O(n³).
MAX_SUBJECTS = 60
_LABELS_SHOWN = 3


@dataclass
class _Group:
    labels: list[str]
    bounds: Bounds
    smallest_px0: float  # the smallest member's larger side, in pixels at zoom 0


def _merged_zoom(a: _Group, b: _Group) -> tuple[int, Bounds] | None:
    """The panel zoom of ``a`` and ``b`` together, or None when a member would be a speck."""
    merged = union(a.bounds, b.bounds)
    _, zoom = view_of(merged, PANEL_SIZE)
    if min(a.smallest_px0, b.smallest_px0) * 2**zoom < MIN_PX:
        return None
    return zoom, merged


def _closest_pair(groups: Sequence[_Group]) -> tuple[int, int, Bounds] | None:
    """The two groups whose shared panel zooms in furthest (None: no pair can share)."""
    best: tuple[int, int, int, Bounds] | None = None
    for i, a in enumerate(groups):
        for j in range(i + 1, len(groups)):
            merged = _merged_zoom(a, groups[j])
            if merged is not None and (best is None or merged[0] > best[0]):
                best = (merged[0], i, j, merged[1])
    return None if best is None else best[1:]


def _title(labels: Sequence[str]) -> str:
    shown = ", ".join(labels[:_LABELS_SHOWN])
    more = len(labels) - _LABELS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def first_views(subjects: Sequence[tuple[str, Bounds]], whole: Bounds | None) -> tuple[View, ...]:
    """Panels for ``subjects`` (label, bounds), or ``()`` when one view of ``whole`` will do.

    Parameters
    ----------
    subjects
        The things that must be visible (study areas, skipped areas), labelled for titles.
    whole
        The bounds of everything drawn.
    """
    if whole is None or len(subjects) < 2 or len(subjects) > MAX_SUBJECTS:
        return ()
    if _readable(subjects, whole, MAP_SIZE):
        return ()
    groups = _groups(subjects)
    if len(groups) < 2 or len(groups) > MAX_PANELS:
        return ()
    return tuple(View(_title(g.labels), g.bounds) for g in groups)


def _readable(subjects: Sequence[tuple[str, Bounds]], whole: Bounds, size: tuple[int, int]) -> bool:
    """Whether every subject spans ``MIN_PX`` pixels in one view of ``whole``."""
    _, zoom = view_of(whole, size)
    return all(pixels(b, zoom) >= MIN_PX for _, b in subjects)


def _groups(subjects: Sequence[tuple[str, Bounds]]) -> list[_Group]:
    """Subjects merged, closest first, while every member of a group stays readable."""
    groups = [_Group([label], b, pixels(b, 0)) for label, b in subjects]
    while (pair := _closest_pair(groups)) is not None:
        i, j, merged = pair
        a, b = groups[i], groups.pop(j)
        groups[i] = _Group([*a.labels, *b.labels], merged, min(a.smallest_px0, b.smallest_px0))
    return groups


#: An area whose centre lies farther than this many times the areas' typical distance from
#: their median centre (or their typical size, when larger) is an outlier: a map fitted to the
#: others opens on them, and the outlier is listed to go to.
OUTLIER_FACTOR = 10.0


def _centre(b: Bounds) -> tuple[float, float]:
    """The centre of ``b`` as a share of the Web-Mercator world (x, y)."""
    return (
        ((b[0] + b[2]) / 2 + 180) / 360,
        (math.pi - (mercator_y(b[1]) + mercator_y(b[3])) / 2) / (2 * math.pi),
    )


def outliers(subjects: Sequence[tuple[str, Bounds]]) -> list[tuple[str, Bounds]]:
    """The subjects far from all the others: farther from the subjects' median centre than
    :data:`OUTLIER_FACTOR` times the median distance to it (or the median subject's size,
    when larger). Fewer than three subjects have none. O(n).

    Examples
    --------
    >>> near = [(f"a{i}", (-97.74 + 0.02 * i, 30.27, -97.73 + 0.02 * i, 30.28)) for i in range(3)]
    >>> [label for label, _ in outliers([*near, ("dallas", (-96.8, 32.78, -96.79, 32.79))])]
    ['dallas']
    """
    if len(subjects) < 3:
        return []
    centres = [_centre(b) for _, b in subjects]
    mx = sorted(x for x, _ in centres)[len(centres) // 2]
    my = sorted(y for _, y in centres)[len(centres) // 2]
    far = [math.hypot(x - mx, y - my) for x, y in centres]
    typical = max(
        sorted(far)[len(far) // 2],
        sorted(pixels(b, 0) / 256 for _, b in subjects)[len(subjects) // 2],
    )
    return [s for s, d in zip(subjects, far, strict=True) if d > OUTLIER_FACTOR * typical]


def _grid_cluster(subjects: Sequence[tuple[str, Bounds]]) -> list[tuple[str, Bounds]]:
    """The subjects in the busiest cell of a grid one panel across (O(n), for many subjects).

    The grid's zoom is the one at which the median subject spans ``MIN_PX`` pixels; a cell is
    then a panel's width, so its subjects share a readable view.
    """
    sizes = sorted(pixels(b, 0) for _, b in subjects)
    median = max(sizes[len(sizes) // 2], 1e-9)
    zoom = math.log2(MIN_PX / median)
    cell = PANEL_SIZE[1] / 256 / 2**zoom  # the cell's side, as a share of the world
    cells: dict[tuple[int, int], list[tuple[str, Bounds]]] = {}
    for label, b in subjects:
        x = ((b[0] + b[2]) / 2 + 180) / 360
        y = (math.pi - (mercator_y(b[1]) + mercator_y(b[3])) / 2) / (2 * math.pi)
        cells.setdefault((math.floor(x / cell), math.floor(y / cell)), []).append((label, b))
    return max(cells.values(), key=len)


#: A single map opens on the densest group of areas, not on all of them, when the typical
#: (median) area would span fewer pixels than this there (towns hundreds of kilometres
#: apart: under a pixel); closer areas (plots across a town, a county and its cities) open
#: fitted to every one, the specks marked by dots.
SPECK_PX = 2.0


def _densest(subjects: Sequence[tuple[str, Bounds]]) -> View:
    """The group of subjects that share a readable view and hold the most of them (ties: the
    first); binned on a grid over :data:`MAX_SUBJECTS` subjects."""
    if len(subjects) > MAX_SUBJECTS:
        cluster = _grid_cluster(subjects)
        return View(_title([label for label, _ in cluster]), union(*(b for _, b in cluster)))
    best = max(_groups(subjects), key=lambda g: len(g.labels))  # max keeps the first of ties
    return View(_title(best.labels), best.bounds)


def focus_of(subjects: Sequence[tuple[str, Bounds]], whole: Bounds | None) -> View | None:
    """The view one interactive map opens on, or None to open on ``whole``.

    Parameters
    ----------
    subjects
        The things that must be inside the first view (the areas but their
        :func:`outliers`, or the areas with changed pieces). Tiny ones are shown there by
        markers.
    whole
        The bounds of everything drawn.

    Returns
    -------
    View or None
        None when every subject is readable in one view of ``whole``; else the view fitted to
        every subject, or, when the typical subject would be under :data:`SPECK_PX` there
        (far-apart towns), their densest group (the others are in the go-to list).
    """
    if whole is None or not subjects:
        return None
    if _readable(subjects, whole, WIDGET_SIZE):
        return None
    every = union(*(b for _, b in subjects))
    _, zoom = view_of(every, WIDGET_SIZE)
    if sorted(pixels(b, zoom) for _, b in subjects)[len(subjects) // 2] < SPECK_PX:
        return _densest(subjects)
    return View(_title([label for label, _ in subjects]), every)
