"""First views: one view when the areas are close, one panel per group when far apart."""

from __future__ import annotations

import pytest

from parcelsearch.maps.framing import MAX_PANELS, MIN_PX, first_views, focus_of, outliers
from parcelsearch.maps.spec import PANEL_SIZE, WIDGET_SIZE, Bounds, pixels, union, view_of


def square(x: float, y: float, side: float = 0.01) -> Bounds:
    return (x, y, x + side, y + side)


def test_close_areas_share_one_view() -> None:
    subjects = [("a", square(0, 0)), ("b", square(0.02, 0))]
    assert first_views(subjects, union(*(b for _, b in subjects))) == ()


def test_far_areas_get_a_panel_per_group_each_area_big_enough() -> None:
    subjects = [
        ("a", square(-99.74, 32.44)),
        ("b", square(-99.72, 32.45)),
        ("c", square(-97.55, 32.82)),
        ("d", square(-116.2, 43.6)),
    ]
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


def test_areas_far_from_all_the_others_are_outliers_and_the_rest_the_focus() -> None:
    """Two areas here, three 1,900 km away: the two are outliers (listed to go to), and a
    single map opens fitted to the three, each readable (issue 59)."""
    subjects = [(f"w{i}", square(-99.74 + 0.02 * i, 32.44)) for i in range(2)]
    subjects += [(f"e{i}", square(-80.0 + 0.02 * i, 40.0)) for i in range(3)]
    assert outliers(subjects) == subjects[:2]
    focus = focus_of(subjects[2:], union(*(b for _, b in subjects)))
    assert focus is not None and focus.title == "e0, e1, e2"
    _, zoom = view_of(focus.bounds, WIDGET_SIZE)
    assert min(pixels(b, zoom) for _, b in subjects[2:]) >= MIN_PX


def test_many_areas_open_on_a_busy_cell_of_a_grid() -> None:
    """Over MAX_SUBJECTS areas (binned, not grouped): 40 scattered, 25 packed together."""
    subjects = [(f"w{i}", square(-120.0 + i, 30.0 + (i % 7))) for i in range(40)]
    subjects += [
        (f"e{i}-{k}", square(-80.0 + 0.011 * i, 40.0 + 0.011 * k))
        for i in range(5)
        for k in range(5)
    ]
    focus = focus_of(subjects, union(*(b for _, b in subjects)))
    assert focus is not None
    inside = [(label, b) for label, b in subjects if union(b, focus.bounds) == focus.bounds]
    assert len(inside) >= 2 and all(label.startswith("e") for label, _ in inside)
    _, zoom = view_of(focus.bounds, WIDGET_SIZE)
    assert min(pixels(b, zoom) for _, b in inside) >= MIN_PX


def test_close_areas_not_all_readable_open_fitted_to_every_one() -> None:
    """Issue 59: 16 plots of 30 m over 3 km (specks at once) open fitted to all 16, not on
    the densest few; towns far apart still open on the densest group (above)."""
    subjects = [
        (f"p{k}", square(-0.1 + 0.0017 * ((7 * k) % 16), 51.45 + 0.0015 * ((5 * k) % 16), 0.0003))
        for k in range(16)
    ]
    whole = union(*(b for _, b in subjects))
    focus = focus_of(subjects, whole)
    assert focus is not None and focus.bounds == whole


@pytest.mark.parametrize(
    "subjects",
    [
        pytest.param([("a", square(0, 0)), ("b", square(5, 5))], id="two"),
        pytest.param(
            [(f"t{k}", square(0.003 * (k % 4), 0.003 * (k // 4))) for k in range(16)],
            id="sixteen-tiny",
        ),
    ],
)
def test_fewer_than_three_or_close_areas_have_no_outliers(
    subjects: list[tuple[str, Bounds]],
) -> None:
    assert outliers(subjects) == []
