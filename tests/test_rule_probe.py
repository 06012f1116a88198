"""The sliver learn_match_rule sends: one grid step tall, at most a kilometre long, across
the largest part of the areas (the call itself: tests/e2e/test_match_rule.py)."""

from __future__ import annotations

import json

import pytest
import shapely
from shapely import MultiPolygon, box

from parcelsearch.rule_probe import SLIVER_M, sliver


@pytest.mark.parametrize(
    "area",
    [
        box(-97.5, 32.7, -97.4, 32.8),  # 9 km wide: the sliver is cut to a kilometre
        MultiPolygon([box(0, 0, 0.001, 0.001), box(0.01, 0, 0.02, 0.005)]),  # the larger part
        box(10, 10, 10.0000004, 10.1),  # narrower than a grid step: one step wide
    ],
)
def test_the_sliver_is_one_grid_step_tall_across_the_largest_part(area):
    ring = json.loads(sliver([area]))
    polygon = shapely.Polygon(ring)
    assert polygon.is_valid and len(ring) == 5
    (x0, y0), (x1, _), (_, y1) = ring[:3]
    assert round(y1 - y0, 6) == 1e-6 and x1 > x0
    assert (x1 - x0) * 111_320 * 0.8 <= SLIVER_M
    largest = max(shapely.get_parts(area), key=lambda p: p.area)
    assert polygon.intersects(largest)
