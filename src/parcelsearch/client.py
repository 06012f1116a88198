"""Client of the vendor's Search and Markets services: configuration, requests, answers.

A :class:`Client` holds the configuration (key, base URL, CA bundle, rate — from its
arguments, else :data:`parcelsearch.settings.options` and the environment), and one
:class:`parcelsearch._fetch.http.Transport` (session, shared pacer, retry loop) that every thread
using the client shares. This module knows the services' API: the request targets, which
answers are transient (5xx, spike arrest, a 200 whose body is cut, not JSON or does not add
up) and which are final (quota violation, bad key, bad polygon), and how each maps onto the
error tree. The mechanism of sending is in :mod:`parcelsearch._fetch.http`.

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
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urljoin, urlsplit, urlunsplit

import requests

from parcelsearch import _wire, settings
from parcelsearch._fetch.answers import (
    Refusal,
    count_field,
    read_json,
    read_refusal,
    stated_window,
)
from parcelsearch._fetch.http import (
    RETRY_STATUSES,
    Cancelled,
    RateLimiter,
    Redirected,
    RetryPolicy,
    Spend,
    Transient,
    Transport,
    new_session,
    retry_after,
    strip_query,
)
from parcelsearch._fetch.network import (
    check_proxy,
    choose_trust,
    os_trust_context,
    proxies_for,
    proxy_source,
)
from parcelsearch._fetch.page import Page, check_page, learnt_page_size
from parcelsearch._fetch.vendor_profile import PROFILES_FILE, load_profile, save_profile
from parcelsearch.errors import (
    AuthenticationError,
    BadPolygonError,
    ConfigurationError,
    CutBodyError,
    EndpointGoneError,
    Hint,
    InputError,
    MalformedResponseError,
    PageGoneError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTooLargeError,
    ResultWindowError,
    ServiceError,
    ServiceFailureError,
)
from parcelsearch.notices import LearntFactWarning, warn

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
        Retries per request (int), or a :class:`~parcelsearch._fetch.http.RetryPolicy`.
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
        response_deadline: float | None = None,
        max_request_bytes: int | None = None,
        proxy: str | None = None,
    ) -> None:
        from parcelsearch.profiles import profile_proxy, profile_quota, resolve  # a saved

        # profile fills what is not given
        proxy_named = proxy is not None or bool(settings.options.proxy)
        key_given = api_key
        api_key, base_url, ca_bundle = resolve(profile, api_key, base_url, ca_bundle)
        key = _resolve_key(api_key)
        self._key = _Secret(key)
        self._fingerprint = key_fingerprint(key)
        #: The quota saved with the profile whose key this is, and the profile's name
        #: (``parcelsearch login --quota``); a search with no quota of its own uses it.
        self.profile_quota = profile_quota(profile, key_given, self._fingerprint)
        self.base_url = _resolve_base_url(base_url)
        self.ca_bundle = _resolve_ca_bundle(ca_bundle)
        #: The certificates trusted (a CA bundle and where it was named, or the OS store).
        self.trust = choose_trust(self.ca_bundle)
        given = proxy if proxy is not None else (settings.options.proxy or None)
        if not proxy_named:
            given = profile_proxy(profile, key_given)  # the key as given: a default
            # profile filled api_key above, and chosen() reads a given key as "no profile"
        self._proxy = _Secret(check_proxy(given)) if given else None
        #: Where the proxy given came from (for ``doctor``).
        self.proxy_source = (
            "Client(proxy=...) or --proxy"
            if proxy is not None
            else settings.ENV_PROXY
            if settings.options.proxy
            else "the profile"
        )
        self.rate = _positive(rate, "rate", "calls per second", 10)
        self.timeout = float(timeout)
        self.response_deadline = _positive(response_deadline, "response_deadline", "seconds", 60)
        settings.group_id_max_chars()  # refused now, not at the first page read
        self._page_size_set = settings.page_size_setting()  # likewise
        self._line_limit_set = settings.max_request_bytes_setting(max_request_bytes)
        self._window_set = settings.result_window_setting()  # likewise
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
        #: What is known of the vendor at this base URL (kept in the cache folder; not the
        #: saved credentials ``profile=`` names).
        self.vendor = load_profile(self.cache_dir, self.base_url)
        #: The number the vendor gives its first page (0 or 1): learned, or from the profile.
        self.page_base = self.vendor.page_base if self.vendor.page_base is not None else 1
        #: GroupIDs a full page holds: set by the user, else learnt (kept in the profile),
        #: else 100.
        self.page_size = self._page_size_set or self.vendor.page_size or settings.PAGE_SIZE
        #: The longest request line the gateway takes (pieces are planned to it): set by the
        #: user, else learnt from a refusal (kept in the profile), else 7,168 bytes.
        self.max_request_bytes = (
            self._line_limit_set or self.vendor.max_request_bytes or settings.MAX_REQUEST_LINE_BYTES
        )
        #: Pages the vendor serves a search at most: set by the user, else learnt from its
        #: refusal of a deeper page (kept in the profile), else ``None`` (no limit known).
        self.result_window: int | None = self._window_set or self.vendor.result_window
        self._moved: dict[str, str] = dict(self.vendor.moved)  # paths moved by redirects
        #: Where a fact learnt is told (a run's fetch loop, which says it at once on its own
        #: line); ``None``: warned where it is learnt.
        self.tell: Callable[[LearntFactWarning], None] | None = None
        #: Told of every answer's status and headers (a run reads the quota headers from
        #: them); ``None``: nobody listens.
        self.heard: Callable[[int, Mapping[str, str]], None] | None = None
        self._moved_lock = threading.Lock()
        self._forgotten: dict[str, str] = {}  # learnt paths forgotten: the default each replaced

    @property
    def max_request_bytes_source(self) -> str:
        """Where :attr:`max_request_bytes` comes from: ``"set"``, ``"learnt"`` or
        ``"assumed"``."""
        if self._line_limit_set is not None:
            return "set"
        return "learnt" if self.vendor.max_request_bytes is not None else "assumed"

    def _learn_line_limit(self, url: str) -> int | None:
        """After a refusal of ``url``'s request line as too long: the limit it teaches (the
        largest usual gateway limit below that line, kept in the profile), or ``None`` when
        the user set one or it teaches nothing lower."""
        sent = len(f"GET {url.removeprefix(self.base_url) or '/'} HTTP/1.1".encode())
        below = [n for n in LINE_LIMITS if n < min(sent, self.max_request_bytes + 1)]
        if self._line_limit_set is not None or not below:
            return None
        self.max_request_bytes = below[0]
        self.learn(max_request_bytes=below[0])
        return below[0]

    @property
    def result_window_source(self) -> str:
        """Where :attr:`result_window` comes from: ``"set"``, ``"learnt"`` or ``"none"``."""
        if self._window_set is not None:
            return "set"
        return "learnt" if self.vendor.result_window is not None else "none"

    def _learn_window(self, refused: int, stated: int | None = None) -> int | None:
        """After the vendor refused our page ``refused`` as beyond its result window: the
        window it teaches (``stated`` by its words, else the page before; kept in the
        profile), or ``None`` when the user set one or it teaches nothing."""
        window = stated if stated is not None else refused - 1
        if self._window_set is not None or window < 1:
            return None
        with self._moved_lock:
            if self.result_window is not None and self.result_window <= window:
                return self.result_window
            self.result_window = window
        self.learn(result_window=window)
        return window

    @property
    def page_size_source(self) -> str:
        """Where :attr:`page_size` comes from: ``"set"``, ``"learnt"`` or ``"assumed"``."""
        if self._page_size_set is not None:
            return "set"
        return "learnt" if self.vendor.page_size is not None else "assumed"

    def _page_size_taught(self, page: Page) -> int | None:
        """The page size a page 1 teaches (:func:`learnt_page_size`), never over one the user
        set."""
        if self._page_size_set is not None or page.page != 1:
            return None
        return learnt_page_size(page, self.page_size)

    def _size_for(self, page: Page) -> int:
        """The page size ``page`` is checked against: :attr:`page_size`, or, unless the user
        set it, the whole answer when it says it is one page (a vendor serving more a page
        than known: nothing to learn from it, nothing missing)."""
        if (
            self._page_size_set is None
            and page.page == page.pages == 1
            and page.rows == page.data_rows
        ):
            return max(self.page_size, page.rows)
        return self.page_size

    def _adopt_page_size(self, size: int) -> None:
        """Keep a learnt page size in the profile and say so (once: answers read at the same
        time that teach the same size are quiet)."""
        with self._moved_lock:
            if self.vendor.page_size == size:
                return
            self.vendor.page_size = size
        self.learn(page_size=size)
        told = LearntFactWarning(
            f"the vendor at {self.base_url} serves {size} ids a page (learnt): re-priced; "
            f"kept in {self.cache_dir / PROFILES_FILE}",
            hints=[Hint("page_size", size)],
        )
        tell = self.tell
        if tell is not None:
            tell(told)
        else:
            warn(told)

    @property
    def page_base_known(self) -> bool:
        """Whether the vendor's first page number is known (learned, or in the profile)."""
        return self.vendor.page_base is not None

    def learn(self, **observed: Any) -> None:
        """Remember what was observed of the vendor (``page_base=0``, ``moved={...}``,
        ``compression=…``, ``error_format=…``, ``match_rule=…``) in its profile in the cache
        folder; a folder
        that cannot be written only loses the memory, never the run."""
        with self._moved_lock:
            for name, value in observed.items():
                setattr(self.vendor, name, value)
            if "page_base" in observed:
                self.page_base = int(observed["page_base"])
            if observed.get("page_size"):
                self.page_size = int(observed["page_size"])
            try:
                save_profile(self.cache_dir, self.vendor)
            except OSError as exc:
                log.warning("the vendor profile was not kept in %s: %s", self.cache_dir, exc)

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

        def read(payload: dict[str, Any], where: str) -> int:
            data = _list_field(payload, where, self.base_url + target)
            echoed = count_field(payload, "page")
            rows = count_field(payload, "rows")
            return 0 if echoed == 0 and (data or rows == 0) else 1

        try:
            return self._get(target, read, spend, cancel)
        except BadPolygonError:
            return 1

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

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the session's pooled connections."""
        self.session.close()

    def probe(
        self, target: str, *, spend: Spend | None = None, cancel: threading.Event | None = None
    ) -> Probe:
        """One GET of ``target`` whose answer is described, not judged (for
        :func:`parcelsearch.check_service`): status, compression and the body read once.
        Same-origin redirects are followed; cut bodies, 5xx and spike arrest are retried."""
        url = self._moved_url(self.base_url + target)
        where = self._where(target, url)

        def judge(response: requests.Response) -> Probe:
            where = self._where(target, response.url or url)
            try:
                body = response.content
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
            status = response.status_code
            if status in REDIRECTS:
                raise self._redirect(response, response.url or url, where)
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
                        _service_error(status, response.headers, refusal, url, where, self),
                    )
                hop = self._unlearn(status, refusal, response.url or url)
                if hop is not None:
                    raise hop
            return Probe(
                status,
                response.headers.get("Content-Encoding", "identity"),
                payload if isinstance(payload, dict) else None,
                refusal,
                response.headers.get("Sunset") or None,
            )

        return self.transport.get(
            url,
            headers={"x-api-key": self._key.reveal(), "Accept": "application/json"},
            judge=judge,
            describe=where,
            spend=spend,
            cancel=cancel,
        )

    # -- redirects ----------------------------------------------------------------------

    def _moved_url(self, url: str) -> str:
        """``url`` on the path a same-origin redirect moved it to earlier, if any."""
        path, sep, query = url.partition("?")
        return self._moved.get(path, path) + sep + query

    def _where(self, target: str, url: str) -> str:
        """The request described by the path actually requested: ``target``'s, or the path a
        learnt move or a redirect sent it to."""
        if url.partition("?")[0] == self.base_url + target.partition("?")[0]:
            return _describe(target)
        parts = urlsplit(url)
        return _describe(parts.path + (f"?{parts.query}" if parts.query else ""))

    def _unlearn(self, status: int, refusal: Refusal, url: str) -> Redirected | None:
        """A learnt path that now answers 404 or 410 (not an empty result worded so): it is
        forgotten, in the vendor profile too, and the request goes again to the path it
        replaced (:class:`~parcelsearch._fetch.http.Redirected`); None for any other answer."""
        if status not in GONE or refusal.kind == "empty":
            return None
        path, sep, query = url.partition("?")
        with self._moved_lock:
            sources = [source for source, moved in self._moved.items() if moved == path]
            for source in sources:
                del self._moved[source]
                self._forgotten[path] = source
            moved = dict(self._moved)
            earlier = self._forgotten.get(path)
        if not sources:  # forgotten already (by another thread's request): the default too
            return None if earlier is None else Redirected(earlier + sep + query)
        log.warning(
            "the learnt path %s answers HTTP %d: forgotten (in %s), the request goes to %s again",
            strip_query(path),
            status,
            self.cache_dir / PROFILES_FILE,
            strip_query(sources[0]),
        )
        self.learn(moved=moved)
        return Redirected(sources[0] + sep + query)

    def _redirect(self, response: requests.Response, url: str, where: str) -> Exception:
        """:class:`~parcelsearch._fetch.http.Redirected` for a GET that stays on the base URL's
        https origin (remembered for the next requests), else the refusal naming Location."""
        location = response.headers.get("Location", "")
        target = urljoin(url, location)
        base, there = urlsplit(self.base_url), urlsplit(target)
        if location and there.scheme == "https" and there.netloc == base.netloc:
            if there.query == urlsplit(url).query:
                with self._moved_lock:
                    self._moved[strip_query(url)] = strip_query(target)
                    moved = dict(self._moved)
                self.learn(moved=moved)
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

    # -- requests ---------------------------------------------------------------------

    def line_bytes(self, polygon_json: str, page: int, *, path: str = settings.SEARCH_PATH) -> int:
        """The request line (``GET … HTTP/1.1``, bytes) that page ``page`` of a search of
        ``polygon_json`` is sent with (where a redirect moved the path, the moved one)."""
        sent = page - 1 + self.page_base
        return self._line_bytes(self.base_url + _wire.search_target(path, polygon_json, sent))

    def _line_bytes(self, url: str) -> int:
        return _wire.request_line_bytes(self._moved_url(url).removeprefix(self.base_url))

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
            (:class:`~parcelsearch._fetch.http.Cancelled` is raised instead).

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
        key = _wire.request_key(self.base_url, path, polygon_json, page)
        line = self._line_bytes(url)
        if self.max_request_bytes_source == "learnt" and line > self.max_request_bytes:
            raise RequestTooLargeError(  # the gateway refused such lines: not sent to it
                f"not sent: a request line of {line:,} bytes, over the {self.max_request_bytes:,}"
                f" bytes the gateway at {self.base_url} takes (learnt from its refusal)",
                status=414,
                url=strip_query(url),
                hints=[Hint("max_request_bytes", self.max_request_bytes)],
            )
        if self.result_window is not None and page > self.result_window:
            raise ResultWindowError(  # the vendor refuses pages that deep: not sent to it
                f"not sent: page {page}, beyond the {self.result_window} pages the vendor at "
                f"{self.base_url} serves a search ({self.result_window_source}); the piece "
                "must be split",
                window=self.result_window,
                url=strip_query(url),
                hints=[Hint("result_window", self.result_window)],
            )

        def read(payload: dict[str, Any], where: str) -> Page:
            echoed = _field(payload, "page", where, url)
            data = _list_field(payload, where, url)
            rows = _field(payload, "rows", where, url)
            pages = _field(payload, "pages", where, url)
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
                data_rows=_data_rows(payload, data, where, url),
                data=tuple(data),
                base_url=self.base_url,
                path=path,
            )
            taught = self._page_size_taught(result)
            check_page(result, url=strip_query(url), page_size=taught or self._size_for(result))
            if taught is not None:
                self._adopt_page_size(taught)
            return result

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
        url = self.base_url + path

        def read(payload: dict[str, Any], where: str) -> list[str]:
            data = _list_field(payload, where, url)
            if _data_rows(payload, data, where, url) != len(data):
                raise MalformedResponseError(
                    f"markets: dataRows is {payload['dataRows']} but data holds {len(data)} names",
                    url=url,
                )
            if not all(isinstance(name, str) and name.strip() for name in data):
                raise MalformedResponseError(
                    f"markets: data holds non-text names ({where})", url=url
                )
            return list(data)

        return self._get(path, read, spend, cancel)

    def _get(
        self,
        target: str,
        read: Callable[[dict[str, Any], str], T],
        spend: Spend | None,
        cancel: threading.Event | None,
        *,
        empty: dict[str, Any] | None = None,
    ) -> T:
        url = self._moved_url(self.base_url + target)
        where = self._where(target, url)

        def judge(response: requests.Response) -> T:
            asked = response.url or url
            return _judge(response, read, self._where(target, asked), asked, spend, self, empty)

        log.debug("GET %s (key %s)", where, self._fingerprint)
        return self.transport.get(
            url,
            headers={"x-api-key": self._key.reveal(), "Accept": "application/json"},
            judge=judge,
            describe=where,
            spend=spend,
            cancel=cancel,
        )


# -- answers -----------------------------------------------------------------------------


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


#: Request-line limits of usual gateways, largest first (IIS's query string default is 2,048).
LINE_LIMITS = (8192, 7168, 4096, 2048, 1024)
#: Redirect statuses: followed when they stay on the base URL's https origin.
REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Statuses that say the vendor as a whole is down (a gateway's, or its maintenance), unlike
#: a 500, which may be one request's: the transport's breaker holds every request for them.
OUTAGE_STATUSES = frozenset({502, 503, 504})
#: Statuses that make a learnt path forgotten: the vendor has moved it back, or away.
GONE = frozenset({404, 410})


def _judge(
    response: requests.Response,
    read: Callable[[dict[str, Any], str], T],
    where: str,
    url: str,
    spend: Spend | None,
    client: Client,
    empty: dict[str, Any] | None = None,
) -> T:
    """Accept a 200 that adds up; follow same-origin redirects; read every refusal once.

    Cut bodies, 5xx and spike arrest are transient; an answer delivered whole that cannot be
    read is asked once more, then final; quota, key, polygon and other refusals are final.
    ``empty`` is the answer to use when the vendor words an empty result as an error.
    """
    heard = client.heard
    if heard is not None:
        heard(response.status_code, response.headers)
    try:
        body = response.content
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
    status = response.status_code
    if status in REDIRECTS:
        raise client._redirect(response, url, where)
    content_type = response.headers.get("Content-Type", "")
    if status != 200:
        refusal = read_refusal(status, body, content_type)
        if refusal.kind == "too_long":  # the line, not the path: nothing to unlearn
            raise _too_long(status, refusal, url, where, client)
        deep = _too_deep(status, refusal, url, where, client)
        if deep is not None:
            raise deep
        hop = client._unlearn(status, refusal, url)
        if hop is not None:
            raise hop
        if refusal.kind == "empty":
            return _empty(read, empty, refusal, where, url)
        if status == 410:
            raise _gone(response.headers, refusal, url, where)
        error = _service_error(status, response.headers, refusal, url, where, client)
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
    status: int, refusal: Refusal, url: str, where: str, client: Client
) -> RequestTooLargeError:
    """A request line the gateway refused as too long, in its words; the limit it teaches
    kept, so the next search plans its pieces to it."""
    learnt = client._learn_line_limit(url)
    sent = len(f"GET {url.removeprefix(client.base_url)} HTTP/1.1".encode())
    words = refusal.text if refusal.messages or not refusal.errorcode else refusal.errorcode
    code = f" ({refusal.errorcode})" if refusal.errorcode and refusal.messages else ""
    then = (
        f"the gateway takes at most {learnt:,} bytes, it seems: kept in "
        f"{client.cache_dir / PROFILES_FILE}, so the next search plans its pieces to it; "
        "search again"
        if learnt is not None
        else f"pieces were planned to {client.max_request_bytes:,} bytes; set a lower limit"
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
    status: int, refusal: Refusal, url: str, where: str, client: Client
) -> ResultWindowError | None:
    """A page (after the first) refused as beyond the vendor's result window, in its words;
    the window it teaches (the page before) kept, so pieces with more pages are split."""
    asked = parse_qs(urlsplit(url).query).get("page", [""])[0]
    if refusal.kind != "window" or not asked.isdigit():
        return None
    page = int(asked) - client.page_base + 1  # our number for the vendor's page
    if page < 2:
        return None  # page 1 refused: nothing deeper to learn
    learnt = client._learn_window(page, stated_window(refusal.text, client.page_size, page))
    window = learnt if learnt is not None else page - 1
    kept = (
        f"kept in {client.cache_dir / PROFILES_FILE}, so "
        if learnt is not None and client.result_window_source == "learnt"
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
            hints=[Hint("api_key", phrase="check the value of {knob}")],
        )
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
            "certificate folder).",
            hints=[Hint("ca_bundle", phrase="point {knob} at a PEM file")],
        )
    try:  # read now, not at the first request that misses the cache
        ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(
            f"CA bundle {str(path)!r} holds no certificate that can be read "
            f"({getattr(exc, 'reason', None) or exc.strerror or exc}).",
            hints=[Hint("ca_bundle", phrase="point {knob} at a PEM file")],
        ) from None
    return str(path)


def _positive(given: float | None, setting: str, what: str, example: float) -> float:
    """``given``, else the setting ``setting`` of :data:`parcelsearch.settings.options`, when
    it is a positive finite number (``what`` it counts, for the message; ``example`` for the
    hint)."""
    value: Any = given if given is not None else getattr(settings.options, setting)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (0 < value < float("inf"))
    ):
        raise ConfigurationError(
            f"{setting.replace('_', ' ')} must be a positive number of {what}, got {value!r}.",
            hints=[Hint(setting, example)],
        )
    return float(value)


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


def _service_error(
    status: int,
    headers: Mapping[str, str],
    refusal: Refusal,
    url: str,
    where: str,
    client: Client,
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
        note += _not_found_note(client.base_url)
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


def _field(payload: dict[str, Any], name: str, where: str, url: str) -> int:
    value = count_field(payload, name)
    if value is None:
        shown = payload.get(name)
        raise MalformedResponseError(
            f"field {name!r} is {shown!r:.40}, not a count ({where})", url=strip_query(url)
        )
    return value


def _data_rows(payload: dict[str, Any], data: list[Any], where: str, url: str) -> int:
    """``dataRows`` as sent, or the length of ``data`` when a vendor leaves it out."""
    if "dataRows" not in payload:
        return len(data)
    return _field(payload, "dataRows", where, url)


def _list_field(payload: dict[str, Any], where: str, url: str) -> list[Any]:
    data = payload.get("data")
    if not isinstance(data, list):
        raise MalformedResponseError(
            f"field 'data' is {type(data).__name__}, not a list ({where})", url=strip_query(url)
        )
    return data
