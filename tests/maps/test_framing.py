"""First views: one view when the areas are close, one panel per group when far apart."""

from __future__ import annotations

import pytest

from parcelsearch.maps.framing import MAX_PANELS, MIN_PX, first_views, focus_of
from parcelsearch.maps.spec import PANEL_SIZE, WIDGET_SIZE, Bounds, pixels, union, view_of


def square(x: float, y: float, side: float = 0.01) -> Bounds:
    return (x, y, x + side, y + side)


def test_close_areas_share_one_view() -> None:
    subjects = [("a", square(0, 0)), ("b", square(0.02, 0))]
    assert first_views(subjects, union(*(b for _, b in subjects))) == ()


def test_far_areas_get_a_panel_per_group_each_area_big_enough() -> None:
    subjects = [("a", square(-99.74, 32.44)), ("b", square(-99.72, 32.45)),
                ("c", square(-97.55, 32.82)), ("d", square(-116.2, 43.6))]
    views = first_views(subjects, union(*(b for _, b in subjects)))
    assert [v.title for v in views] == ["a, b", "c", "d"]
    for view in views:
        _, zoom = view_of(view.bounds, PANEL_SIZE)
        inside = [b for _, b in subjects if union(b, view.bounds) == view.bounds]
        assert inside and min(pixels(b, zoom) for b in inside) >= MIN_PX


def test_too_many_groups_fall_back_to_one_overview() -> None:
    subjects = [(str(i), square(i * 3.0, 0)) for i in range(MAX_PANELS + 1)]
    assert first_views(subjects, union(*(b for _, b in subjects))) == ()


@pytest.mark.parametrize("subjects", [[], [("a", square(0, 0))]])
def test_nothing_to_split(subjects: list[tuple[str, Bounds]]) -> None:
    assert first_views(subjects, square(0, 0)) == ()


def test_long_titles_are_shortened() -> None:
    subjects = [(f"area {i}", square(i * 0.002, 0, 0.001)) for i in range(5)]
    far = ("far", square(50, 50, 0.001))
    views = first_views([*subjects, far], union(*(b for _, b in [*subjects, far])))
    assert views[0].title == "area 0, area 1, area 2 and 2 more"


def test_close_areas_need_no_focus() -> None:
    subjects = [("a", square(0, 0)), ("b", square(0.02, 0))]
    assert focus_of(subjects, union(*(b for _, b in subjects))) is None


def test_a_single_map_opens_on_the_densest_cluster_each_area_readable() -> None:
    """Two areas here, three there: the map opens on the three, each readable."""
    subjects = [(f"w{i}", square(-99.74 + 0.02 * i, 32.44)) for i in range(2)]
    subjects += [(f"e{i}", square(-80.0 + 0.02 * i, 40.0)) for i in range(3)]
    focus = focus_of(subjects, union(*(b for _, b in subjects)))
    assert focus is not None and focus.title == "e0, e1, e2"
    _, zoom = view_of(focus.bounds, WIDGET_SIZE)
    assert min(pixels(b, zoom) for _, b in subjects[2:]) >= MIN_PX


def test_many_areas_open_on_a_busy_cell_of_a_grid() -> None:
    """Over MAX_SUBJECTS areas (binned, not grouped): 40 scattered, 25 packed together."""
    subjects = [(f"w{i}", square(-120.0 + i, 30.0 + (i % 7))) for i in range(40)]
    subjects += [(f"e{i}-{k}", square(-80.0 + 0.011 * i, 40.0 + 0.011 * k))
                 for i in range(5) for k in range(5)]
    focus = focus_of(subjects, union(*(b for _, b in subjects)))
    assert focus is not None
    inside = [(label, b) for label, b in subjects if union(b, focus.bounds) == focus.bounds]
    assert len(inside) >= 2 and all(label.startswith("e") for label, _ in inside)
    _, zoom = view_of(focus.bounds, WIDGET_SIZE)
    assert min(pixels(b, zoom) for _, b in inside) >= MIN_PX
