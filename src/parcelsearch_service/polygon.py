"""Parse and validate the ``searchPolygon`` and ``page`` query parameters.

Two forms are accepted: one ring ``[[lon,lat],...]`` (the written spec) and the vendor's
example form ``[[[lon,lat],...], ...]`` whose first ring is the boundary and whose further
rings are holes. Every refusal is a :class:`~parcelsearch_service.errors.BadRequestError` (400)
whose message says what is wrong and how to fix it.

The *normalised* text of a polygon is the compact JSON of its rings, each coordinate in
its shortest round-trip form (``-97.5``, ``32``): for a ring sent in the toolkit's
canonical form (``parcelsearch._wire.ring_json``) it is that very text, so
``sha256(ring_json(ring))`` names the same polygon on both sides.

Examples
--------
>>> parsed = parse_polygon("[[-97.5,32.25],[-97.4,32.25],[-97.4,32.3],[-97.5,32.25]]")
>>> parsed.normalised
'[[-97.5,32.25],[-97.4,32.25],[-97.4,32.3],[-97.5,32.25]]'
>>> parse_page("2")
2
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import shapely
from shapely.geometry import Polygon

from parcelsearch_service.errors import BadRequestError

__all__ = ["ParsedPolygon", "parse_polygon", "parse_page", "bad_request", "EXAMPLE"]

#: A well-formed example shown in messages.
EXAMPLE = "[[-97.5,32.25],[-97.4,32.25],[-97.4,32.3],[-97.5,32.25]]"
_FORMS = (
    "send one ring [[lon,lat],...] or rings [[[lon,lat],...],[[lon,lat],...]] "
    "(the first ring the boundary, the others holes)"
)
_DIGITS = re.compile(r"[0-9]+")


def bad_request(message: str) -> BadRequestError:
    """A 400 refusal carrying ``message`` as the service's only message."""
    return BadRequestError(message, messages=[message])


@dataclass(frozen=True)
class ParsedPolygon:
    """A valid search polygon.

    Attributes
    ----------
    polygon
        The shapely polygon (holes subtracted), prepared for repeated predicates.
    normalised
        Canonical JSON of its rings (one ring: ``[[lon,lat],...]``; with holes:
        ``[[[lon,lat],...],...]``).
    bounds
        ``(xmin, ymin, xmax, ymax)`` of its boundary.
    sha256
        Hex sha256 of ``normalised``: the polygon's name in caches and the request log.
    """

    polygon: Polygon
    normalised: str
    bounds: tuple[float, float, float, float]
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", hashlib.sha256(self.normalised.encode()).hexdigest())


def _kind(value: Any) -> str:
    """A JSON-ish name of a parsed value's type, for messages."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    return "a number"


def _text(value: Any, limit: int = 60) -> str:
    """Short JSON of ``value`` for messages."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: Compact JSON, made once (``json.dumps`` with options makes an encoder a call).
_ENCODER = json.JSONEncoder(separators=(",", ":"))
#: In compact JSON of floats: an integral value's ``.0``, and then a zero's sign.
_POINT_ZERO = re.compile(r"\.0(?=[,\]])")
_MINUS_ZERO = re.compile(r"(?<=[\[,])-0(?=[,\]])")


def _normalised(rings: list[list[tuple[float, float]]]) -> str:
    """The compact JSON of ``rings`` (one ring: its points), each coordinate in its shortest
    round-trip form without ``.0`` on integral values and without the sign of zero."""
    text = _ENCODER.encode(rings[0] if len(rings) == 1 else rings)
    if ".0" in text:
        text = _POINT_ZERO.sub("", text)
        if "-0" in text:
            text = _MINUS_ZERO.sub("0", text)
    return text


def _ring_polygon(points: list[tuple[float, float]]) -> Polygon:
    """The polygon of one ring of (checked) points, made from its WKB in one call."""
    flat = [c for point in points for c in point]
    return shapely.from_wkb(struct.pack(f"<BIII{len(flat)}d", 1, 3, 1, len(points), *flat))


def _rings(data: Any) -> list[list[Any]]:
    """The rings of the decoded parameter, whichever of the two forms it uses."""
    if not isinstance(data, list):
        raise bad_request(
            f"searchPolygon must be a JSON array of [longitude, latitude] points, got "
            f"{_kind(data)}; {_FORMS}, e.g. {EXAMPLE}"
        )
    if not data:
        raise bad_request(f"searchPolygon is an empty array; {_FORMS}, e.g. {EXAMPLE}")
    first = data[0]
    if not isinstance(first, list):
        raise bad_request(
            f"searchPolygon has the wrong nesting: its first element is {_kind(first)} "
            f"{_text(first)}, not a [longitude, latitude] point; wrap each pair in brackets: "
            f"{_FORMS}"
        )
    if first and isinstance(first[0], list):
        if first[0] and isinstance(first[0][0], list):
            raise bad_request(
                "searchPolygon has the wrong nesting: too many levels of brackets (a "
                f"MultiPolygon?); send one polygon per request: {_FORMS}"
            )
        for number, ring in enumerate(data, start=1):
            if not isinstance(ring, list):
                raise bad_request(
                    f"searchPolygon has the wrong nesting: ring {number} is {_kind(ring)} "
                    f"{_text(ring)}, not an array of points; {_FORMS}"
                )
        return data
    return [data]


def _points(ring: list[Any], label: str) -> list[tuple[float, float]]:
    """The checked (lon, lat) points of one ring."""
    points: list[tuple[float, float]] = []
    for number, point in enumerate(ring, start=1):
        # The common case, checked without building any message: a pair of plain JSON
        # numbers (bool is not int here) within range (NaN fails every comparison).
        if type(point) is list and len(point) == 2:
            lon, lat = point
            if (
                (type(lon) is float or type(lon) is int)
                and (type(lat) is float or type(lat) is int)
                and -180.0 <= lon <= 180.0
                and -90.0 <= lat <= 90.0
            ):
                points.append((float(lon), float(lat)))
                continue
        _refuse_point(point, number, label)
    return points


def _refuse_point(point: Any, number: int, label: str) -> None:
    """Raise the 400 that names what is wrong with point ``number`` of a ring."""
    where = f"searchPolygon {label} point {number}"
    if not isinstance(point, list) or len(point) != 2:
        raise bad_request(
            f"{where} must be a pair [longitude, latitude], got {_kind(point)} "
            f"{_text(point)}; {_FORMS}"
        )
    for axis, value in zip(("longitude", "latitude"), point, strict=True):
        if not _is_number(value):
            raise bad_request(
                f"{where} has a {axis} that is {_kind(value)} ({_text(value)}), not a "
                "number; write coordinates as plain JSON numbers, e.g. -97.5"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise bad_request(
                f"{where} has a {axis} that is not a finite number ({_text(value)}); "
                "send finite decimal degrees"
            )
    lon, lat = point  # compared as given: an integer too large for a float is out of range
    if not -180.0 <= lon <= 180.0:
        hint = (
            " (did you swap them? each point is [longitude, latitude])"
            if (-90.0 <= lon <= 90.0)
            else ""
        )
        raise bad_request(
            f"{where} has longitude {_text(point[0])} outside [-180, 180]; send "
            f"[longitude, latitude] in decimal degrees (EPSG:4326){hint}"
        )
    if not -90.0 <= lat <= 90.0:
        hint = (
            " (did you swap them? each point is [longitude, latitude])"
            if (-180.0 <= lat <= 180.0 and -90.0 <= lon <= 90.0)
            else ""
        )
        raise bad_request(
            f"{where} has latitude {_text(point[1])} outside [-90, 90]; send "
            f"[longitude, latitude] in decimal degrees (EPSG:4326){hint}"
        )
    raise bad_request(f"{where} is not a valid point; {_FORMS}")  # pragma: no cover


def _check_ring(points: list[tuple[float, float]], raw: list[Any], label: str) -> Polygon:
    """Ring shape: enough points, closed, encloses area, simple; the ring as a polygon."""
    if len(points) < 4:
        raise bad_request(
            f"searchPolygon {label} has {len(points)} point{'s' if len(points) != 1 else ''}; "
            "a ring needs at least 4 (3 corners, then the first point repeated at the end)"
        )
    if points[0] != points[-1]:
        raise bad_request(
            f"searchPolygon {label} is not closed: first point {_text(raw[0])} differs from "
            f"last point {_text(raw[-1])}; repeat the first point at the end"
        )
    ring = _ring_polygon(points)
    # A ring with area has corners off one line; only a flat ring needs the hull to tell.
    if ring.area == 0.0 and shapely.multipoints(np.asarray(points)).convex_hull.area == 0.0:
        raise bad_request(
            f"searchPolygon {label} encloses no area (its points lie on one line or repeat); "
            "give at least 3 distinct corners that are not in a line"
        )
    if not ring.is_valid:
        raise bad_request(
            f"searchPolygon {label} is self-intersecting ({shapely.is_valid_reason(ring)}); "
            "order the points so the edges do not cross, or send the parts as separate "
            "polygons"
        )
    return ring


#: Digits a whole number in a polygon may have before it is refused as such: under Python's
#: own limit on converting long ones (4,300); shorter ones get the out-of-range message that
#: names their point.
_MAX_DIGITS = 4_000


class _TooManyDigits(ValueError):
    def __init__(self, digits: int) -> None:
        super().__init__(f"{digits} digits")
        self.digits = digits


def _whole_number(text: str) -> int:
    """A whole number of the JSON text, refused past :data:`_MAX_DIGITS` digits before Python's
    own limit on converting long ones (4,300) turns it into an unrelated error."""
    digits = len(text.lstrip("-"))
    if digits > _MAX_DIGITS:
        raise _TooManyDigits(digits)
    return int(text)


#: Decodes a polygon's JSON (made once: ``json.loads`` with options makes one a call).
_DECODER = json.JSONDecoder(parse_int=_whole_number)


def parse_polygon(text: str | None) -> ParsedPolygon:
    """Decode and validate a ``searchPolygon`` value.

    Raises
    ------
    BadRequestError
        For anything but a valid polygon; the message names the fault and the fix.
    """
    if text is None or not text.strip():
        raise bad_request(
            "searchPolygon is missing; add searchPolygon=<JSON array of [longitude, latitude] "
            f"points> to the query, e.g. searchPolygon={EXAMPLE}"
        )
    try:
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        data = _DECODER.decode(text)
    except _TooManyDigits as exc:
        raise bad_request(
            f"searchPolygon has a number of {exc.digits:,} digits; coordinates are longitudes "
            "from -180 to 180 and latitudes from -90 to 90, e.g. -99.74 (6 decimals are "
            "plenty)"
        ) from None
    except (ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        where = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        raise bad_request(
            f"searchPolygon is not valid JSON ({reason}{where}); send a JSON array of "
            f"[longitude, latitude] numbers, e.g. {EXAMPLE} (URL-encoded)"
        ) from None
    raw_rings = _rings(data)
    labels = (
        ["ring"]
        if len(raw_rings) == 1
        else ["ring 1 (the boundary)"]
        + [f"ring {n} (hole {n - 1})" for n in range(2, len(raw_rings) + 1)]
    )
    rings = []
    for raw, label in zip(raw_rings, labels, strict=True):
        points = _points(raw, label)
        polygon = _check_ring(points, raw, label)
        rings.append(points)
    if len(rings) > 1:
        polygon = Polygon(rings[0], rings[1:])
    if len(rings) > 1 and not polygon.is_valid:
        raise bad_request(
            f"searchPolygon is not a valid polygon ({shapely.is_valid_reason(polygon)}); "
            "holes must lie inside the first ring and must not cross it or each other"
        )
    shapely.prepare(polygon)
    xs, ys = [x for x, _ in rings[0]], [y for _, y in rings[0]]
    return ParsedPolygon(polygon, _normalised(rings), (min(xs), min(ys), max(xs), max(ys)))


def parse_page(text: str | None) -> int:
    """The requested page: ``None`` means 1; otherwise a positive integer.

    Raises
    ------
    BadRequestError
        For anything but a positive whole number.
    """
    if text is None:
        return 1
    value = text.strip().lstrip("0") if _DIGITS.fullmatch(text.strip()) else text
    if len(value) > 18:
        raise bad_request(
            f"page {value[:24]}… is beyond the last page of any search; pages are numbered "
            "from 1 to the response's pages"
        )
    if not _DIGITS.fullmatch(value) or int(value) < 1:
        raise bad_request(
            f"page must be a positive whole number (1, 2, 3, ...), got {_text(text, 40)}; "
            "leave it out for the first page"
        )
    return int(value)
