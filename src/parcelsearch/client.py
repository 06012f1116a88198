"""HTTP client for the zoning vendor's Search and Markets services.

One :class:`Client` holds the configuration (key, base URL, CA bundle, rate), one
``requests`` session whose adapter retries with urllib3's :class:`~urllib3.util.Retry`,
and one :class:`RateLimiter` shared by every thread that uses the client.

Every HTTP attempt — the first and each retry — goes through the same gate: the caller's
``before_attempt()`` hook (the search uses it to reserve the call in the quota ledger; it
may raise to stop) and then the shared limiter. The first attempt is gated by the client
itself, each retry by :meth:`PacedRetry.sleep`, which urllib3 calls exactly once before
every retry it makes.

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
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.exceptions import MaxRetryError
from urllib3.util import Retry

from parcelsearch import _wire, settings
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
    TransportError,
)
from parcelsearch.page import Page, check_page

__all__ = ["Client", "RateLimiter", "PacedRetry", "make_retry", "key_fingerprint"]

log = logging.getLogger(__name__)

#: Share of the allowed rate kept in reserve, so network jitter never puts N + 1 calls in
#: one second of the server's sliding window (10/s → one call every 103 ms, 9.7 calls/s).
DEFAULT_MARGIN = 0.03
#: Statuses urllib3 retries; 429 quota violations are singled out and never retried.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})

AttemptHook = Callable[[], None]

# The gate of the request in flight on this thread (hook + limiter), read by PacedRetry.
_GATE: ContextVar[AttemptHook | None] = ContextVar("parcelsearch_attempt_gate", default=None)


def key_fingerprint(api_key: str) -> str:
    """First 16 hex digits of the key's sha256: names a key without revealing it."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:16]


class RateLimiter:
    """Strictly spaced calls, shared by all threads: no bursts, ever.

    Successive calls are released at least ``1 / (rate * (1 - margin))`` seconds apart,
    measured from when each one was actually released, so a server allowing ``rate`` calls
    in any one-second sliding window never sees one too many.

    Parameters
    ----------
    rate
        Calls per second the server allows.
    margin
        Share of ``rate`` kept in reserve against network jitter.
    """

    def __init__(self, rate: float, margin: float = DEFAULT_MARGIN) -> None:
        if not rate > 0 or not 0 <= margin < 1:
            raise ConfigurationError(f"rate must be > 0 and margin in [0, 1), got {rate}, {margin}")
        self.rate = float(rate)
        self.interval = 1.0 / (self.rate * (1.0 - margin))
        self._lock = threading.Lock()
        self._next = 0.0

    def wait(self) -> float:
        """Block until this caller may send; returns the release time (``time.monotonic``)."""
        with self._lock:
            now = time.monotonic()
            while now < self._next:
                time.sleep(self._next - now)
                now = time.monotonic()
            self._next = now + self.interval
        return now

    def __repr__(self) -> str:
        return f"RateLimiter(rate={self.rate:g}/s, interval={self.interval * 1000:.1f} ms)"


class Cancelled(Exception):  # noqa: N818 - a signal, not an error
    """Raised instead of sending when the caller's ``cancel`` event is set."""


class _FinalResponse(Exception):  # noqa: N818 - a signal, not an error
    """A response urllib3 must hand back without retrying (quota violation, retries used up).

    Raised from :meth:`PacedRetry.increment` after the body has been read, so the client
    still sees the service's ``messages``.
    """

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.headers = CaseInsensitiveDict(headers)
        self.body = body


class PacedRetry(Retry):
    """urllib3 ``Retry`` that gates every retry and never retries a quota violation.

    * :meth:`sleep` (called by urllib3 once before each retry) waits the backoff or the
      server's ``Retry-After``, then runs the gate of the request in flight:
      the ``before_attempt`` hook, then the client's shared limiter.
    * :meth:`increment` reads the (small) body of a retryable response first: a 429 whose
      messages speak of the quota is returned at once — it will not heal by waiting — and a
      response that used up the retries is returned with its body intact.
    """

    def sleep(self, response: Any = None) -> None:  # noqa: D102
        super().sleep(response)
        gate = _GATE.get()
        if gate is not None:
            gate()

    def increment(  # type: ignore[override]  # noqa: D102
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> Retry:
        if response is None:
            return super().increment(method, url, response, error, _pool, _stacktrace)
        body = response.read(decode_content=True, cache_content=True) or b""
        final = _FinalResponse(response.status, response.headers, body)
        if response.status == 429 and _is_quota(_messages(body)):
            raise final
        try:
            return super().increment(method, url, response, error, _pool, _stacktrace)
        except MaxRetryError:
            raise final from None


def make_retry(
    total: int = 5, *, backoff_factor: float = 0.5, retry_after_max: int = 120
) -> PacedRetry:
    """The default retry policy: ``total`` retries of GETs on 429/5xx, timeouts, resets.

    Backoff grows 0, 1, 2, 4 … seconds (``backoff_factor`` × 2ⁿ, capped at 30 s, jittered);
    a ``Retry-After`` header (seconds or HTTP-date, capped at ``retry_after_max``) wins.
    """
    if total < 0:
        raise ConfigurationError(f"retries must be >= 0, got {total}")
    return PacedRetry(
        total=total,
        connect=total,
        read=total,
        status=total,
        other=0,
        redirect=0,
        allowed_methods=frozenset({"GET"}),
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff_factor,
        backoff_max=30,
        backoff_jitter=0.25,
        respect_retry_after_header=True,
        raise_on_status=False,
        raise_on_redirect=False,
        retry_after_max=retry_after_max,
    )


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
        ``https://`` root of the services; default ``$PARCELSEARCH_BASE_URL``. ``http://``
        is refused: the services are HTTPS only.
    ca_bundle
        PEM file of certificate authorities to trust (e.g. a local service's ``ca.pem``);
        default ``$PARCELSEARCH_CA_BUNDLE``, else the system store. TLS is always verified.
    rate
        Calls per second the key allows; default ``$PARCELSEARCH_RATE``, else 10.
    timeout
        Seconds to wait to connect and between bytes of a response.
    retries
        Retries per request (int), or a :class:`PacedRetry` for a custom policy.
    session
        A ``requests.Session`` to send through, used as it is (its adapters decide the
        transport and retries); for tests that inject faults. Default: a new session with
        an adapter using :func:`make_retry`.
    cache_dir
        Folder of the response cache, market list and quota ledger that searches with this
        client use by default; default ``$PARCELSEARCH_CACHE_DIR``, else a per-user folder.

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
        retries: int | PacedRetry = 5,
        session: requests.Session | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        key = _resolve_key(api_key)
        self._key = _Secret(key)
        self._fingerprint = key_fingerprint(key)
        self.base_url = _resolve_base_url(base_url)
        self.ca_bundle = _resolve_ca_bundle(ca_bundle)
        self.rate = _resolve_rate(rate)
        self.timeout = float(timeout)
        self.limiter = RateLimiter(self.rate)
        self.retry = retries if isinstance(retries, PacedRetry) else make_retry(retries)
        self.session = session if session is not None else self._new_session()
        self.cache_dir = Path(cache_dir) if cache_dir is not None else settings.default_cache_dir()
        #: Requests answered and retries made, by status or error (e.g. ``"retried 429"``).
        self.stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        """First 16 hex digits of the key's sha256 (what caches and ledgers record)."""
        return self._fingerprint

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

    def _new_session(self) -> requests.Session:
        session = requests.Session()
        adapter = HTTPAdapter(max_retries=self.retry, pool_connections=4, pool_maxsize=32)
        session.mount("https://", adapter)
        return session

    # -- requests ---------------------------------------------------------------------

    def search_page(
        self,
        polygon_json: str,
        page: int,
        *,
        path: str = settings.SEARCH_PATH,
        before_attempt: AttemptHook | None = None,
        cancel: threading.Event | None = None,
    ) -> Page:
        """Fetch one page of a search: ``GET <path>?searchPolygon=<ring>&page=<page>``.

        Parameters
        ----------
        polygon_json
            The canonical ring JSON (see :func:`parcelsearch._wire.ring_json`).
        page
            Page number, from 1.
        path
            The search path (``/v1/search``, or ``/prod/v1/search`` on the stage gateway).
        before_attempt
            Called before every HTTP attempt, retries included; may raise to stop.
        cancel
            Once set, no further attempt is sent (:class:`Cancelled` is raised instead):
            checked after the limiter grants the turn, just before sending.

        Returns
        -------
        Page
            The checked page (``from_cache=False``).

        Raises
        ------
        ServiceError
            The service's error envelope, mapped to its subclass (status and messages kept).
        MalformedResponseError
            A body that is not the documented shape or whose counts disagree.
        TransportError
            No response after the retries (connection refused or reset, timeouts, TLS).
        """
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise ValueError(f"page must be an integer >= 1, got {page!r}")
        target = _wire.search_target(path, polygon_json, page)
        payload = self._get_json(target, before_attempt, cancel)
        where = self._describe(target)
        echoed = _field(payload, "page", where)
        if echoed != page:
            raise MalformedResponseError(f"asked for page {page}, got page {echoed!r} ({where})",
                                         url=self.base_url + target)
        result = Page(
            request_key=_wire.request_key(self.base_url, path, polygon_json, page),
            polygon_json=polygon_json,
            page=page,
            rows=_field(payload, "rows", where),
            pages=_field(payload, "pages", where),
            data_rows=_field(payload, "dataRows", where),
            data=tuple(_list_field(payload, where)),
            base_url=self.base_url,
            path=path,
        )
        check_page(result, url=self.base_url + target)
        return result

    def markets(
        self, *, path: str = settings.MARKETS_PATH, before_attempt: AttemptHook | None = None
    ) -> list[str]:
        """Names of the active markets: one call, uncached (:func:`parcelsearch.markets` caches)."""
        payload = self._get_json(path, before_attempt)
        where = self._describe(path)
        data = _list_field(payload, where)
        if _field(payload, "dataRows", where) != len(data):
            raise MalformedResponseError(
                f"markets: dataRows is {payload['dataRows']} but data holds {len(data)} names",
                url=self.base_url + path,
            )
        if not all(isinstance(name, str) and name.strip() for name in data):
            raise MalformedResponseError(f"markets: data holds non-text names ({where})",
                                         url=self.base_url + path)
        return list(data)

    def _get_json(
        self, target: str, before_attempt: AttemptHook | None,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]:
        status, headers, body = self._send(target, before_attempt, cancel)
        url = self.base_url + target
        where = self._describe(target)
        if status != 200:
            raise _service_error(status, headers, body, url, where)
        try:
            payload = json.loads(body)
        except ValueError:
            raise MalformedResponseError(
                f"response is not JSON ({len(body)} bytes, {where}): {body[:80]!r}", url=url
            ) from None
        if not isinstance(payload, dict) or payload.get("status") != "OK":
            status_field = payload.get("status") if isinstance(payload, dict) else None
            raise MalformedResponseError(
                f"HTTP 200 but status {status_field!r}, not 'OK' ({where}): "
                + "; ".join(_messages(body)),
                url=url,
            )
        return payload

    def _send(
        self, target: str, before_attempt: AttemptHook | None,
        cancel: threading.Event | None = None,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request, every attempt gated; returns (status, headers, body)."""

        def gate() -> None:
            # Reserve, then pace, then send at once: anything slow (the ledger's write)
            # happens before the turn, so the spacing the server sees stays even.
            if before_attempt is not None:
                before_attempt()
            self.limiter.wait()
            if cancel is not None and cancel.is_set():
                raise Cancelled("the run stopped before this request was sent")

        url = self.base_url + target
        where = self._describe(target)
        token = _GATE.set(gate)
        try:
            gate()
            log.debug("GET %s (key %s)", where, self._fingerprint)
            response = self.session.get(
                url,
                headers={"x-api-key": self._key.reveal(), "Accept": "application/json"},
                timeout=self.timeout,
                verify=self.ca_bundle or True,
                allow_redirects=False,
            )
            self._tally(response)
            return response.status_code, response.headers, response.content
        except _FinalResponse as final:
            return final.status, final.headers, final.body
        except requests.exceptions.SSLError as exc:
            raise TransportError(
                f"TLS verification of {self.base_url} failed ({where}): {_reason(exc)}",
                url=url,
                hints=[Hint("ca_bundle", phrase="if it is a local service, trust its CA with "
                                                "{knob}")],
            ) from None
        except requests.exceptions.ChunkedEncodingError as exc:
            raise MalformedResponseError(
                f"response body cut short ({where}): {_reason(exc)}", url=url
            ) from None
        except requests.exceptions.ContentDecodingError as exc:
            raise MalformedResponseError(
                f"response body cannot be decoded ({where}): {_reason(exc)}", url=url
            ) from None
        except requests.exceptions.RequestException as exc:
            raise TransportError(
                f"no usable response from {self.base_url} after retries ({where}): {_reason(exc)}",
                url=url,
            ) from None
        finally:
            _GATE.reset(token)

    def _tally(self, response: requests.Response) -> None:
        """Count the request and the retries urllib3 made for it (by status or error)."""
        history = getattr(getattr(getattr(response, "raw", None), "retries", None), "history", ())
        with self._stats_lock:
            self.stats["requests"] += 1
            for event in history:
                reason = event.status or type(event.error).__name__
                self.stats[f"retried {reason}"] += 1

    def _describe(self, target: str) -> str:
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
        raise ConfigurationError(
            "no API key", hints=[Hint("api_key", phrase="give it with {knob}")]
        )
    if any(ch.isspace() or not ch.isprintable() or ord(ch) > 126 for ch in key):
        raise ConfigurationError(
            "the API key holds whitespace or non-ASCII characters",
            hints=[Hint("api_key", phrase="check the value given with {knob}")],
        )
    return key


def _resolve_base_url(base_url: str | None) -> str:
    url = base_url if base_url is not None else os.environ.get(settings.ENV_BASE_URL, "")
    url = url.strip()
    if not url:
        raise ConfigurationError(
            "no base URL", hints=[Hint("base_url", phrase="give it with {knob}")]
        )
    parts = urlsplit(url)
    if parts.scheme.lower() == "http":
        raise ConfigurationError(
            f"refusing http:// base URL {url!r}: the services are HTTPS only "
            "(the key would travel in clear text); use https://"
        )
    if parts.scheme.lower() != "https" or not parts.hostname:
        raise ConfigurationError(
            f"base URL must look like https://host[:port][/prefix], got {url!r}"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigurationError(
            f"base URL must not carry a query, fragment or credentials: {url!r}"
        )
    return url.rstrip("/")


def _resolve_ca_bundle(ca_bundle: str | os.PathLike[str] | None) -> str | None:
    if ca_bundle is None:
        ca_bundle = os.environ.get(settings.ENV_CA_BUNDLE, "").strip()
    value = ca_bundle
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigurationError(
            f"CA bundle {str(path)!r} is not a file (a local service writes ca.pem)",
            hints=[Hint("ca_bundle", phrase="give a PEM file with {knob}")],
        )
    return str(path)


def _resolve_rate(rate: float | None) -> float:
    if rate is None:
        text = os.environ.get(settings.ENV_RATE, "").strip()
        if not text:
            return settings.DEFAULT_RATE
        try:
            rate = float(text)
        except ValueError:
            raise ConfigurationError(
                f"{settings.ENV_RATE} must be a number of calls per second, got {text!r}"
            ) from None
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < float("inf"):
        raise ConfigurationError(
            f"rate must be a positive number of calls per second, got {rate!r}"
        )
    return float(rate)


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
    retry_after = _retry_after(headers)
    if status == 429:
        cls: type[ServiceError] = QuotaExhaustedError if _is_quota(messages) else RateLimitError
    elif status >= 500:
        cls = ServiceFailureError
    else:
        cls = _ERRORS.get(status, ServiceError)
    text = "; ".join(messages) if messages else f"no error envelope: {body[:120]!r}"
    hints = [Hint("api_key", phrase="check the key given with {knob}")] if (
        cls is AuthenticationError) else []
    hint = {
        QuotaExhaustedError: " — the key has no calls left; wait for the quota to reset",
        RateLimitError: " — still rate-limited after the retries",
        ServiceFailureError: " — the service kept failing through the retries",
    }.get(cls, "")
    return cls(f"HTTP {status}: {text} ({where}){hint}", status=status, messages=messages,
               url=url, retry_after=retry_after, hints=hints)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return Retry(retry_after_max=86400).parse_retry_after(value)
    except Exception:  # an unparseable header is only advice
        return None


def _field(payload: dict[str, Any], name: str, where: str) -> int:
    value = payload.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedResponseError(f"field {name!r} is {value!r}, not an integer ({where})")
    return value


def _list_field(payload: dict[str, Any], where: str) -> list[Any]:
    data = payload.get("data")
    if not isinstance(data, list):
        raise MalformedResponseError(f"field 'data' is {type(data).__name__}, not a list ({where})")
    return data


def _reason(exc: BaseException) -> str:
    """The innermost cause of a requests/urllib3 error, briefly (never headers)."""
    inner: BaseException = exc
    for _ in range(8):
        nxt = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    return f"{type(inner).__name__}: {inner}"[:300]
