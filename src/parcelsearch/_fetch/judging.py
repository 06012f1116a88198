"""Judging the vendor's answers and making errors of them.

:func:`judge` reads every answer of a search or market request once: a 200 that adds up is
read (by the caller's ``read``); a cut body, a 5xx, a spike arrest or a maintenance page is
transient (:class:`~parcelsearch._fetch.http.Transient`: the transport backs off and asks
again); a same-origin redirect is followed (:func:`redirect`); quota, key, polygon and other
refusals are final, each mapped onto the error tree in the vendor's words
(:func:`service_error`), with the fact it teaches kept
(:class:`~parcelsearch._fetch.learning.VendorFacts`). :func:`judge_probe` describes an answer
rather than judging it (for :func:`parcelsearch.check_service`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, urljoin, urlsplit, urlunsplit

import requests

from parcelsearch import _wire
from parcelsearch._fetch.answers import (
    Refusal,
    count_field,
    read_json,
    read_refusal,
    stated_window,
)
from parcelsearch._fetch.failures import strip_query
from parcelsearch._fetch.http import RETRY_STATUSES, Redirected, Spend, Transient
from parcelsearch._fetch.learning import VendorFacts
from parcelsearch._fetch.page import Page, check_page
from parcelsearch._fetch.retries import retry_after
from parcelsearch.errors import (
    AuthenticationError,
    BadPolygonError,
    CutBodyError,
    EndpointGoneError,
    Hint,
    MalformedResponseError,
    PageGoneError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTooLargeError,
    ResultWindowError,
    ServiceError,
    ServiceFailureError,
)

__all__ = [
    "OUTAGE_STATUSES",
    "REDIRECTS",
    "Probe",
    "data_rows",
    "describe",
    "field",
    "judge",
    "judge_probe",
    "list_field",
    "markets_reader",
    "not_sent",
    "page_base_reader",
    "page_reader",
    "redirect",
    "service_error",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Probe:
    """An answer described rather than judged: its status, ``Content-Encoding``, the body
    when it is a 200 ``OK`` envelope, else the refusal read from it."""

    status: int
    encoding: str
    payload: dict[str, Any] | None
    refusal: Refusal | None
    #: The ``Sunset`` header (an endpoint's retirement date), if sent.
    sunset: str | None = None


#: Redirect statuses: followed when they stay on the base URL's https origin.
REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Statuses that say the vendor as a whole is down (a gateway's, or its maintenance), unlike
#: a 500, which may be one request's: the transport's breaker holds every request for them.
OUTAGE_STATUSES = frozenset({502, 503, 504})


def judge(
    response: requests.Response,
    read: Callable[[dict[str, Any], str], T],
    where: str,
    url: str,
    spend: Spend | None,
    facts: VendorFacts,
    heard: Callable[[int, Mapping[str, str]], None] | None,
    empty: dict[str, Any] | None = None,
) -> T:
    """Accept a 200 that adds up; follow same-origin redirects; read every refusal once.

    Cut bodies, 5xx and spike arrest are transient; an answer delivered whole that cannot be
    read is asked once more, then final; quota, key, polygon and other refusals are final.
    ``empty`` is the answer to use when the vendor words an empty result as an error.
    """
    if heard is not None:
        heard(response.status_code, response.headers)
    body = _body(response, url, where)
    status = response.status_code
    if status in REDIRECTS:
        raise redirect(response, url, where, facts)
    content_type = response.headers.get("Content-Type", "")
    if status != 200:
        refusal = read_refusal(status, body, content_type)
        if refusal.kind == "too_long":  # the line, not the path: nothing to unlearn
            raise _too_long(status, refusal, url, where, facts)
        deep = _too_deep(status, refusal, url, where, facts)
        if deep is not None:
            raise deep
        hop = facts.unlearn(status, refusal, url)
        if hop is not None:
            raise hop
        if refusal.kind == "empty":
            return _empty(read, empty, refusal, where, url)
        if status == 410:
            raise _gone(response.headers, refusal, url, where)
        error = service_error(status, response.headers, refusal, url, where, facts.base_url)
        if status == 429 or isinstance(error, AuthenticationError | QuotaExhaustedError):
            if spend is not None:
                spend.refund()  # refused at the gate: the service did not count it
        if refusal.kind == "spike" or (
            status in RETRY_STATUSES and refusal.kind not in ("quota", "key")
        ):
            raise Transient(
                str(status), error, outage=refusal.kind != "spike" and status in OUTAGE_STATUSES
            )
        raise error
    payload = read_json(body)
    if payload is None:
        refusal = read_refusal(status, body, content_type)
        if refusal.shape == "html":  # a maintenance page: down for now, like a 503
            raise Transient("HTML page", _html_page(refusal, url, where), outage=True)
        shown = refusal.text if refusal.shape == "html" else f"{len(body)} bytes, not JSON"
        raise Transient(
            "body not JSON",
            MalformedResponseError(
                f"HTTP 200 but the answer is not JSON ({where}): {shown}", url=strip_query(url)
            ),
            once=True,
        ) from None
    if not isinstance(payload, dict) or payload.get("status") != "OK":
        refusal = read_refusal(status, body, content_type)
        if refusal.kind == "empty":
            return _empty(read, empty, refusal, where, url)
        status_field = payload.get("status") if isinstance(payload, dict) else None
        raise MalformedResponseError(
            f"HTTP 200 but status {status_field!r}, not 'OK' ({where}): {refusal.text}",
            url=strip_query(url),
        )
    try:
        return read(payload, where)
    except PageGoneError:
        raise
    except MalformedResponseError as exc:
        raise Transient("counts disagree", exc, once=True) from None


def _too_long(
    status: int, refusal: Refusal, url: str, where: str, facts: VendorFacts
) -> RequestTooLargeError:
    """A request line the gateway refused as too long, in its words; the limit it teaches
    kept, so the next search plans its pieces to it."""
    learnt = facts.learn_line_limit(url)
    sent = len(f"GET {url.removeprefix(facts.base_url)} HTTP/1.1".encode())
    words = refusal.text if refusal.messages or not refusal.errorcode else refusal.errorcode
    code = f" ({refusal.errorcode})" if refusal.errorcode and refusal.messages else ""
    then = (
        f"the gateway takes at most {learnt:,} bytes, it seems: kept in "
        f"{facts.kept_in}, so the next search plans its pieces to it; "
        "search again"
        if learnt is not None
        else f"pieces were planned to {facts.max_request_bytes:,} bytes; set a lower limit"
    )
    return RequestTooLargeError(
        f"HTTP {status}: {words}{code} ({where}): the gateway refused a "
        f"request line of {sent:,} bytes as too long; {then}.",
        status=status,
        messages=list(refusal.messages),
        url=strip_query(url),
        hints=[Hint("max_request_bytes", learnt or 4096)],
    )


def _too_deep(
    status: int, refusal: Refusal, url: str, where: str, facts: VendorFacts
) -> ResultWindowError | None:
    """A page (after the first) refused as beyond the vendor's result window, in its words;
    the window it teaches (the page before) kept, so pieces with more pages are split."""
    asked = parse_qs(urlsplit(url).query).get("page", [""])[0]
    if refusal.kind != "window" or not asked.isdigit():
        return None
    page = int(asked) - facts.page_base + 1  # our number for the vendor's page
    if page < 2:
        return None  # page 1 refused: nothing deeper to learn
    learnt = facts.learn_window(page, stated_window(refusal.text, facts.page_size, page))
    window = learnt if learnt is not None else page - 1
    kept = (
        f"kept in {facts.kept_in}, so "
        if learnt is not None and facts.result_window_source == "learnt"
        else ""
    )
    return ResultWindowError(
        f"HTTP {status}: {refusal.text} ({where}): the vendor serves a search {window} "
        f"pages deep at most, it seems; {kept}pieces with more pages are split until each "
        "fits.",
        window=window,
        status=status,
        messages=list(refusal.messages),
        url=strip_query(url),
        hints=[Hint("result_window", window)],
    )


def _html_page(refusal: Refusal, url: str, where: str) -> ServiceFailureError:
    """A 200 carrying an HTML page where JSON is due (a gateway's maintenance page): a
    transient fault, backed off and retried like a 503, never read as an answer."""
    return ServiceFailureError(
        f"HTTP 200 but {refusal.text} where JSON is due ({where}): the service seems down "
        "(for maintenance?); nothing was kept from these answers",
        status=200,
        messages=list(refusal.messages),
        url=strip_query(url),
    )


def _gone(headers: Mapping[str, str], refusal: Refusal, url: str, where: str) -> EndpointGoneError:
    """A 410: the vendor retired the endpoint. Quoted in its words, with its ``Sunset``."""
    sunset = headers.get("Sunset") or None
    when = f" (Sunset: {sunset})" if sunset else " (no Sunset date given)"
    return EndpointGoneError(
        f"HTTP 410 Gone: the vendor has retired {where.split(' page ')[0]}{when}: "
        f"{refusal.text}. No request was retried and the run stopped at this first answer; "
        "ask the vendor for the endpoint that replaces it and use it as the base URL.",
        status=410,
        messages=list(refusal.messages),
        url=strip_query(url),
        sunset=sunset,
        hints=[Hint("base_url", phrase="then set {knob}")],
    )


def _empty(
    read: Callable[[dict[str, Any], str], T],
    empty: dict[str, Any] | None,
    refusal: Refusal,
    where: str,
    url: str,
) -> T:
    """An empty result worded as an error: page 1 of nothing (``empty``), or, for a later
    page, a page that page 1 promised and that is gone."""
    if empty is None:
        raise PageGoneError(
            f"the vendor answers {refusal.text!r} ({where}): the result changed since page 1",
            url=strip_query(url),
        )
    return read(empty, where)


def describe(target: str) -> str:
    """A short, key-free description of a request for messages and logs."""
    path, _, query = target.partition("?")
    if not query:
        return f"GET {path}"
    params = dict(part.partition("=")[::2] for part in query.split("&"))
    polygon = params.get("searchPolygon", "")
    return f"GET {path} page {params.get('page', '?')}, searchPolygon of {len(polygon)} bytes"


# -- responses -------------------------------------------------------------------------


_ERRORS: dict[int, type[ServiceError]] = {
    400: BadPolygonError,
    401: AuthenticationError,
    403: AuthenticationError,
    414: RequestTooLargeError,
}
_KINDS: dict[str, type[ServiceError]] = {
    "quota": QuotaExhaustedError,
    "spike": RateLimitError,
    "key": AuthenticationError,
}


def service_error(
    status: int,
    headers: Mapping[str, str],
    refusal: Refusal,
    url: str,
    where: str,
    base_url: str,
) -> ServiceError:
    """The error of a refusal, in the vendor's words (never raw bytes or markup)."""
    if refusal.kind in _KINDS:
        cls = _KINDS[refusal.kind]
    elif status >= 500:
        cls = ServiceFailureError
    else:
        cls = _ERRORS.get(status, ServiceError)
    if cls is AuthenticationError and status not in (401, 403):
        cls = ServiceError
    text = refusal.text if refusal.messages or not refusal.errorcode else refusal.errorcode
    note = {
        QuotaExhaustedError: ": the key has no calls left this period",
        RateLimitError: ": still rate-limited after the retries",
        ServiceFailureError: ": the service kept failing through the retries",
    }.get(cls, "")
    hints = [Hint("api_key", phrase="check {knob}")] if cls is AuthenticationError else []
    if status == 404 and refusal.kind != "empty":
        note += _not_found_note(base_url)
        hints = [Hint("base_url", phrase="check {knob}")]
    return cls(
        f"HTTP {status}: {text} ({where}){note}.",
        status=status,
        messages=list(refusal.messages),
        url=strip_query(url),
        retry_after=retry_after(headers),
        hints=hints,
    )


def _not_found_note(base_url: str) -> str:
    """Why a path was not found: a base URL ending in the ``/v1`` the client adds itself, or
    one lacking the gateway's stage prefix."""
    parts = urlsplit(base_url)
    if parts.path.rstrip("/").lower().endswith("/v1"):
        root = urlunsplit(parts._replace(path=parts.path.rstrip("/")[:-3]))
        return (
            f"; the base URL {base_url} ends in /v1, which the client adds itself "
            f"(it asked for {base_url}/v1/…): drop the /v1 and give {root}"
        )
    return (
        f"; the base URL {base_url} may lack the vendor's path: a gateway "
        "often serves its API under a stage prefix (e.g. https://host/prod)"
    )


def field(payload: dict[str, Any], name: str, where: str, url: str) -> int:
    value = count_field(payload, name)
    if value is None:
        shown = payload.get(name)
        raise MalformedResponseError(
            f"field {name!r} is {shown!r:.40}, not a count ({where})", url=strip_query(url)
        )
    return value


def data_rows(payload: dict[str, Any], data: list[Any], where: str, url: str) -> int:
    """``dataRows`` as sent, or the length of ``data`` when a vendor leaves it out."""
    if "dataRows" not in payload:
        return len(data)
    return field(payload, "dataRows", where, url)


def list_field(payload: dict[str, Any], where: str, url: str) -> list[Any]:
    data = payload.get("data")
    if not isinstance(data, list):
        raise MalformedResponseError(
            f"field 'data' is {type(data).__name__}, not a list ({where})", url=strip_query(url)
        )
    return data


def redirect(
    response: requests.Response, url: str, where: str, facts: VendorFacts
) -> Redirected | ServiceError:
    """:class:`~parcelsearch._fetch.http.Redirected` for a GET that stays on the base URL's
    https origin (remembered for the next requests), else the refusal naming Location."""
    location = response.headers.get("Location", "")
    target = urljoin(url, location)
    base, there = urlsplit(facts.base_url), urlsplit(target)
    if location and there.scheme == "https" and there.netloc == base.netloc:
        if there.query == urlsplit(url).query:
            facts.remember_move(url, target)
        return Redirected(target)
    shown = strip_query(target) if location else "nowhere (no Location header)"
    return ServiceError(
        f"HTTP {response.status_code}: the vendor redirects {where} to {shown}; "
        "parcelsearch follows only redirects to the same https:// host and port, so the "
        "key is never sent elsewhere or unencrypted. If that address is the service, "
        "use it as the base URL",
        status=response.status_code,
        url=strip_query(url),
        hints=[Hint("base_url", phrase="check {knob}")],
    )


def judge_probe(response: requests.Response, url: str, where: str, facts: VendorFacts) -> Probe:
    """An answer to :meth:`parcelsearch.Client.probe` described, not judged: same-origin
    redirects followed; cut bodies, 5xx, spike arrest and maintenance pages transient."""
    body = _body(response, url, where)
    status = response.status_code
    if status in REDIRECTS:
        raise redirect(response, response.url or url, where, facts)
    payload = read_json(body) if status == 200 else None
    refusal = None
    if not (isinstance(payload, dict) and payload.get("status") == "OK"):
        refusal = read_refusal(status, body, response.headers.get("Content-Type", ""))
        if (
            refusal.kind == "spike"
            or (status >= 500 and refusal.kind != "quota")
            or (status == 200 and refusal.shape == "html")
        ):
            raise Transient(
                str(status),
                service_error(status, response.headers, refusal, url, where, facts.base_url),
            )
        hop = facts.unlearn(status, refusal, response.url or url)
        if hop is not None:
            raise hop
    return Probe(
        status,
        response.headers.get("Content-Encoding", "identity"),
        payload if isinstance(payload, dict) else None,
        refusal,
        response.headers.get("Sunset") or None,
    )


# -- reading an accepted answer ----------------------------------------------------------


def not_sent(page: int, line: int, url: str, facts: VendorFacts) -> ServiceError | None:
    """The refusal of page ``page`` (its request line ``line`` bytes) before it is sent: a
    line over the limit the gateway taught, or a page beyond the result window; else None."""
    limit = facts.max_request_bytes
    if facts.max_request_bytes_source == "learnt" and line > limit:
        return RequestTooLargeError(  # the gateway refused such lines: not sent to it
            f"not sent: a request line of {line:,} bytes, over the {limit:,}"
            f" bytes the gateway at {facts.base_url} takes (learnt from its refusal)",
            status=414,
            url=strip_query(url),
            hints=[Hint("max_request_bytes", limit)],
        )
    window = facts.result_window
    if window is not None and page > window:
        return ResultWindowError(  # the vendor refuses pages that deep: not sent to it
            f"not sent: page {page}, beyond the {window} pages the vendor at "
            f"{facts.base_url} serves a search ({facts.result_window_source}); the piece "
            "must be split",
            window=window,
            url=strip_query(url),
            hints=[Hint("result_window", window)],
        )
    return None


def page_reader(
    polygon_json: str, page: int, path: str, url: str, facts: VendorFacts
) -> Callable[[dict[str, Any], str], Page]:
    """The reader of an accepted answer to page ``page`` of a search (``url``): the checked
    :class:`~parcelsearch._fetch.page.Page`, teaching the page size a page 1 shows."""
    sent = page - 1 + facts.page_base  # the vendor's number for our page `page`
    key = _wire.request_key(facts.base_url, path, polygon_json, page)

    def read(payload: dict[str, Any], where: str) -> Page:
        echoed = field(payload, "page", where, url)
        data = list_field(payload, where, url)
        rows = field(payload, "rows", where, url)
        pages = field(payload, "pages", where, url)
        if page > 1 and rows and (not data or page > pages):
            raise PageGoneError(
                f"page {page} is past the last page of an answer of {rows} rows "
                f"({where}): the result changed since page 1",
                url=strip_query(url),
            )
        if echoed != sent:
            raise MalformedResponseError(
                f"asked for page {sent}, got page {echoed!r} ({where})", url=strip_query(url)
            )
        result = Page(
            request_key=key,
            polygon_json=polygon_json,
            page=page,
            rows=rows,
            pages=pages,
            data_rows=data_rows(payload, data, where, url),
            data=tuple(data),
            base_url=facts.base_url,
            path=path,
        )
        taught = facts.page_size_taught(result)
        check_page(result, url=strip_query(url), page_size=taught or facts.size_for(result))
        if taught is not None:
            facts.adopt_page_size(taught)
        return result

    return read


def markets_reader(url: str) -> Callable[[dict[str, Any], str], list[str]]:
    """The reader of an accepted answer to the markets request (``url``): the names."""

    def read(payload: dict[str, Any], where: str) -> list[str]:
        data = list_field(payload, where, url)
        if data_rows(payload, data, where, url) != len(data):
            raise MalformedResponseError(
                f"markets: dataRows is {payload['dataRows']} but data holds {len(data)} names",
                url=url,
            )
        if not all(isinstance(name, str) and name.strip() for name in data):
            raise MalformedResponseError(f"markets: data holds non-text names ({where})", url=url)
        return list(data)

    return read


def page_base_reader(url: str) -> Callable[[dict[str, Any], str], int]:
    """The reader of an accepted answer to ``page=0`` (``url``): 0 when the vendor answers
    it as its first page, 1 when not."""

    def read(payload: dict[str, Any], where: str) -> int:
        data = list_field(payload, where, url)
        echoed = count_field(payload, "page")
        rows = count_field(payload, "rows")
        return 0 if echoed == 0 and (data or rows == 0) else 1

    return read


def _body(response: requests.Response, url: str, where: str) -> bytes:
    """The answer's body; a body cut short or undecodable is transient (asked once more)."""
    try:
        return response.content
    except (
        requests.exceptions.ChunkedEncodingError,
        requests.exceptions.ContentDecodingError,
    ) as exc:
        raise Transient(
            "cut body",
            CutBodyError(
                f"response body cut short or undecodable ({where}): {type(exc).__name__}",
                url=strip_query(url),
            ),
        ) from None
