"""Client of the vendor's Search and Markets services: configuration, requests, answers.

A :class:`Client` holds the configuration (key, base URL, CA bundle, rate — from its
arguments, else :data:`parcelsearch.settings.options` and the environment), and one
:class:`parcelsearch._http.Transport` (session, shared pacer, retry loop) that every thread
using the client shares. This module knows the services' API: the request targets, which
answers are transient (5xx, spike arrest, a 200 whose body is cut, not JSON or does not add
up) and which are final (quota violation, bad key, bad polygon), and how each maps onto the
error tree. The mechanism of sending is in :mod:`parcelsearch._http`.

Examples
--------
>>> client = Client("my-key", "https://api.example.com")  # doctest: +SKIP
>>> ring = '[[-97.5,32.25],[-97.4,32.25],[-97.4,32.3],[-97.5,32.25]]'
>>> client.search_page(ring, 1)  # doctest: +SKIP
Page(page=1/3, rows=245, data_rows=100, from_cache=False, key=5d41402abc4b…)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import requests

from parcelsearch import _wire, settings
from parcelsearch._http import (
    RETRY_STATUSES,
    Cancelled,
    RateLimiter,
    RetryPolicy,
    Spend,
    Transient,
    Transport,
    new_session,
    retry_after,
    strip_query,
)
from parcelsearch.errors import (
    AuthenticationError,
    BadPolygonError,
    ConfigurationError,
    Hint,
    MalformedResponseError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTooLargeError,
    ServiceError,
    ServiceFailureError,
)
from parcelsearch.page import Page, check_page

__all__ = ["Client", "RateLimiter", "RetryPolicy", "key_fingerprint", "Cancelled"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def key_fingerprint(api_key: str) -> str:
    """First 16 hex digits of the key's sha256: names a key without revealing it."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:16]


class _Secret:
    """Holds the key; its repr never shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"


class Client:
    """Client of the vendor's Search and Markets services.

    Parameters
    ----------
    api_key
        The vendor key; default ``$PARCELSEARCH_API_KEY``. Sent as the ``x-api-key`` header
        and never shown: reprs, logs, errors, cache and ledger use :attr:`fingerprint`.
    base_url
        ``https://`` root of the services; default ``settings.options.base_url``
        (``$PARCELSEARCH_BASE_URL``). ``http://`` is refused: the services are HTTPS only.
    ca_bundle
        PEM file of certificate authorities to trust (e.g. a local service's ``ca.pem``);
        default ``settings.options.ca_bundle`` (``$PARCELSEARCH_CA_BUNDLE``), else the
        system store. TLS is always verified.
    rate
        Calls per second the key allows; default ``settings.options.rate``
        (``$PARCELSEARCH_RATE``, else 10).
    timeout
        Seconds to wait to connect and between bytes of a response.
    retries
        Retries per request (int), or a :class:`~parcelsearch._http.RetryPolicy`.
    session
        A ``requests.Session`` to send through (its adapters decide the transport); for
        tests that inject faults. Default: a new session with urllib3 retries off.
    cache_dir
        Folder of the response cache, market list and quota ledger that searches with this
        client use by default; default ``settings.options.cache_dir``.
    profile
        A profile saved with ``parcelsearch login`` (:mod:`parcelsearch.profiles`): its key,
        base URL and CA bundle fill what is not given here. Default
        ``$PARCELSEARCH_PROFILE``, else ``default`` when saved and no key is given nor in
        ``$PARCELSEARCH_API_KEY``.

    Raises
    ------
    ConfigurationError
        Missing key or base URL (the message says how to set them), ``http://`` URL,
        missing CA bundle, or a rate that is not a positive number.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        ca_bundle: str | os.PathLike[str] | None = None,
        rate: float | None = None,
        *,
        timeout: float = 30.0,
        retries: int | RetryPolicy = 5,
        session: requests.Session | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        profile: str | None = None,
    ) -> None:
        from parcelsearch.profiles import resolve  # a saved profile fills what is not given

        api_key, base_url, ca_bundle = resolve(profile, api_key, base_url, ca_bundle)
        key = _resolve_key(api_key)
        self._key = _Secret(key)
        self._fingerprint = key_fingerprint(key)
        self.base_url = _resolve_base_url(base_url)
        self.ca_bundle = _resolve_ca_bundle(ca_bundle)
        self.rate = _resolve_rate(rate)
        self.timeout = float(timeout)
        self.retry = retries if isinstance(retries, RetryPolicy) else RetryPolicy(total=retries)
        self.session = session if session is not None else new_session()
        self.transport = Transport(
            self.session, RateLimiter(self.rate), self.retry, timeout=self.timeout,
            verify=self.ca_bundle or True,
        )
        self.cache_dir = Path(cache_dir) if cache_dir is not None else settings.options.cache_dir

    @property
    def fingerprint(self) -> str:
        """First 16 hex digits of the key's sha256 (what caches and ledgers record)."""
        return self._fingerprint

    @property
    def limiter(self) -> RateLimiter:
        """The pacer every thread using this client shares."""
        return self.transport.limiter

    @property
    def stats(self) -> Counter[str]:
        """Requests answered and retries made, by status or error (e.g. ``"retried 429"``)."""
        return self.transport.stats

    def __repr__(self) -> str:
        return (
            f"Client(base_url={self.base_url!r}, key=sha256:{self._fingerprint}…, "
            f"rate={self.rate:g}/s)"
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the session's pooled connections."""
        self.session.close()

    # -- requests ---------------------------------------------------------------------

    def search_page(
        self,
        polygon_json: str,
        page: int,
        *,
        path: str = settings.SEARCH_PATH,
        spend: Spend | None = None,
        cancel: threading.Event | None = None,
    ) -> Page:
        """Fetch one page of a search: ``GET <path>?searchPolygon=<ring>&page=<page>``.

        A 200 whose body is not JSON, is cut short, or whose counts do not add up is a
        transient fault: it is retried like a 5xx (each retry is a call).

        Parameters
        ----------
        polygon_json
            The canonical ring JSON (see :func:`parcelsearch._wire.ring_json`).
        page
            Page number, from 1.
        path
            The search path (``/v1/search``, or ``/prod/v1/search`` on the stage gateway).
        spend
            ``spend.reserve()`` before every HTTP attempt, retries included (may raise to
            stop); ``spend.refund()`` after an attempt the service did not count.
        cancel
            Once set, no further attempt is sent and back-off sleeps wake at once
            (:class:`~parcelsearch._http.Cancelled` is raised instead).

        Returns
        -------
        Page
            The checked page (``from_cache=False``).

        Raises
        ------
        ServiceError
            The service's error envelope, mapped to its subclass (status and messages kept).
        MalformedResponseError
            Answers that did not add up through every retry.
        TransportError
            No response after the retries (connection refused or reset, timeouts, TLS).
        """
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise ValueError(f"page must be an integer >= 1, got {page!r}")
        target = _wire.search_target(path, polygon_json, page)
        url = self.base_url + target
        key = _wire.request_key(self.base_url, path, polygon_json, page)

        def read(payload: dict[str, Any], where: str) -> Page:
            echoed = _field(payload, "page", where, url)
            if echoed != page:
                raise MalformedResponseError(f"asked for page {page}, got page {echoed!r} "
                                             f"({where})", url=strip_query(url))
            result = Page(
                request_key=key, polygon_json=polygon_json, page=page,
                rows=_field(payload, "rows", where, url),
                pages=_field(payload, "pages", where, url),
                data_rows=_field(payload, "dataRows", where, url),
                data=tuple(_list_field(payload, where, url)),
                base_url=self.base_url, path=path,
            )
            check_page(result, url=strip_query(url))
            return result

        return self._get(target, read, spend, cancel)

    def markets(
        self,
        *,
        path: str = settings.MARKETS_PATH,
        spend: Spend | None = None,
        cancel: threading.Event | None = None,
    ) -> list[str]:
        """Names of the active markets: one call, uncached (:func:`parcelsearch.markets` caches)."""
        url = self.base_url + path

        def read(payload: dict[str, Any], where: str) -> list[str]:
            data = _list_field(payload, where, url)
            if _field(payload, "dataRows", where, url) != len(data):
                raise MalformedResponseError(
                    f"markets: dataRows is {payload['dataRows']} but data holds {len(data)} "
                    "names", url=url)
            if not all(isinstance(name, str) and name.strip() for name in data):
                raise MalformedResponseError(f"markets: data holds non-text names ({where})",
                                             url=url)
            return list(data)

        return self._get(path, read, spend, cancel)

    def _get(
        self,
        target: str,
        read: Callable[[dict[str, Any], str], T],
        spend: Spend | None,
        cancel: threading.Event | None,
    ) -> T:
        url = self.base_url + target
        where = _describe(target)

        def judge(response: requests.Response) -> T:
            return _judge(response, read, where, url, spend)

        log.debug("GET %s (key %s)", where, self._fingerprint)
        return self.transport.get(
            url, headers={"x-api-key": self._key.reveal(), "Accept": "application/json"},
            judge=judge, describe=where, spend=spend, cancel=cancel,
        )


# -- answers -----------------------------------------------------------------------------


def _judge(
    response: requests.Response,
    read: Callable[[dict[str, Any], str], T],
    where: str,
    url: str,
    spend: Spend | None,
) -> T:
    """Accept a 200 that adds up; call cut, unreadable or inconsistent bodies transient."""
    try:
        body = response.content
    except (requests.exceptions.ChunkedEncodingError,
            requests.exceptions.ContentDecodingError) as exc:
        raise Transient("cut body", MalformedResponseError(
            f"response body cut short or undecodable ({where}): {type(exc).__name__}",
            url=strip_query(url))) from None
    if response.status_code != 200:
        error = _service_error(response.status_code, response.headers, body, url, where)
        if response.status_code == 429 or isinstance(error, AuthenticationError):
            if spend is not None:
                spend.refund()  # refused at the gate: the service did not count it
        if response.status_code in RETRY_STATUSES and not isinstance(
                error, QuotaExhaustedError):
            raise Transient(str(response.status_code), error)
        raise error
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) != len(body):
        raise Transient("cut body", MalformedResponseError(
            f"response body cut short: {len(body)} of {declared} bytes ({where})",
            url=strip_query(url)))
    try:
        payload = json.loads(body)
    except ValueError:
        raise Transient("body not JSON", MalformedResponseError(
            f"response is not JSON ({len(body)} bytes, {where}): {body[:60]!r}",
            url=strip_query(url))) from None
    if not isinstance(payload, dict) or payload.get("status") != "OK":
        status_field = payload.get("status") if isinstance(payload, dict) else None
        raise MalformedResponseError(
            f"HTTP 200 but status {status_field!r}, not 'OK' ({where}): "
            + "; ".join(_messages(body)), url=strip_query(url))
    try:
        return read(payload, where)
    except MalformedResponseError as exc:
        raise Transient("counts disagree", exc) from None


def _describe(target: str) -> str:
    """A short, key-free description of a request for messages and logs."""
    path, _, query = target.partition("?")
    if not query:
        return f"GET {path}"
    params = dict(part.partition("=")[::2] for part in query.split("&"))
    polygon = params.get("searchPolygon", "")
    return f"GET {path} page {params.get('page', '?')}, searchPolygon of {len(polygon)} bytes"


# -- configuration ---------------------------------------------------------------------


def _resolve_key(api_key: str | None) -> str:
    key = api_key if api_key is not None else os.environ.get(settings.ENV_API_KEY, "")
    key = key.strip()
    if not key:
        raise ConfigurationError("no API key.", hints=[Hint("api_key")])
    if any(ch.isspace() or not ch.isprintable() or ord(ch) > 126 for ch in key):
        raise ConfigurationError(
            "the API key holds whitespace or non-ASCII characters.",
            hints=[Hint("api_key", phrase="check the value of {knob}")])
    return key


def _resolve_base_url(base_url: str | None) -> str:
    url = base_url if base_url is not None else (settings.options.base_url or "")
    if not url.strip():
        raise ConfigurationError("no base URL of the services.", hints=[Hint("base_url")])
    return settings.check_base_url(url)


def _resolve_ca_bundle(ca_bundle: str | os.PathLike[str] | None) -> str | None:
    value = ca_bundle if ca_bundle is not None else settings.options.ca_bundle
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigurationError(
            f"CA bundle {str(path)!r} is not a file (a local service writes ca.pem in its "
            "certificate folder).", hints=[Hint("ca_bundle", phrase="point {knob} at a PEM file")])
    try:  # read now, not at the first request that misses the cache
        ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(
            f"CA bundle {str(path)!r} holds no certificate that can be read "
            f"({getattr(exc, 'reason', None) or exc.strerror or exc}).",
            hints=[Hint("ca_bundle", phrase="point {knob} at a PEM file")]) from None
    return str(path)


def _resolve_rate(rate: float | None) -> float:
    value: Any = rate if rate is not None else settings.options.rate
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            0 < value < float("inf")):
        raise ConfigurationError(
            f"rate must be a positive number of calls per second, got {value!r}.",
            hints=[Hint("rate", 10)])
    return float(value)


# -- responses -------------------------------------------------------------------------


def _messages(body: bytes) -> list[str]:
    """The ``messages`` of an error envelope, or ``[]``."""
    try:
        payload = json.loads(body)
    except ValueError:
        return []
    messages = payload.get("messages") if isinstance(payload, dict) else None
    if isinstance(messages, list):
        return [str(m) for m in messages]
    return []


def _is_quota(messages: list[str]) -> bool:
    return any("quota" in message.lower() for message in messages)


_ERRORS: dict[int, type[ServiceError]] = {
    400: BadPolygonError,
    401: AuthenticationError,
    403: AuthenticationError,
    414: RequestTooLargeError,
}


def _service_error(
    status: int, headers: Mapping[str, str], body: bytes, url: str, where: str
) -> ServiceError:
    messages = _messages(body)
    if status == 429:
        cls: type[ServiceError] = QuotaExhaustedError if _is_quota(messages) else RateLimitError
    elif status >= 500:
        cls = ServiceFailureError
    else:
        cls = _ERRORS.get(status, ServiceError)
    text = "; ".join(messages) if messages else f"no error envelope: {body[:120]!r}"
    note = {
        QuotaExhaustedError: ": the key has no calls left this period",
        RateLimitError: ": still rate-limited after the retries",
        ServiceFailureError: ": the service kept failing through the retries",
    }.get(cls, "")
    hints = [Hint("api_key", phrase="check {knob}")] if cls is AuthenticationError else []
    return cls(f"HTTP {status}: {text} ({where}){note}.", status=status, messages=messages,
               url=strip_query(url), retry_after=retry_after(headers), hints=hints)


def _field(payload: dict[str, Any], name: str, where: str, url: str) -> int:
    value = payload.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedResponseError(f"field {name!r} is {value!r}, not an integer ({where})",
                                     url=strip_query(url))
    return value


def _list_field(payload: dict[str, Any], where: str, url: str) -> list[Any]:
    data = payload.get("data")
    if not isinstance(data, list):
        raise MalformedResponseError(f"field 'data' is {type(data).__name__}, not a list "
                                     f"({where})", url=strip_query(url))
    return data
