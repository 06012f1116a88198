"""A search's query string read (Starlette's parser, ``parse_qsl``, after a faster pass
over the polygon's escapes) and its body written as ``json`` would, faster.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from parcelsearch_service import limits
from parcelsearch_service.envelopes import error_body
from parcelsearch_service.errors import BadRequestError
from parcelsearch_service.polygon import ParsedPolygon, parse_page, parse_polygon

__all__ = ["query_params", "parse_search", "json_strings"]


#: The characters JSON writes as they are (printable ASCII but the quote and backslash).
_PLAIN = bytes(c for c in range(0x20, 0x7F) if c not in b'"\\')


def json_strings(values: list[str]) -> str:
    """``json.dumps(values, separators=(",", ":"))``, without the encoder when no value
    needs escaping (GroupIDs are hexadecimal): checked by deleting the plain characters
    (``bytes.translate``, many times faster than ``str.isalnum`` here)."""
    joined = "".join(values)
    if values and joined.isascii() and not joined.encode("ascii").translate(None, _PLAIN):
        return '["' + '","'.join(values) + '"]'
    return json.dumps(values, separators=(",", ":"))


#: The escapes of the characters a polygon's JSON is written with, decoded before the rest
#: (each stands for one ASCII character that starts no escape and separates no field: the
#: result is the same).
_JSON_ESCAPES = (("%5B", "["), ("%5D", "]"), ("%2C", ","), ("%5b", "["), ("%5d", "]"), ("%2c", ","))


def _json_unescaped(text: str) -> str:
    """``text`` with the escapes of a polygon's JSON decoded by ``str.replace`` (what
    ``unquote`` would make of them, without decoding escape by escape in Python)."""
    if "%" not in text:
        return text
    for escape, character in _JSON_ESCAPES:
        if escape in text:
            text = text.replace(escape, character)
    return text


def query_params(query_string: bytes) -> dict[str, list[str]]:
    """The parameters of a query string, each name's values in order: what Starlette's
    ``request.query_params`` holds — the same ``parse_qsl`` of the string read as Latin-1,
    blank values kept — after a faster first pass over the polygon's escapes.

    >>> query_params(b"page=2&searchPolygon=%5B%5B1%2C2%5D%5D&page")
    {'page': ['2', ''], 'searchPolygon': ['[[1,2]]']}
    """
    params: dict[str, list[str]] = {}
    for name, value in parse_qsl(
        _json_unescaped(query_string.decode("latin-1")), keep_blank_values=True
    ):
        params.setdefault(name, []).append(value)
    return params


def parse_search(query_string: bytes) -> limits.Outcome[bytes] | tuple[ParsedPolygon, int]:
    """The polygon and page of a search (its query string), or the 400 that answers it."""
    params = query_params(query_string)
    messages: list[str] = []
    for name in ("searchPolygon", "page"):
        if len(params.get(name, ())) > 1:
            messages.append(f"{name} is given {len(params[name])} times; send it once")
    if messages:
        return limits.Outcome(400, error_body(*messages))
    parsed = page = None
    try:
        parsed = parse_polygon(_one(params, "searchPolygon"))
    except BadRequestError as exc:
        messages.extend(exc.messages)
    try:
        page = parse_page(_one(params, "page"))
    except BadRequestError as exc:
        messages.extend(exc.messages)
    if messages or parsed is None or page is None:
        sha = parsed.sha256 if parsed is not None else None
        return limits.Outcome(400, error_body(*messages), sha, page)
    return parsed, page


def _one(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    return values[0] if values else None
