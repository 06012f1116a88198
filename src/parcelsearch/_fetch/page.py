"""One page of search results, and the checks every page must pass.

A :class:`Page` is what the client hands back and what the cache stores. It is only ever
built from a response that passed :func:`check_page`, so ``data_rows == len(data)``,
``pages == ceil(rows / page_size)`` and the page number always agree. The page size is 100
until the vendor's answers say otherwise (:func:`learnt_page_size`, kept in its profile) or
the user sets one (option ``page_size``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from parcelsearch import _wire, settings
from parcelsearch.errors import MalformedResponseError
from parcelsearch.settings import PAGE_SIZE

__all__ = [
    "Page",
    "check_page",
    "GROUP_ID",
    "group_id_problem",
    "learnt_page_size",
    "implied_page_size",
]

#: What the toolkit asks of a GroupID. The vendor's spec promises only an opaque string, so
#: the check protects the user, not a format: non-empty, at most
#: ``settings.options.group_id_max_chars`` characters (128), no control or other
#: unprintable characters, no markup (``<``, ``>``) and no surrounding whitespace. (The
#: reference service happens to send 17 lowercase hex digits; upper case, dashes or other
#: lengths are as good.)
GROUP_ID = re.compile(r"[^<>\s](?:[^<>]*[^<>\s])?")


@dataclass(frozen=True)
class Page:
    """One page of one search request.

    Attributes
    ----------
    request_key
        :func:`parcelsearch._wire.request_key` of (base URL, path, polygon, page).
    polygon_json
        The canonical ring sent as ``searchPolygon``.
    page
        The page number (1-based).
    rows
        Parcels matched by the whole request (all pages).
    pages
        Pages in the whole request: ``ceil(rows / page_size)`` (0 when nothing matched).
    data_rows
        GroupIDs on this page.
    data
        The GroupIDs of this page, in the service's order.
    from_cache
        Whether the page was read from the response cache rather than the network.
    base_url, path
        Where it was (or would be) fetched from.
    fetched_at
        When the service answered (UTC).
    """

    request_key: str
    polygon_json: str
    page: int
    rows: int
    pages: int
    data_rows: int
    data: tuple[str, ...]
    from_cache: bool = False
    base_url: str = ""
    path: str = ""
    fetched_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __repr__(self) -> str:
        return (
            f"Page(page={self.page}/{self.pages}, rows={self.rows}, data_rows={self.data_rows}, "
            f"from_cache={self.from_cache}, key={self.request_key[:12]}…)"
        )


def expected_data_rows(rows: int, page: int, page_size: int = PAGE_SIZE) -> int:
    """GroupIDs page ``page`` must hold when the whole request matched ``rows``."""
    return max(0, min(page_size, rows - page_size * (page - 1)))


def learnt_page_size(page: Page, assumed: int) -> int | None:
    """The page size a page 1 teaches when it disagrees with ``assumed`` but agrees with
    itself: more rows than ids on it, and ``pages == ceil(rows / data_rows)``; else ``None``
    (nothing to learn, or an answer that does not add up under any page size)."""
    held = page.data_rows
    if page.page != 1 or held == assumed or held != len(page.data) or not 0 < held < page.rows:
        return None
    return held if page.pages == math.ceil(page.rows / held) else None


def implied_page_size(page: Page) -> int | None:
    """The page size a page's own counts imply (a page of a request of two pages or more),
    or ``None`` when any would do (one page) or none does."""
    if page.pages < 2 or page.rows <= 0:
        return None
    if page.page < page.pages:
        return page.data_rows or None
    rest = page.rows - page.data_rows  # the full pages before the last
    if rest <= 0 or rest % (page.pages - 1):
        return None
    return rest // (page.pages - 1)


def check_page(page: Page, *, url: str | None = None, page_size: int | None = None) -> None:
    """Raise :class:`~parcelsearch.MalformedResponseError` unless ``page`` adds up.

    Checks: counts are non-negative integers; ``data_rows == len(data)``;
    ``pages == ceil(rows / page_size)``; the page is within ``1..pages`` (or page 1 of an
    empty result); full pages hold ``page_size`` GroupIDs and the last one the remainder;
    every GroupID is an opaque string that passes :func:`group_id_problem`; and, when base
    URL and path are known, the request key names this request.

    ``page_size`` is the vendor's (the client's: set, learnt or 100); ``None`` (a page read
    from a store) takes the size the user set, else the one the page implies, else 100 (or
    the whole answer's rows, when it says it is one page).
    """
    if page_size is None:
        page_size = settings.page_size_setting() or _implied(page) or _one_page(page)
    problems = list(_page_problems(page, page_size))
    if problems:
        raise MalformedResponseError(
            f"page {page.page} of the response does not add up: " + "; ".join(problems), url=url
        )


def _implied(page: Page) -> int | None:
    counts = (page.page, page.rows, page.pages, page.data_rows)
    if any(not isinstance(v, int) or isinstance(v, bool) for v in counts):
        return None
    return implied_page_size(page)


def _one_page(page: Page) -> int:
    whole = page.rows if isinstance(page.rows, int) and page.pages == 1 else 0
    return max(PAGE_SIZE, whole)


#: The largest count a page may state (what the cache and the stores keep: 32-bit pages,
#: 64-bit rows).
_MOST_COUNT = {"page": 2**31 - 1, "pages": 2**31 - 1, "data_rows": 2**31 - 1, "rows": 2**63 - 1}


def _page_problems(page: Page, size: int) -> list[str]:
    for name in ("page", "rows", "pages", "data_rows"):
        value = getattr(page, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return [f"{name} is {value!r}, not a non-negative integer"]
        if value > _MOST_COUNT[name]:
            return [f"{name} is {value:,}, more than any answer counts ({_MOST_COUNT[name]:,})"]
    problems: list[str] = []
    if page.data_rows != len(page.data):
        problems.append(f"dataRows is {page.data_rows} but data holds {len(page.data)} ids")
    if page.pages != math.ceil(page.rows / size):
        problems.append(
            f"pages is {page.pages} but ceil(rows={page.rows} / {size}) is "
            f"{math.ceil(page.rows / size)}"
        )
    if page.rows == 0:
        if page.page != 1:
            problems.append(f"page {page.page} of an empty result (only page 1 exists)")
        if page.data:
            problems.append(f"an empty result (rows 0) carries {len(page.data)} ids")
    elif not 1 <= page.page <= page.pages:
        problems.append(f"page {page.page} is outside 1..{page.pages}")
    elif len(page.data) != expected_data_rows(page.rows, page.page, size):
        problems.append(
            f"page {page.page} of {page.rows} rows must hold "
            f"{expected_data_rows(page.rows, page.page, size)} ids, not "
            f"{len(page.data)}"
        )
    longest = settings.group_id_max_chars()
    bad = [
        (n, why) for n, item in enumerate(page.data, 1) if (why := group_id_problem(item, longest))
    ]
    if bad:  # said by position: an id that is not usable is not shown (markup, controls)
        problems.append(
            f"{len(bad)} GroupID(s) are not usable ids, e.g. id {bad[0][0]} of "
            f"the page: {bad[0][1]}"
        )
    if page.base_url and page.path:
        key = _wire.request_key(page.base_url, page.path, page.polygon_json, page.page)
        if key != page.request_key:
            problems.append("request_key does not name this request")
    return problems


def group_id_problem(value: object, longest: int = settings.MAX_GROUP_ID_CHARS) -> str | None:
    """Why ``value`` is not a usable GroupID (see :data:`GROUP_ID`; at most ``longest``
    characters), or ``None``."""
    if not isinstance(value, str):
        return f"a {type(value).__name__}, not a string"
    if not value:
        return "empty"
    if len(value) > longest:
        return f"{len(value)} characters, more than {longest}"
    if not value.isprintable():
        return "holds control or unprintable characters"
    if value != value.strip():
        return "starts or ends with whitespace"
    if not GROUP_ID.fullmatch(value):
        return "holds markup (angle brackets)"
    return None
