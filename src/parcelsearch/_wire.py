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

from parcelsearch.settings import COORD_DECIMALS

__all__ = [
    "format_coord",
    "ring_json",
    "search_target",
    "request_line_bytes",
    "vertex_bytes",
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
    return "[" + ",".join(
        f"[{format_coord(x, decimals)},{format_coord(y, decimals)}]" for x, y, *_ in coords
    ) + "]"


def search_target(path: str, polygon_json: str, page: int) -> str:
    """The request target exactly as sent: ``path?searchPolygon=…&page=N``, percent-encoded."""
    return f"{path}?searchPolygon={quote(polygon_json, safe=_SAFE)}&page={page}"


def request_line_bytes(target: str, method: str = "GET") -> int:
    """Length in bytes of ``METHOD <target> HTTP/1.1`` (the line the gateway measures)."""
    return len(f"{method} {target} HTTP/1.1".encode())


def vertex_bytes(x: float, y: float, decimals: int = COORD_DECIMALS) -> int:
    """Bytes one vertex adds to an encoded ring, its separating comma included."""
    return len(quote(f"[{format_coord(x, decimals)},{format_coord(y, decimals)}]", safe=_SAFE)) + 1


def request_key(base_url: str, path: str, polygon_json: str, page: int) -> str:
    """sha256 naming one request: base URL, path, canonical ring and page — never the key."""
    digest = hashlib.sha256()
    for part in (base_url.rstrip("/"), path, polygon_json, str(page)):
        digest.update(part.encode())
        digest.update(b"\x00")
    return digest.hexdigest()
