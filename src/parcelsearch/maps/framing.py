"""First views that show the pieces: one view when the areas are close, else small multiples.

Study areas a few kilometres across but hundreds of kilometres apart fit one view only as
specks. :func:`first_views` groups areas that can share a panel (each still at least
``MIN_PX`` pixels across) and returns one :class:`View` per group; an empty tuple means one
view fitted to everything shows every area well enough.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parcelsearch.maps.spec import MAP_SIZE, PANEL_SIZE, Bounds, View, pixels, union, view_of

__all__ = ["MAX_PANELS", "MIN_PX", "first_views"]

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


def first_views(subjects: Sequence[tuple[str, Bounds]], whole: Bounds | None
                ) -> tuple[View, ...]:
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
    _, zoom = view_of(whole, MAP_SIZE)
    if all(pixels(b, zoom) >= MIN_PX for _, b in subjects):
        return ()
    groups = [_Group([label], b, pixels(b, 0)) for label, b in subjects]
    while (pair := _closest_pair(groups)) is not None:
        i, j, merged = pair
        a, b = groups[i], groups.pop(j)
        groups[i] = _Group([*a.labels, *b.labels], merged, min(a.smallest_px0, b.smallest_px0))
    if len(groups) < 2 or len(groups) > MAX_PANELS:
        return ()
    return tuple(View(_title(g.labels), g.bounds) for g in groups)
