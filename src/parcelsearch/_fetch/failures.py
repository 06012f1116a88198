"""What a failure to send says: the innermost cause of a ``requests`` error, said briefly, a
proxy's refusals in its own words (credentials never shown), and URLs for messages."""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from urllib.parse import urlsplit

import requests
from urllib3.exceptions import NewConnectionError

from parcelsearch._fetch.network import shown_proxy
from parcelsearch.errors import Hint, MalformedResponseError, ServiceError, TransportError
from parcelsearch.settings import without_userinfo

__all__ = [
    "NotSent",
    "RequestFailure",
    "chosen_proxy",
    "failure_name",
    "never_connected",
    "no_response",
    "proxy_dropped",
    "proxy_failed",
    "short_reason",
    "strip_query",
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
