"""Request bytes and cache keys: one definition for planner, client and cache."""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from parcelsearch import _wire

coords = st.tuples(st.floats(-180, 180), st.floats(-90, 90))


def test_doctests() -> None:
    assert doctest.testmod(_wire).failed == 0


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(-0.0000001, "0", id="negative-zero"),
        pytest.param(1e-6, "0.000001", id="no-exponent"),
        pytest.param(-97.5, "-97.5", id="trailing-zeros"),
        pytest.param(12.3456789, "12.345679", id="rounded"),
        pytest.param(180.0, "180", id="integer"),
    ],
)
def test_format_coord(value: float, text: str) -> None:
    assert _wire.format_coord(value) == text


@given(st.lists(coords, min_size=1, max_size=50))
def test_ring_json_is_json_and_rounds(points: list[tuple[float, float]]) -> None:
    parsed = json.loads(_wire.ring_json(points))
    assert len(parsed) == len(points)
    for (x, y), (px, py) in zip(points, parsed, strict=True):
        assert abs(px - x) <= 5e-7 + 1e-12 and abs(py - y) <= 5e-7 + 1e-12


@given(st.lists(coords, max_size=50), st.booleans(), st.integers(0, 8))
def test_ring_json_is_format_coord_of_every_number(points, with_z, decimals) -> None:
    """ring_json formats the whole ring at once: the text of format_coord for every
    coordinate, a third coordinate ignored, any number of decimals."""
    ring = [(x, y, 7.0) if with_z else (x, y) for x, y in points]
    expected = (
        "["
        + ",".join(
            f"[{_wire.format_coord(x, decimals)},{_wire.format_coord(y, decimals)}]"
            for x, y in points
        )
        + "]"
    )
    assert _wire.ring_json(ring, decimals) == expected
    assert _wire.ring_json(iter(ring), decimals) == expected  # an iterator, read once
    assert _wire.ring_json([*ring, (0.5, 0.25, 1.0, 2.0)], decimals).startswith(expected[:-1])


@given(st.lists(coords, min_size=1, max_size=50), st.integers(1, 99999))
def test_vertex_bytes_add_up_to_the_request_line(points, page) -> None:
    target = _wire.search_target("/v1/search", _wire.ring_json(points), page)
    fixed = _wire.request_line_bytes(_wire.search_target("/v1/search", "[]", page))
    assert (
        _wire.request_line_bytes(target)
        == fixed + sum(_wire.vertex_bytes(x, y) for x, y in points) - 1
    )


@given(st.lists(coords, min_size=1, max_size=50), st.integers(1, 99999))
def test_search_target_bytes_counts_the_line_without_quoting_it(points, page) -> None:
    text = _wire.ring_json(points)
    line = _wire.request_line_bytes(_wire.search_target("/v1/search", text, page))
    assert _wire.search_target_bytes("/v1/search", text, page) == line


@pytest.mark.slow
@given(st.text(max_size=40))
def test_quoted_length_of_any_text_is_that_of_quote(text: str) -> None:
    """Not a ring's JSON (spaces, letters, non-ASCII): quoted as it is, then counted."""
    target = _wire.search_target("/p", text, 1)
    assert _wire.search_target_bytes("/p", text, 1) == _wire.request_line_bytes(target)


def test_request_key_ignores_trailing_slash_and_separates_parts() -> None:
    a = _wire.request_key("https://x/", "/v1/search", "[]", 1)
    assert a == _wire.request_key("https://x", "/v1/search", "[]", 1)
    assert a != _wire.request_key("https://x", "/v1/search", "[]", 2)
    split_differently = _wire.request_key("https://x", "/ab", "", 1)
    assert _wire.request_key("https://x", "/a", "b", 1) != split_differently


@given(st.lists(coords, min_size=1, max_size=50))
def test_vertex_bytes_array_is_vertex_bytes_for_every_row(points) -> None:
    got = _wire.vertex_bytes_array(np.array(points, dtype=float))
    assert got.tolist() == [_wire.vertex_bytes(x, y) for x, y in points]


@pytest.mark.parametrize(
    "value",
    [0.0, -0.0, 4e-7, -4e-7, 5e-7, -5e-7, 1.5e-6, 2.5e-6, 12.3456785, 179.9999995, -180.0, 540.0],
)
def test_vertex_bytes_array_on_ties_and_signs(value: float) -> None:
    assert _wire.vertex_bytes_array(np.array([[value, -value]]))[0] == _wire.vertex_bytes(
        value, -value
    )
