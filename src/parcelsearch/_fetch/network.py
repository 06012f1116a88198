"""The user's network: which proxy a request goes through and which certificates it trusts.

Requests are sent with ``requests``' ``trust_env`` off, so nothing of the environment is
picked up behind our back (``.netrc`` is never read: its passwords would go with our
requests); what the environment rightly says about the network is read here instead, the
way curl and ``requests`` read it:

- **Proxy**: the one given (``Client(proxy=...)``, ``--proxy``, ``$PARCELSEARCH_PROXY`` or
  the profile's), else ``HTTPS_PROXY`` / ``https_proxy`` / ``ALL_PROXY`` / ``all_proxy``;
  ``NO_PROXY`` / ``no_proxy`` is honoured for both. Loopback hosts (``localhost``,
  ``127.0.0.0/8``, ``::1``) never go through a proxy: a proxy's loopback is not this
  machine's, and a local reference service must stay reachable behind a corporate proxy.
  Credentials in a proxy URL (``http://user:password@proxy:3128``) are sent to the proxy as
  ``Proxy-Authorization`` and never shown: :func:`shown_proxy` hides them.
- **Certificates**: a CA bundle given (``Client(ca_bundle=...)``, ``--ca-bundle``,
  ``$PARCELSEARCH_CA_BUNDLE``, the profile's), else ``REQUESTS_CA_BUNDLE``, else
  ``SSL_CERT_FILE`` (where IT departments put an inspecting proxy's CA), else the operating
  system's trust store through ``truststore`` (as pip does), so a CA installed on the machine
  just works. TLS is always verified.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import requests.utils

from parcelsearch.errors import ConfigurationError, Hint
from parcelsearch.settings import without_userinfo

__all__ = [
    "CA_VARIABLES",
    "PROXY_VARIABLES",
    "Trust",
    "choose_trust",
    "proxies_for",
    "proxy_source",
    "shown_proxy",
    "os_trust_context",
    "CA_WAYS",
    "check_proxy",
    "unreadable_ca",
]

#: The environment variables a CA bundle is read from when none is given, in order.
CA_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")
#: The environment variables a proxy is read from (as curl and requests read them).
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
#: Every way to give a CA, for a certificate failure's message.
CA_WAYS = (
    "name its PEM file in REQUESTS_CA_BUNDLE or SSL_CERT_FILE or with the CA bundle "
    "setting below, or install the CA in the operating system's trust store (used "
    "when none of these is set)"
)


@dataclass(frozen=True)
class Trust:
    """The certificates a client trusts: a CA file (or folder) and where it was named, or
    the operating system's trust store (``path=None``)."""

    path: str | None
    source: str

    @property
    def verify(self) -> str | bool:
        """What ``requests`` is given as ``verify``."""
        return self.path if self.path is not None else True

    def __str__(self) -> str:
        if self.path is None:
            return "the operating system's trust store (truststore)"
        return f"CA bundle {self.path} (from {self.source})"


def choose_trust(given: str | None, given_source: str = "the CA bundle setting") -> Trust:
    """The certificates to trust: ``given`` (checked already by the caller), else the first
    of :data:`CA_VARIABLES` set, else the operating system's store.

    Raises
    ------
    ConfigurationError
        A CA variable names nothing that can be read (the variable is named).
    """
    if given:
        return Trust(given, given_source)
    for variable in CA_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if not value:
            continue
        path = Path(value).expanduser()
        if path.is_dir():
            return Trust(str(path), variable)
        if not path.is_file():
            raise ConfigurationError(
                f"{variable} names {value!r}, which is not a file: it should be the PEM file "
                "of the certificate authorities to trust (your organisation's CA).",
                hints=[Hint("ca_bundle", phrase="fix or unset it, or point {knob} at a PEM file")],
            )
        unreadable = unreadable_ca(path)
        if unreadable is not None:
            raise ConfigurationError(
                f"{variable} names {value!r}, which holds no certificate that can be read "
                f"({unreadable}).",
                hints=[Hint("ca_bundle", phrase="fix or unset it, or point {knob} at a PEM file")],
            )
        return Trust(str(path), variable)
    return Trust(None, "the operating system")


def unreadable_ca(path: Path) -> str | None:
    """Why the PEM file at ``path`` gives no certificate to trust, or ``None`` when it does
    (read now, not at the first request that misses the cache): the one reader of a CA file,
    for ``--ca-bundle`` and for the variables naming one."""
    try:
        ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, OSError) as exc:
        return str(getattr(exc, "reason", None) or exc.strerror or exc)
    return None


def os_trust_context() -> ssl.SSLContext:
    """An SSL context verifying against the operating system's trust store (``truststore``)."""
    import truststore

    return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def proxies_for(url: str, given: str | None) -> dict[str, str]:
    """The proxies ``requests`` is given for ``url``: none for a loopback host or one
    ``NO_PROXY`` names; else ``given``, else the environment's (:data:`PROXY_VARIABLES`)."""
    host = urlsplit(url).hostname or ""
    if _loopback(host) or requests.utils.should_bypass_proxies(url, no_proxy=None):
        return {}
    if given:
        return {"https": given, "http": given}
    found = requests.utils.get_environ_proxies(url, no_proxy=None)
    return {scheme: found[scheme] for scheme in ("https", "all") if found.get(scheme)}


def proxy_source(url: str, given: str | None, given_source: str = "--proxy") -> str:
    """Which proxy a request to ``url`` goes through, said for ``doctor`` (credentials
    hidden)."""
    host = urlsplit(url).hostname or ""
    if _loopback(host):
        return "none (a loopback host is never sent through a proxy)"
    if requests.utils.should_bypass_proxies(url, no_proxy=None):
        return "none (NO_PROXY names this host)"
    if given:
        return f"{shown_proxy(given)} (from {given_source})"
    for variable in PROXY_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value:
            return f"{shown_proxy(value)} (from {variable})"
    return "none (no proxy is set: HTTPS_PROXY, ALL_PROXY or --proxy)"


def shown_proxy(proxy: str) -> str:
    """A proxy URL without its credentials (``http://***@proxy:3128``)."""
    return without_userinfo(proxy)


def check_proxy(proxy: str) -> str:
    """``proxy`` if it can be one (``http://`` or ``https://`` with a host; ``host:port``
    alone is read as ``http://host:port``, as curl reads it).

    Raises
    ------
    ConfigurationError
        Anything else (the URL is shown without its credentials).
    """
    value = proxy.strip()
    if "://" not in value:
        value = "http://" + value  # as curl reads "proxy:3128"
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{shown_proxy(proxy)!r} is not a proxy URL: give http://host:port (with "
            "user:password@ before the host when the proxy asks for them).",
            hints=[Hint("proxy", phrase="check {knob}")],
        )
    return value
