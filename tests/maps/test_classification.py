"""Classes of parcels matched."""

from __future__ import annotations

from typing import Any

import pytest

from parcelsearch import maps


@pytest.mark.parametrize(
    ("values", "breaks"),
    [
        pytest.param([], [], id="empty"),
        pytest.param([0, 0, None], [], id="only-zero-and-missing"),
        pytest.param([5, 5, 5], [(1, 5)], id="one-value"),
        pytest.param([0, 1, 2, 3, 4, 5, 6, 7, 8], [(1, 2), (3, 4), (5, 6), (7, 8)], id="quartiles"),
        pytest.param([1, 1, 1, 1, 1, 1, 1, 900], [(1, 1), (2, 900)], id="skewed"),
        pytest.param([12, 250, 40], [(1, 12), (13, 40), (41, 250)], id="fewer-than-classes"),
    ],
)
def test_class_breaks(values: list[Any], breaks: list[tuple[int, int]]) -> None:
    assert maps.class_breaks(values) == breaks
