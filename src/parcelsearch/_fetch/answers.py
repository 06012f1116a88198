"""The one reader of what a vendor's server sends back, whatever wrote it.

A real vendor sits behind a commercial API gateway, and answers do not all come from the
vendor's own code. Three shapes of body are read here, and nowhere else:

- the vendor's envelope: ``{"status": "OK" | "ERROR", "messages": [...], ...}``;
- an Apigee gateway fault: ``{"fault": {"faultstring": "...", "detail": {"errorcode":
  "..."}}}`` (quota and spike-arrest violations, invalid keys, unknown proxies);
- an HTML page (gateways answer 502/503/504 with one): only its status and ``<title>``.

:func:`read_refusal` turns any non-200 (or 200 ``ERROR``) body into a :class:`Refusal`: the
vendor's own words, an error code when given, and what kind of refusal it is. Messages made
from it never show raw bytes or markup. :func:`count_field` reads counts sent as integers or
as numeric strings (``"rows": "276"``).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Refusal", "read_refusal", "read_json", "count_field", "Kind", "stated_window"]

#: What a refusal means to the client.
Kind = Literal["quota", "spike", "key", "empty", "too_long", "window", "other"]

_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_HEADING = re.compile(rb"<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]*>")
_SPACES = re.compile(r"\s+")
#: How an empty result is worded when a vendor answers it as an error.
_EMPTY = re.compile(r"\bno (parcels?|results?|records?|matches)( were)? found\b", re.IGNORECASE)
#: A request line refused as too long: Apigee's ``TooBigLine``, IIS's 404.15, a 414's words.
_TOO_LONG = re.compile(
    r"\b404\.15\b|(query string|request line|uri|url) (is )?too long", re.IGNORECASE
)
#: A page refused as too deep (a search engine's result window): "Result window is too large
#: … Narrow the searchPolygon".
_WINDOW = re.compile(r"\bresult window\b|\btoo large\b.*\bnarrow", re.IGNORECASE)
#: How deep a result may be paged, when a window refusal says it: Elasticsearch's "from + size
#: must be less than or equal to: [10000]", or "the 10000 results" / "1,000 hits".
_WINDOW_RESULTS = (
    re.compile(r"less than or equal to:?\s*\[?(\d[\d,]*)", re.IGNORECASE),
    re.compile(r"\b(\d[\d,]*)\s+(?:results|hits|records|rows)\b", re.IGNORECASE),
)
_QUOTA_CODES = ("quotaviolation", "quota.exceeded", "quotaexceeded")
_SPIKE_CODES = ("spikearrest",)
_KEY_CODES = (
    "invalidapikey",
    "apikeynotapproved",
    "invalidapikeyforgivenresource",
    "keyexpired",
    "failedtoresolveapikey",
)


@dataclass(frozen=True)
class Refusal:
    """A refusal read from a body: the vendor's words and what they mean.

    Attributes
    ----------
    messages
        The vendor's own words (envelope ``messages``, a fault's ``faultstring``, an HTML
        page's title), plain text.
    errorcode
        A gateway fault's ``detail.errorcode``, if any.
    kind
        ``"quota"`` (no calls left), ``"spike"`` (too fast: wait and retry), ``"key"`` (the
        key is refused), ``"empty"`` (an empty result worded as an error), ``"too_long"`` (a
        request line refused as too long), ``"window"`` (a page deeper than the vendor's
        result window), ``"other"``.
    shape
        ``"envelope"``, ``"fault"``, ``"html"``, ``"empty body"`` or ``"unreadable"``.
    """

    messages: tuple[str, ...]
    errorcode: str | None
    kind: Kind
    shape: str

    @property
    def text(self) -> str:
        """The vendor's words in one line (``"no readable message"`` when it gave none)."""
        return "; ".join(self.messages) if self.messages else f"{self.shape}, no message"


def read_json(body: bytes) -> Any:
    """The body parsed as JSON, or ``None`` when it is not JSON (or nested deeper than the
    parser goes: a page is two levels deep)."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def read_refusal(status: int, body: bytes, content_type: str = "") -> Refusal:
    """Read an error body of any shape (see the module's docstring) into a :class:`Refusal`."""
    payload = read_json(body)
    if isinstance(payload, dict) and isinstance(payload.get("fault"), dict):
        fault = payload["fault"]
        detail = fault.get("detail")
        code = detail.get("errorcode") if isinstance(detail, dict) else None
        words = _plain(fault.get("faultstring"))
        return Refusal(
            tuple(w for w in [words] if w),
            str(code) if code else None,
            _kind(status, [words], str(code or "")),
            "fault",
        )
    if isinstance(payload, dict) and ("messages" in payload or "status" in payload):
        raw = payload.get("messages")
        items = raw if isinstance(raw, list) else [raw] if raw is not None else []
        messages = [m for m in (_plain(item) for item in items) if m]
        return Refusal(tuple(messages), None, _kind(status, messages, ""), "envelope")
    if not body.strip():
        return Refusal((), None, _kind(status, [], ""), "empty body")
    if b"<" in body[:512] and (
        "html" in content_type.lower()
        or b"<html" in body[:512].lower()
        or b"<!doctype" in body[:512].lower()
    ):
        found = _TITLE.search(body[:65536]) or _HEADING.search(body[:65536])
        title = _plain(found.group(1).decode("utf-8", "replace")) if found else ""
        return Refusal(
            (f"an HTML page titled {title!r}",) if title else ("an HTML page",),
            None,
            _kind(status, [title], ""),
            "html",
        )
    return Refusal((), None, _kind(status, [], ""), "unreadable")


def stated_window(words: str, page_size: int, refused: int) -> int | None:
    """The pages a search is served, as a window refusal's ``words`` state it (the results
    it may be paged through, divided by ``page_size``), or ``None`` when they state none that
    fits (at least 1 and below the ``refused`` page)."""
    for pattern in _WINDOW_RESULTS:
        found = pattern.search(words)
        if found is not None:
            pages = int(found.group(1).replace(",", "")) // max(1, page_size)
            return pages if 1 <= pages < refused else None
    return None


def _plain(value: Any) -> str:
    """Text without markup or runs of whitespace, at most 300 characters."""
    if value is None:
        return ""
    text = html.unescape(_TAGS.sub(" ", str(value)))
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return _SPACES.sub(" ", text).strip()[:300]


def _kind(status: int, messages: list[str], code: str) -> Kind:
    code = code.lower().replace("_", "")
    words = " ".join(messages).lower()
    if any(c in code for c in _QUOTA_CODES) or (
        status in (403, 429) and "quota" in words and "spike" not in words
    ):
        return "quota"
    if (
        any(c in code for c in _SPIKE_CODES)
        or "spike arrest" in words
        or (status == 429 and not code)
    ):
        return "spike"
    if any(c in code for c in _KEY_CODES) or (status == 401) or (status == 403 and "key" in words):
        return "key"
    if status == 414 or "toobigline" in code or (status in (400, 404) and _TOO_LONG.search(words)):
        return "too_long"
    if status == 400 and _WINDOW.search(words):
        return "window"
    if status in (200, 404) and _EMPTY.search(words):
        return "empty"
    return "other"


def count_field(payload: dict[str, Any], name: str) -> int | None:
    """A count sent as an integer or as a string of digits (``"276"``); ``None`` otherwise."""
    value = payload.get(name)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
