"""How a ring travels: its canonical JSON, the request target, and its cache key.

One place decides the bytes of a search request, so the planner's byte budget,
the client's URL and the cache key can never disagree.

Examples
--------
>>> ring = [(-97.5, 32.25), (-97.4, 32.25), (-97.4, 32.3), (-97.5, 32.25)]
>>> ring_json(ring)
'[[-97.5,32.25],[-97.4,32.25],[-97.4,32.3],[-97.5,32.25]]'
>>> search_target("/v1/search", ring_json(ring), 2)[:40]
'/v1/search?searchPolygon=%5B%5B-97.5,32.'
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from urllib.parse import quote

import numpy as np

from parcelsearch.settings import COORD_DECIMALS

__all__ = [
    "format_coord",
    "ring_json",
    "search_target",
    "request_line_bytes",
    "search_target_bytes",
    "vertex_bytes",
    "vertex_bytes_array",
    "request_key",
]

# Characters requests/urllib3 leave as they are in a query value we build: the JSON
# of a ring is digits, '-', '.', ',' and brackets; brackets go out as %5B / %5D.
_SAFE = ","


def format_coord(value: float, decimals: int = COORD_DECIMALS) -> str:
    """Shortest fixed-point text of ``value`` rounded to ``decimals`` (no exponent, no -0)."""
    text = f"{value:.{decimals}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def ring_json(coords: Iterable[Sequence[float]], decimals: int = COORD_DECIMALS) -> str:
    """Compact JSON ``[[lon,lat],...]`` of a ring, coordinates rounded to ``decimals``."""
    points = coords if hasattr(coords, "__len__") else list(coords)  # an iterator, once
    try:
        xy = np.asarray(points, dtype=float)
    except (TypeError, ValueError):  # ragged: vertex by vertex
        xy = np.asarray([(x, y) for x, y, *_ in points], dtype=float)
    if xy.ndim != 2 or xy.shape[1] < 2:
        xy = xy.reshape(-1, 2)
    # format_coord's text, without a call per number (a ring has thousands)
    form = f"{{:.{decimals}f}}".format
    texts = [form(v).rstrip("0").rstrip(".") for v in xy[:, :2].ravel().tolist()]
    texts = ["0" if text in ("-0", "") else text for text in texts]
    pairs = zip(texts[::2], texts[1::2], strict=True)
    return "[" + ",".join([f"[{x},{y}]" for x, y in pairs]) + "]"


def search_target(path: str, polygon_json: str, page: int) -> str:
    """The request target exactly as sent: ``path?searchPolygon=…&page=N``, percent-encoded."""
    return f"{path}?searchPolygon={quote(polygon_json, safe=_SAFE)}&page={page}"


#: What a ring's JSON is made of: in a query value only its brackets are escaped.
_RING_CHARS = frozenset("0123456789-.,[]")
#: Bytes an escaped bracket adds (``[`` goes out as ``%5B``).
_BRACKET_GROWTH = len(quote("[", safe=_SAFE)) - 1


def _quoted_length(text: str) -> int:
    """``len(quote(text))`` as :func:`search_target` quotes it, without building it when
    ``text`` is a ring's JSON."""
    if _RING_CHARS.issuperset(text):
        return len(text) + _BRACKET_GROWTH * (text.count("[") + text.count("]"))
    return len(quote(text, safe=_SAFE))


def search_target_bytes(path: str, polygon_json: str, page: int, method: str = "GET") -> int:
    """:func:`request_line_bytes` of :func:`search_target`, without quoting the ring."""
    return request_line_bytes(search_target(path, "", page), method) + _quoted_length(polygon_json)


def request_line_bytes(target: str, method: str = "GET") -> int:
    """Length in bytes of ``METHOD <target> HTTP/1.1`` (the line the gateway measures)."""
    return len(f"{method} {target} HTTP/1.1".encode())


def vertex_bytes(x: float, y: float, decimals: int = COORD_DECIMALS) -> int:
    """Bytes one vertex adds to an encoded ring, its separating comma included."""
    return len(quote(f"[{format_coord(x, decimals)},{format_coord(y, decimals)}]", safe=_SAFE)) + 1


#: Bytes a vertex adds besides its two numbers: "%5B" "," "%5D" and the separating ",".
_VERTEX_OVERHEAD = len(quote("[,]", safe=_SAFE)) + 1


def vertex_bytes_array(xy: np.ndarray, decimals: int = COORD_DECIMALS) -> np.ndarray:
    """:func:`vertex_bytes` of every row of an ``(n, 2)`` array, computed without text.

    A coordinate's text is its sign (unless it rounds to 0), the integer digits, and if
    the rounded fraction is not 0 a point and the fraction without trailing zeros. Values
    whose rounding is a near tie are formatted as text, exactly as :func:`format_coord`.
    """
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    scale = 10**decimals
    scaled = np.abs(xy) * scale
    k = np.rint(scaled).astype(np.int64)
    tie = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    if tie.any():  # rare: let Python's formatting decide, as format_coord does
        for i, j in zip(*np.nonzero(tie), strict=True):
            k[i, j] = round(abs(float(f"{xy[i, j]:.{decimals}f}")) * scale)
    whole, fraction = np.divmod(k, scale)
    digits = 1 + sum((whole >= 10**d).astype(np.int64) for d in range(1, 4))
    trailing = sum((fraction % 10**d == 0).astype(np.int64) for d in range(1, decimals))
    lengths = (
        ((xy < 0) & (k != 0)).astype(np.int64)
        + digits
        + np.where(fraction != 0, 1 + decimals - trailing, 0)
    )
    return np.asarray(lengths.sum(axis=1) + _VERTEX_OVERHEAD, dtype=np.int64)


def request_key(base_url: str, path: str, polygon_json: str, page: int) -> str:
    """sha256 naming one request: base URL, path, canonical ring and page — never the key."""
    digest = hashlib.sha256()
    for part in (base_url.rstrip("/"), path, polygon_json, str(page)):
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()
