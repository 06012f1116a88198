"""searchPolygon and page parsing: accepted forms, normalisation, every refusal."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parcelsearch._wire import ring_json
from parcelsearch_service.errors import BadRequestError
from parcelsearch_service.polygon import parse_page, parse_polygon

SQUARE = [[-97.5, 32.25], [-97.4, 32.25], [-97.4, 32.3], [-97.5, 32.3], [-97.5, 32.25]]


def test_one_ring_and_vendor_form_are_the_same_polygon() -> None:
    flat = parse_polygon(json.dumps(SQUARE))
    nested = parse_polygon(json.dumps([SQUARE]))
    assert flat.normalised == nested.normalised
    assert flat.polygon.equals(nested.polygon)


def test_normalised_text_is_the_toolkits_canonical_ring() -> None:
    text = ring_json(SQUARE)
    parsed = parse_polygon(json.dumps(SQUARE, indent=2))
    assert parsed.normalised == text
    assert parsed.sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_integers_and_floats_normalise_alike() -> None:
    ints = parse_polygon("[[0,0],[1,0],[1,1],[0,0]]")
    floats = parse_polygon("[[0.0,0.0],[1.0,0],[1,1.0],[0,-0.0]]")
    assert ints.normalised == floats.normalised == "[[0,0],[1,0],[1,1],[0,0]]"


def test_holes_subtract() -> None:
    hole = [[-97.48, 32.26], [-97.42, 32.26], [-97.42, 32.28], [-97.48, 32.26]]
    parsed = parse_polygon(json.dumps([SQUARE, hole]))
    assert len(parsed.polygon.interiors) == 1
    assert parsed.polygon.area < parse_polygon(json.dumps(SQUARE)).polygon.area
    assert parsed.normalised.startswith("[[[")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        pytest.param(None, "searchPolygon is missing", id="missing"),
        pytest.param("  ", "searchPolygon is missing", id="blank"),
        pytest.param("[[0,0],[1,0]", r"not valid JSON \(Expecting", id="truncated"),
        pytest.param("[" * 100_000, "not valid JSON", id="deep-nesting"),
        pytest.param(
            "42",
            "must be a JSON array of \\[longitude, latitude\\] points, got a number",
            id="number",
        ),
        pytest.param("[]", "empty array", id="empty"),
        pytest.param("[0,0,1,0,1,1,0,0]", "wrap each pair in brackets", id="flat"),
        pytest.param("[[[[0,0]]]]", "too many levels of brackets", id="multipolygon"),
        pytest.param("[[[0,0],[1,0],[1,1],[0,0]],5]", "ring 2 is a number", id="ring-number"),
        pytest.param("[[0,0],[1],[1,1],[0,0]]", "point 2 must be a pair", id="one-value"),
        pytest.param('[[0,0],["1",0],[1,1],[0,0]]', "longitude that is a string", id="string"),
        pytest.param("[[0,0],[1,null],[1,1],[0,0]]", "latitude that is null", id="null"),
        pytest.param("[[0,0],[1,NaN],[1,1],[0,0]]", "not a finite number \\(NaN\\)", id="nan"),
        pytest.param("[[0,0],[-Infinity,0],[1,1],[0,0]]", "not a finite number", id="-inf"),
        pytest.param("[[0,0],[181,0],[1,1],[0,0]]", "longitude 181 outside", id="lon"),
        pytest.param("[[0,0],[32.5,-97.5],[1,1],[0,0]]", "did you swap them", id="swapped"),
        pytest.param(
            f"[[0,0],[1{'0' * 400},0],[1,1],[0,0]]",
            "longitude 10+… outside",
            id="integer-beyond-float",
        ),
        pytest.param(
            f"[[0,0],[1,-1{'0' * 400}],[1,1],[0,0]]",
            "latitude -10+… outside",
            id="negative-integer-beyond-float",
        ),
        pytest.param("[[0,0],[true,0],[1,1],[0,0]]", "longitude that is a boolean", id="bool"),
        pytest.param("[[0,0],[1,0],[0,0]]", "has 3 points; a ring needs at least 4", id="short"),
        pytest.param(
            "[[0,0],[1,0],[1,1],[0,1]]",
            "ring is not closed: first point \\[0,0\\] "
            "differs from last point \\[0,1\\]; repeat the first point at the end",
            id="unclosed",
        ),
        pytest.param(
            "[[0,0],[2,2],[2,0],[0,2],[0,0]]",
            "self-intersecting \\(Self-intersection",
            id="bow-tie",
        ),
        pytest.param("[[1,1],[1,1],[1,1],[1,1]]", "encloses no area", id="one-point"),
        pytest.param(
            "[[[0,0],[4,0],[4,4],[0,0]],[[1,1],[2,1],[2,2]]]",
            "ring 2 \\(hole 1\\) has 3 points",
            id="short-hole",
        ),
        pytest.param(
            "[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[5,1],[5,2],[1,1]]]",
            "not a valid polygon",
            id="hole-crosses",
        ),
    ],
)
def test_refusals(text: str | None, match: str) -> None:
    with pytest.raises(BadRequestError, match=match) as info:
        parse_polygon(text)
    assert info.value.status == 400
    assert info.value.messages == [str(info.value)]


@pytest.mark.parametrize(
    ("text", "page"),
    [
        pytest.param(None, 1, id="default"),
        pytest.param("3", 3, id="three"),
        pytest.param("007", 7, id="leading-zeros"),
    ],
)
def test_page(text: str | None, page: int) -> None:
    assert parse_page(text) == page


@pytest.mark.parametrize(
    ("text", "match"),
    [
        pytest.param("0", "positive whole number", id="zero"),
        pytest.param("-2", "positive whole number", id="negative"),
        pytest.param("2.0", "positive whole number", id="decimal"),
        pytest.param("", "positive whole number", id="empty"),
        pytest.param("1" * 5000, "beyond the last page", id="huge"),
    ],
)
def test_page_refusals(text: str, match: str) -> None:
    with pytest.raises(BadRequestError, match=match):
        parse_page(text)


@given(st.text(max_size=200))
def test_any_text_is_a_polygon_or_a_400(text: str) -> None:
    try:
        parse_polygon(text)
    except BadRequestError as exc:
        assert exc.status == 400 and exc.messages


@given(st.floats(-179, 179), st.floats(-89, 89), st.floats(1e-5, 0.5), st.floats(1e-5, 0.5))
def test_any_rectangle_parses(x: float, y: float, w: float, h: float) -> None:
    ring = [[x, y], [x + w, y], [x + w, y + h], [x, y + h], [x, y]]
    parsed = parse_polygon(json.dumps(ring))
    assert parsed.polygon.area == pytest.approx(w * h, rel=1e-6)
    assert parse_polygon(parsed.normalised).normalised == parsed.normalised


def _shortest(value: float) -> str:
    """The normalised form of one coordinate, as specified: its shortest round-trip text,
    integral values without ``.0``, zero without a sign."""
    text = repr(float(value))
    text = text[:-2] if text.endswith(".0") else text
    return "0" if text == "-0" else text


def _coordinate(limit: int) -> st.SearchStrategy[float | int]:
    return st.one_of(
        st.floats(-limit, limit),
        st.integers(-limit, limit),
        st.sampled_from([-0.0, 0.0, 1e-05, -2.5e-07, 32.0, -85.0]),
    )


@settings(max_examples=300, deadline=None)
@given(x=_coordinate(170), y=_coordinate(85), width=st.floats(1e-6, 5), height=st.floats(1e-6, 5))
def test_the_normalised_text_writes_each_coordinate_in_its_shortest_form(
    x: float, y: float, width: float, height: float
) -> None:
    ring = [[x, y], [x + width, y], [x + width, y + height], [x, y + height], [x, y]]
    parsed = parse_polygon(json.dumps(ring))
    expected = "[" + ",".join(f"[{_shortest(a)},{_shortest(b)}]" for a, b in ring) + "]"
    assert parsed.normalised == expected
    assert parsed.bounds == (float(x), float(y), float(x + width), float(y + height))
