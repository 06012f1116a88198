"""Settings: the vendor's figures (constants) and the options a user may change.

Constants describe the vendor's services and never change at run time. Options are the
knobs of this toolkit and its reference service: each has a default, an environment
variable and a doc line, and :data:`options` shows them all::

    >>> from parcelsearch import settings
    >>> settings.options  # doctest: +SKIP
    parcelsearch options (value · source · what it is)
      base_url     None             default   root URL of the services (https://…) …
      ...
    >>> settings.options.rate = 5          # for this process; environment stays as it is
    >>> settings.options.reset("rate")

An option set on :data:`options` wins over its environment variable, which wins over the
default. Values are read when they are used, so an environment variable changed at run time
counts from the next use. The API key is deliberately *not* an option: it is a secret and
lives only in :class:`parcelsearch.Client` (``$PARCELSEARCH_API_KEY``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import platformdirs

from parcelsearch.errors import ConfigurationError

#: Longest request line (``GET <target> HTTP/1.1``) the vendor's gateway accepts.
MAX_REQUEST_LINE_BYTES: Final = 7168
#: GroupIDs per page of search results.
PAGE_SIZE: Final = 100
#: Calls per second allowed per key (spike arrest) on demo and production keys.
DEFAULT_RATE: Final = 10.0
#: Threads a search sends requests from (one pacer paces them all; a team member's store
#: keeps a connection ready for each).
DEFAULT_WORKERS: Final = 8
#: Decimals kept on every coordinate sent.
COORD_DECIMALS: Final = 6
#: The search and markets paths (the vendor also serves them under ``/prod``).
SEARCH_PATH: Final = "/v1/search"
MARKETS_PATH: Final = "/v1/markets"
STAGE_PREFIX: Final = "/prod"

#: Default limits per key type: (calls per second, quota, quota period).
KEY_TYPES: Final = {
    "demo": (10.0, 50, "lifetime"),
    "production": (10.0, 500, "month"),
}

#: The vendor's zoning prices per call, by tier (USD).
ZONING_PRICES: Final = {"basic": 0.29, "enhanced": 0.49, "premium": 0.69}

#: Environment variables read by :class:`parcelsearch.Client`, the CLI and the service.
ENV_API_KEY: Final = "PARCELSEARCH_API_KEY"
ENV_BASE_URL: Final = "PARCELSEARCH_BASE_URL"
ENV_CA_BUNDLE: Final = "PARCELSEARCH_CA_BUNDLE"
ENV_RATE: Final = "PARCELSEARCH_RATE"
ENV_CACHE_DIR: Final = "PARCELSEARCH_CACHE_DIR"
ENV_QUOTA: Final = "PARCELSEARCH_QUOTA"
ENV_SERVICE_DIR: Final = "PARCELSEARCH_SERVICE_DIR"
ENV_MATCH: Final = "PARCELSEARCH_MATCH"
ENV_PROFILE: Final = "PARCELSEARCH_PROFILE"
ENV_CONFIG_DIR: Final = "PARCELSEARCH_CONFIG_DIR"
ENV_ASK_ABOVE: Final = "PARCELSEARCH_ASK_ABOVE"
#: Calls a search spends past its survey without asking (a fifth of a 500-call month).
DEFAULT_ASK_ABOVE: Final = 100
#: The application's name for platformdirs (the user's cache, data and config folders).
APP_NAME: Final = "parcelsearch"


def check_base_url(url: str) -> str:
    """``url`` as the root of the services (no trailing ``/``), if it is one.

    The one rule for a base URL, used by :class:`parcelsearch.Client` and ``--base-url``:
    ``https://host[:port][/prefix]`` without query, fragment or credentials.

    Raises
    ------
    ConfigurationError
        An ``http://`` URL (the key would travel in clear text) or anything else that is
        not such a root.
    """
    url = url.strip()
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


def _user_cache_dir() -> Path:
    """The platform's cache folder (platformdirs: ``$XDG_CACHE_HOME/parcelsearch`` on Linux,
    ``~/Library/Caches/parcelsearch`` on macOS, ``%LOCALAPPDATA%\\parcelsearch\\Cache``)."""
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def _user_service_dir() -> Path:
    """The platform's data folder (platformdirs), ``service`` inside it."""
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "service"


def _user_config_dir() -> Path:
    """The platform's config folder (platformdirs: ``$XDG_CONFIG_HOME/parcelsearch`` on
    Linux, ``~/Library/Application Support/parcelsearch`` on macOS)."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def _path(text: Any) -> Path:
    return Path(str(text)).expanduser()


def _text(value: Any) -> str | None:
    text = str(value).strip()
    return text or None


def _number(value: Any) -> Any:
    """A number when it reads as one; else the text, for the user of the option to refuse."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    try:
        return float(str(value).strip())
    except ValueError:
        return _text(value)


@dataclass(frozen=True)
class Option:
    """One documented option: its default, environment variable, doc line and parser."""

    name: str
    doc: str
    env: str | None
    default: Callable[[], Any]
    parse: Callable[[Any], Any]


_OPTIONS: Final = (
    Option("base_url", "root URL of the Search and Markets services (https:// only)",
           ENV_BASE_URL, lambda: None, _text),
    Option("ca_bundle", "PEM file of certificate authorities to trust (TLS is always verified)",
           ENV_CA_BUNDLE, lambda: None, _text),
    Option("rate", "calls per second the key allows (spike arrest)",
           ENV_RATE, lambda: DEFAULT_RATE, _number),
    Option("quota", "the key's quota: demo, production, N/month or N/lifetime",
           ENV_QUOTA, lambda: None, _text),
    Option("cache_dir", "folder of the response cache, market list and quota ledger",
           ENV_CACHE_DIR, _user_cache_dir, _path),
    Option("service_dir", "folder of the reference service's key store and certificates",
           ENV_SERVICE_DIR, _user_service_dir, _path),
    Option("match", "how the vendor matches parcels: representative-point, intersects or "
           "unknown", ENV_MATCH, lambda: "unknown", _text),
    Option("profile", "the saved profile (parcelsearch login) whose key, base URL and CA "
                      "to use (default: 'default', when saved)",
           ENV_PROFILE, lambda: None, _text),
    Option("config_dir", "folder of the saved profiles (never their keys, which stay in "
                         "the OS keyring, or a file readable by you only when there is none)",
           ENV_CONFIG_DIR, _user_config_dir, _path),
    Option("ask_above", "calls a search spends past its price without asking (--yes or "
                        "confirm=True to go on)",
           ENV_ASK_ABOVE, lambda: DEFAULT_ASK_ABOVE, _number),
)


class Options:
    """Every option of parcelsearch: read as attributes, set for this process, reset.

    The value of an option is, in order: what was set on this object, its environment
    variable when set and not blank, its default. ``repr`` lists each option with its value,
    where the value came from and what it is for.
    """

    def __init__(self, options: tuple[Option, ...] = _OPTIONS) -> None:
        object.__setattr__(self, "_specs", {o.name: o for o in options})
        object.__setattr__(self, "_set", {})

    def __getattr__(self, name: str) -> Any:
        return self._resolve(self._spec(name))[0]

    def __setattr__(self, name: str, value: Any) -> None:
        spec = self._spec(name)
        self._set[name] = None if value is None else spec.parse(value)

    def __dir__(self) -> list[str]:
        return [*self._specs, "reset", "source"]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def reset(self, name: str | None = None) -> None:
        """Forget values set on this object (one option, or all), back to env and defaults."""
        if name is None:
            self._set.clear()
        else:
            self._spec(name)
            self._set.pop(name, None)

    def source(self, name: str) -> str:
        """Where the current value of ``name`` comes from: ``set``, ``$VARIABLE`` or ``default``."""
        return self._resolve(self._spec(name))[1]

    def _spec(self, name: str) -> Option:
        try:
            return self._specs[name]  # type: ignore[no-any-return]
        except KeyError:
            known = ", ".join(self._specs)
            raise AttributeError(f"no option {name!r}; the options are: {known}") from None

    def _resolve(self, spec: Option) -> tuple[Any, str]:
        if spec.name in self._set:
            return self._set[spec.name], "set"
        if spec.env is not None:
            raw = os.environ.get(spec.env, "").strip()
            if raw:
                return spec.parse(raw), f"${spec.env}"
        return spec.default(), "default"

    def __repr__(self) -> str:
        rows = [(name, repr(getattr(self, name)), self.source(name), spec.doc)
                for name, spec in self._specs.items()]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["parcelsearch options (value · source · what it is)"]
        for name, value, source, doc in rows:
            lines.append(f"  {name:<{widths[0]}}  {value:<{widths[1]}}  "
                         f"{source:<{widths[2]}}  {doc}")
        return "\n".join(lines)


#: The options of this process (see :class:`Options`).
options: Final = Options()


def default_cache_dir() -> Path:
    """Folder of the response cache, markets list and quota ledger (``options.cache_dir``).

    ``$PARCELSEARCH_CACHE_DIR`` when set, else a per-user cache folder:
    ``$XDG_CACHE_HOME/parcelsearch`` (``~/.cache/parcelsearch``), or
    ``%LOCALAPPDATA%\\parcelsearch\\Cache`` on Windows.
    """
    return options.cache_dir  # type: ignore[no-any-return]
