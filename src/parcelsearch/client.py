"""Client of the vendor's Search and Markets services: configuration, requests, answers.

A :class:`Client` holds the configuration (key, base URL, CA bundle, rate — from its
arguments, else :data:`parcelsearch.settings.options` and the environment, read by
:mod:`parcelsearch._fetch.config`), what is known of the vendor
(:class:`~parcelsearch._fetch.learning.VendorFacts`), and one
:class:`parcelsearch._fetch.http.Transport` (session, shared pacer, retry loop) that every thread
using the client shares. This module knows the services' API: the request targets; which
answers are transient (5xx, spike arrest, a 200 whose body is cut, not JSON or does not add
up) and which are final (quota violation, bad key, bad polygon), and how each maps onto the
error tree, is judged in :mod:`parcelsearch._fetch.judging`. The mechanism of sending is in
:mod:`parcelsearch._fetch.http`.

Examples
--------
>>> client = Client("my-key", "https://api.example.com")  # doctest: +SKIP
>>> ring = '[[-97.5,32.25],[-97.4,32.25],[-97.4,32.3],[-97.5,32.25]]'
>>> client.search_page(ring, 1)  # doctest: +SKIP
Page(page=1/3, rows=245, data_rows=100, from_cache=False, key=5d41402abc4b…)
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Generic, Self, TypeVar, overload
from urllib.parse import urlsplit

import requests

from parcelsearch import _wire, settings
from parcelsearch._fetch.config import (
    Secret,
    positive,
    resolve_base_url,
    resolve_ca_bundle,
    resolve_key,
)
from parcelsearch._fetch.http import Spend, Transport
from parcelsearch._fetch.judging import (
    Probe,
    describe,
    judge,
    judge_probe,
    markets_reader,
    not_sent,
    page_base_reader,
    page_reader,
)
from parcelsearch._fetch.learning import VendorFacts
from parcelsearch._fetch.network import (
    check_proxy,
    choose_trust,
    os_trust_context,
    proxies_for,
    proxy_source,
)
from parcelsearch._fetch.pacing import Cancelled, RateLimiter
from parcelsearch._fetch.page import Page
from parcelsearch._fetch.retries import RetryPolicy
from parcelsearch._fetch.session import new_session
from parcelsearch._fetch.vendor_profile import VendorProfile
from parcelsearch.errors import BadPolygonError, InputError, PageGoneError
from parcelsearch.notices import LearntFactWarning

__all__ = ["Client", "RateLimiter", "RetryPolicy", "key_fingerprint", "Cancelled"]

log = logging.getLogger(__name__)

T = TypeVar("T")
V = TypeVar("V")


def key_fingerprint(api_key: str) -> str:
    """First 16 hex digits of the key's sha256: names a key without revealing it."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:16]


class _Fact(Generic[V]):
    """An attribute of the client that is one of its :class:`VendorFacts`' (read and set
    there)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, client: None, owner: type) -> _Fact[V]: ...
    @overload
    def __get__(self, client: _BaseClient, owner: type) -> V: ...
    def __get__(self, client: _BaseClient | None, owner: type) -> _Fact[V] | V:
        if client is None:
            return self
        value: V = getattr(client.facts, self.name)
        return value

    def __set__(self, client: _BaseClient, value: V) -> None:
        setattr(client.facts, self.name, value)


class _BaseClient:
    """A client's configuration and what is known of the vendor: everything of a
    :class:`Client` but its requests (as httpx's ``BaseClient`` holds its configuration)."""

    #: What is known of the vendor at this base URL (kept in the cache folder; not the
    #: saved credentials ``profile=`` names).
    vendor = _Fact[VendorProfile]()
    #: The number the vendor gives its first page (0 or 1): learned, or from the profile.
    page_base = _Fact[int]()
    #: GroupIDs a full page holds: set by the user, else learnt (kept in the profile),
    #: else 100.
    page_size = _Fact[int]()
    #: The longest request line the gateway takes (pieces are planned to it): set by the
    #: user, else learnt from a refusal (kept in the profile), else 7,168 bytes.
    max_request_bytes = _Fact[int]()
    #: Pages the vendor serves a search at most: set by the user, else learnt from its
    #: refusal of a deeper page (kept in the profile), else ``None`` (no limit known).
    result_window = _Fact[int | None]()
    #: Where a fact learnt is told (a run's fetch loop, which says it at once on its own
    #: line); ``None``: warned where it is learnt.
    tell = _Fact[Callable[[LearntFactWarning], None] | None]()
    #: Where :attr:`max_request_bytes` comes from: ``"set"``, ``"learnt"`` or ``"assumed"``.
    max_request_bytes_source = _Fact[str]()
    #: Where :attr:`result_window` comes from: ``"set"``, ``"learnt"`` or ``"none"``.
    result_window_source = _Fact[str]()
    #: Where :attr:`page_size` comes from: ``"set"``, ``"learnt"`` or ``"assumed"``.
    page_size_source = _Fact[str]()
    #: Whether the vendor's first page number is known (learned, or in the profile).
    page_base_known = _Fact[bool]()

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
        response_deadline: float | None = None,
        max_request_bytes: int | None = None,
        proxy: str | None = None,
    ) -> None:
        from parcelsearch.profiles import profile_proxy, profile_quota, resolve  # a saved

        # profile fills what is not given
        proxy_named = proxy is not None or bool(settings.options.proxy)
        key_given = api_key
        api_key, base_url, ca_bundle = resolve(profile, api_key, base_url, ca_bundle)
        key = resolve_key(api_key)
        self._key = Secret(key)
        self._fingerprint = key_fingerprint(key)
        #: The quota saved with the profile whose key this is, and the profile's name
        #: (``parcelsearch login --quota``); a search with no quota of its own uses it.
        self.profile_quota = profile_quota(profile, key_given, self._fingerprint)
        self.base_url = resolve_base_url(base_url)
        self.ca_bundle = resolve_ca_bundle(ca_bundle)
        #: The certificates trusted (a CA bundle and where it was named, or the OS store).
        self.trust = choose_trust(self.ca_bundle)
        given = proxy if proxy is not None else (settings.options.proxy or None)
        if not proxy_named:
            given = profile_proxy(profile, key_given)  # the key as given: a default
            # profile filled api_key above, and chosen() reads a given key as "no profile"
        self._proxy = Secret(check_proxy(given)) if given else None
        #: Where the proxy given came from (for ``doctor``).
        self.proxy_source = (
            "Client(proxy=...) or --proxy"
            if proxy is not None
            else settings.ENV_PROXY
            if settings.options.proxy
            else "the profile"
        )
        self.rate = positive(rate, "rate", "calls per second", 10)
        self.timeout = float(timeout)
        self.response_deadline = positive(response_deadline, "response_deadline", "seconds", 60)
        settings.group_id_max_chars()  # refused now, not at the first page read
        page_size_set = settings.page_size_setting()  # likewise
        line_limit_set = settings.max_request_bytes_setting(max_request_bytes)
        window_set = settings.result_window_setting()  # likewise
        self.retry = retries if isinstance(retries, RetryPolicy) else RetryPolicy(total=retries)
        self.session = (
            session
            if session is not None
            else new_session(os_trust_context() if self.trust.path is None else None)
        )
        self.transport = Transport(
            self.session,
            RateLimiter(self.rate),
            self.retry,
            timeout=self.timeout,
            verify=self.trust.verify,
            deadline=self.response_deadline,
            proxy=self._proxy.reveal() if self._proxy is not None else None,
            trust=str(self.trust),
        )
        self.cache_dir = Path(cache_dir) if cache_dir is not None else settings.options.cache_dir
        #: What is known of the vendor and how more is learnt (its page base, page size,
        #: request-line limit, result window and moved paths).
        self.facts = VendorFacts(
            self.base_url,
            self.cache_dir,
            page_size_set=page_size_set,
            line_limit_set=line_limit_set,
            window_set=window_set,
        )
        #: Told of every answer's status and headers (a run reads the quota headers from
        #: them); ``None``: nobody listens.
        self.heard: Callable[[int, Mapping[str, str]], None] | None = None

    def learn(self, **observed: Any) -> None:
        """Remember what was observed of the vendor (``page_base=0``, ``moved={...}``,
        ``compression=…``, ``error_format=…``, ``match_rule=…``) in its profile in the cache
        folder; a folder that cannot be written only loses the memory, never the run."""
        self.facts.learn(**observed)

    @property
    def proxy(self) -> str:
        """Which proxy requests to the vendor go through, and why (credentials hidden)."""
        given = self._proxy.reveal() if self._proxy is not None else None
        return proxy_source(self.base_url, given, self.proxy_source)

    @property
    def proxied(self) -> bool:
        """Whether requests to the vendor go through a proxy."""
        return bool(proxies_for(self.base_url, self.transport.proxy))

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the session's pooled connections."""
        self.session.close()


class Client(_BaseClient):
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
        PEM file of certificate authorities to trust (e.g. a local service's ``ca.pem``, or
        the CA of an organisation's TLS-inspecting proxy); default
        ``settings.options.ca_bundle`` (``$PARCELSEARCH_CA_BUNDLE``), else the profile's,
        else ``$REQUESTS_CA_BUNDLE``, else ``$SSL_CERT_FILE``, else the operating system's
        trust store. TLS is always verified.
    proxy
        The proxy to reach the vendor through, ``http://[user:password@]host:port``;
        default ``settings.options.proxy`` (``$PARCELSEARCH_PROXY``), else the profile's,
        else ``$HTTPS_PROXY`` / ``$ALL_PROXY``. ``$NO_PROXY`` is honoured, and loopback
        hosts are never proxied. Its credentials go to the proxy only and are never shown.
    rate
        Calls per second the key allows; default ``settings.options.rate``
        (``$PARCELSEARCH_RATE``, else 10).
    timeout
        Seconds to wait to connect and between bytes of a response.
    response_deadline
        Seconds one response may take as a whole, however slowly its bytes come (then it is
        abandoned and retried like a timeout); default ``settings.options.response_deadline``
        (``$PARCELSEARCH_RESPONSE_DEADLINE``, else 60).
    max_request_bytes
        The longest request line the vendor's gateway takes (searches plan pieces to it;
        nothing is learnt over it); default ``settings.options.max_request_bytes``
        (``$PARCELSEARCH_MAX_REQUEST_BYTES``), else learnt from a refusal, else 7,168.
    retries
        Retries per request (int), or a :class:`~parcelsearch._fetch.retries.RetryPolicy`.
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

    def probe_page_base(
        self,
        polygon_json: str,
        *,
        path: str = settings.SEARCH_PATH,
        spend: Spend | None = None,
        cancel: threading.Event | None = None,
    ) -> int:
        """Ask for ``page=0`` of a ring (one call): 0 when the vendor answers it as its first
        page, 1 when it refuses it (as a vendor counting from 1 does)."""
        target = _wire.search_target(path, polygon_json, 0)
        try:
            return self._get(target, page_base_reader(self.base_url + target), spend, cancel)
        except BadPolygonError:
            return 1

    def probe(
        self, target: str, *, spend: Spend | None = None, cancel: threading.Event | None = None
    ) -> Probe:
        """One GET of ``target`` whose answer is described, not judged (for
        :func:`parcelsearch.check_service`): status, compression and the body read once.
        Same-origin redirects are followed; cut bodies, 5xx and spike arrest are retried."""
        url = self.facts.moved_url(self.base_url + target)

        def described(response: requests.Response) -> Probe:
            where = self._where(target, response.url or url)
            return judge_probe(response, url, where, self.facts)

        return self._send(url, self._where(target, url), described, spend, cancel)

    def _where(self, target: str, url: str) -> str:
        """The request described by the path actually requested: ``target``'s, or the path a
        learnt move or a redirect sent it to."""
        if url.partition("?")[0] == self.base_url + target.partition("?")[0]:
            return describe(target)
        parts = urlsplit(url)
        return describe(parts.path + (f"?{parts.query}" if parts.query else ""))

    # -- requests ---------------------------------------------------------------------

    def line_bytes(self, polygon_json: str, page: int, *, path: str = settings.SEARCH_PATH) -> int:
        """The request line (``GET … HTTP/1.1``, bytes) that page ``page`` of a search of
        ``polygon_json`` is sent with (where a redirect moved the path, the moved one)."""
        sent = page - 1 + self.page_base
        return self._line_bytes(self.base_url + _wire.search_target(path, polygon_json, sent))

    def _line_bytes(self, url: str) -> int:
        return _wire.request_line_bytes(self.facts.moved_url(url).removeprefix(self.base_url))

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
            (:class:`~parcelsearch._fetch.pacing.Cancelled` is raised instead).

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
            raise InputError(f"page must be an integer >= 1, got {page!r}", field="page")
        sent = page - 1 + self.page_base  # the vendor's number for our page `page`
        target = _wire.search_target(path, polygon_json, sent)
        url = self.base_url + target
        refused = not_sent(page, self._line_bytes(url), url, self.facts)
        if refused is not None:
            raise refused
        read = page_reader(polygon_json, page, path, url, self.facts)
        empty = {"status": "OK", "rows": 0, "pages": 0, "page": sent, "data": []}
        try:
            return self._get(target, read, spend, cancel, empty=empty if page == 1 else None)
        except BadPolygonError as exc:
            if page == 1:
                raise
            raise PageGoneError(  # the polygon was accepted for page 1: it is the page
                f"page {page} refused ({exc.message}): the result changed since page 1", url=exc.url
            ) from None

    def markets(
        self,
        *,
        path: str = settings.MARKETS_PATH,
        spend: Spend | None = None,
        cancel: threading.Event | None = None,
    ) -> list[str]:
        """Names of the active markets: one call, uncached (:func:`parcelsearch.markets` caches)."""
        return self._get(path, markets_reader(self.base_url + path), spend, cancel)

    def _get(
        self,
        target: str,
        read: Callable[[dict[str, Any], str], T],
        spend: Spend | None,
        cancel: threading.Event | None,
        *,
        empty: dict[str, Any] | None = None,
    ) -> T:
        url = self.facts.moved_url(self.base_url + target)
        where = self._where(target, url)

        def judged(response: requests.Response) -> T:
            asked = response.url or url
            where = self._where(target, asked)
            return judge(response, read, where, asked, spend, self.facts, self.heard, empty)

        log.debug("GET %s (key %s)", where, self._fingerprint)
        return self._send(url, where, judged, spend, cancel)

    def _send(
        self,
        url: str,
        where: str,
        judged: Callable[[requests.Response], T],
        spend: Spend | None,
        cancel: threading.Event | None,
    ) -> T:
        return self.transport.get(
            url,
            headers={"x-api-key": self._key.reveal(), "Accept": "application/json"},
            judge=judged,
            describe=where,
            spend=spend,
            cancel=cancel,
        )
