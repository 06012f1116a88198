"""What a failure to send says: the innermost cause of a ``requests`` error, said briefly, a
proxy's refusals in its own words (credentials never shown), and URLs for messages."""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from parcelsearch._fetch.network import CA_WAYS, shown_proxy
from parcelsearch.errors import (
    CutBodyError,
    Hint,
    MalformedResponseError,
    ServiceError,
    TransportError,
)
from parcelsearch.settings import without_userinfo

__all__ = [
    "NotSent",
    "RequestFailure",
    "chosen_proxy",
    "cut_body",
    "failure_name",
    "never_connected",
    "no_response",
    "overdue",
    "proxy_dropped",
    "proxy_failed",
    "short_reason",
    "strip_query",
    "tls_failed",
]

#: What a request raises once its retries are used up.
RequestFailure = TransportError | MalformedResponseError | ServiceError


def innermost(exc: BaseException) -> BaseException:
    inner: BaseException = exc
    for _ in range(8):
        nxt = getattr(inner, "reason", None) or inner.__cause__ or inner.__context__
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    return inner


def short_reason(exc: BaseException) -> str:
    """The innermost cause of a requests/urllib3 error, briefly (never headers)."""
    inner = innermost(exc)
    return f"{type(inner).__name__}: {inner}"[:300]


def never_connected(exc: requests.exceptions.RequestException) -> bool:
    """Whether no connection was made: refused, or timed out while connecting."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    return isinstance(exc, requests.exceptions.ConnectionError) and refused(exc)


def refused(exc: BaseException) -> bool:
    return isinstance(innermost(exc), ConnectionRefusedError | NewConnectionError)


def failure_name(exc: requests.exceptions.RequestException) -> str:
    """A short name of a failure to send for the statistics (``"retried ReadTimeoutError"``)."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return "ConnectTimeoutError"
    if never_connected(exc):
        return "NewConnectionError"
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return "ReadTimeoutError"
    return "ProtocolError"


class NotSent(TransportError):
    """A failure before any request reached the service (the TLS handshake, the proxy):
    not a call."""


def chosen_proxy(proxies: Mapping[str, str]) -> str:
    return proxies.get("https") or proxies.get("all") or next(iter(proxies.values()), "")


def proxy_dropped(exc: requests.exceptions.ProxyError) -> bool:
    """Whether the proxy closed or reset the connection before answering its CONNECT (not a
    407, not refused): a busy proxy's hiccup, asked again within the allowance of requests
    that never reached the vendor; one that always drops ends with :func:`proxy_failed`'s
    words."""
    reason = str(innermost(exc))
    return (
        "407" not in reason
        and not refused(exc)
        and "refused" not in reason.lower()
        and isinstance(innermost(exc), ConnectionError | http.client.RemoteDisconnected)
    )


def proxy_failed(
    exc: requests.exceptions.ProxyError, proxies: Mapping[str, str], describe: str, url: str
) -> NotSent:
    """A proxy that would not open the way to the vendor: said as the proxy's (a 407 as
    proxy authentication), its credentials never shown; no request reached the vendor."""
    proxy = chosen_proxy(proxies)
    shown = shown_proxy(proxy)
    reason = str(innermost(exc))
    if "407" in reason:
        given = (
            "the user name and password in the proxy URL were refused"
            if "@" in urlsplit(proxy).netloc
            else "no user name and password were given"
        )
        return NotSent(
            f"the proxy {shown} asks for authentication (HTTP 407 Proxy Authentication "
            f"Required, {describe}): {given}. Give them in the proxy URL, "
            "http://user:password@host:port (in HTTPS_PROXY, or --proxy / "
            "PARCELSEARCH_PROXY); they are sent to the proxy only and never shown. Nothing "
            "reached the vendor.",
            url=strip_query(url),
            hints=[Hint("proxy", phrase="check {knob}")],
        )
    if refused(exc) or "refused" in reason.lower():
        return NotSent(
            f"nothing is listening at the proxy {shown} (connection refused, {describe}). "
            "Is the proxy address right (HTTPS_PROXY, ALL_PROXY, --proxy)? Hosts the proxy "
            "must not be used for go in NO_PROXY. Nothing reached the vendor.",
            url=strip_query(url),
            hints=[Hint("proxy", phrase="check {knob}")],
        )
    return NotSent(
        f"the proxy {shown} did not open the way to the vendor ({describe}): "
        f"{without_userinfo(reason)[:300]}. Nothing reached the vendor.",
        url=strip_query(url),
        hints=[Hint("proxy", phrase="check {knob}")],
    )


def tls_failed(
    exc: requests.exceptions.SSLError,
    proxies: Mapping[str, str],
    describe: str,
    url: str,
    trust: str,
) -> NotSent:
    """TLS verification failed (directly or through the proxy): what was trusted, and how
    to trust an organisation's or a local service's CA. No request reached the vendor."""
    through = f" through the proxy {shown_proxy(chosen_proxy(proxies))}" if proxies else ""
    return NotSent(
        f"TLS verification failed ({describe}{through}): {short_reason(exc)}. The "
        f"certificate was checked against {trust}. If your organisation "
        "inspects TLS (a proxy that re-signs what it forwards), its CA must be "
        f"trusted: {CA_WAYS}. For a local service, its CA is the ca.pem in its "
        "certificate folder.",
        url=strip_query(url),
        hints=[Hint("ca_bundle", phrase="point {knob} at the CA's PEM file")],
    )


def overdue(deadline: float | None, describe: str, url: str) -> TransportError:
    """No whole response within the response deadline: abandoned (and retried)."""
    return TransportError(
        f"no whole response within the {deadline:g} s response deadline "
        f"({describe}): its bytes came too slowly, so it was abandoned",
        url=strip_query(url),
        hints=[Hint("response_deadline", phrase="allow longer with {knob}")],
    )


def cut_body(exc: BaseException, describe: str, url: str) -> CutBodyError:
    """A body cut short or undecodable (retried)."""
    return CutBodyError(
        f"response body cut short or undecodable ({describe}): {short_reason(exc)}",
        url=strip_query(url),
    )


def no_response(exc: BaseException, url: str, describe: str) -> TransportError:
    base = strip_query(url)
    if refused(exc):
        root = base.split("/v1/")[0] if "/v1/" in base else base
        return TransportError(
            f"nothing is listening at {root} (connection refused, {describe}). Is the service "
            "running and the base URL right? A local reference service starts with "
            "`parcelsearch serve`.",
            url=base,
        )
    return TransportError(f"no usable response ({describe}): {short_reason(exc)}", url=base)


def strip_query(url: str) -> str:
    """``url`` without its query (where a search's polygon travels) nor its userinfo (a
    password): for messages."""
    return without_userinfo(url.partition("?")[0])
