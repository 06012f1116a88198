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
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import platformdirs

from parcelsearch import knobs
from parcelsearch.errors import ConfigurationError, Hint
from parcelsearch.knobs import declared
from parcelsearch.knobs import variable as _env

#: Longest request line (``GET <target> HTTP/1.1``) the vendor's gateway accepts.
MAX_REQUEST_LINE_BYTES: Final = 7168
#: GroupIDs per page of search results, until an answer says otherwise (learnt per base URL,
#: kept in its vendor profile) or the user sets one (option ``page_size``).
PAGE_SIZE: Final = 100
#: The longest GroupID kept by default (option ``group_id_max_chars``): the vendor's spec
#: says only "a string"; much longer is not an id.
MAX_GROUP_ID_CHARS: Final = 128
#: Seconds a response may take as a whole (connect, head and body), however it trickles.
DEFAULT_RESPONSE_DEADLINE: Final = 60.0
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

#: Environment variables read by :class:`parcelsearch.Client`, the CLI and the service (each
#: declared once, in :mod:`parcelsearch.knobs`).
ENV_API_KEY: Final = _env("api_key")
ENV_BASE_URL: Final = _env("base_url")
ENV_CA_BUNDLE: Final = _env("ca_bundle")
ENV_PROXY: Final = _env("proxy")
ENV_RATE: Final = _env("rate")
ENV_RESPONSE_DEADLINE: Final = _env("response_deadline")
ENV_GROUP_ID_MAX_CHARS: Final = _env("group_id_max_chars")
ENV_PAGE_SIZE: Final = _env("page_size")
ENV_RESULT_WINDOW: Final = _env("result_window")
ENV_MAX_REQUEST_BYTES: Final = _env("max_request_bytes")
ENV_CACHE_DIR: Final = _env("cache_dir")
ENV_QUOTA: Final = _env("quota")
ENV_SERVICE_DIR: Final = _env("service_dir")
ENV_MATCH: Final = _env("match")
ENV_PROFILE: Final = _env("profile")
ENV_CONFIG_DIR: Final = _env("config_dir")
ENV_MAX_AGE: Final = _env("max_age")
ENV_ASK_ABOVE: Final = _env("ask_above")
#: Calls a search spends past its survey without asking (a fifth of a 500-call month); the
#: survey's cost at most, a share of a low bound of the search's cost (a tenth). Declared
#: with their spellings (:mod:`parcelsearch.knobs`), whose help texts state them.
DEFAULT_ASK_ABOVE: Final = knobs.DEFAULT_ASK_ABOVE
DEFAULT_SURVEY_SHARE: Final = knobs.DEFAULT_SURVEY_SHARE
#: The application's name for platformdirs (the user's cache, data and config folders).
APP_NAME: Final = "parcelsearch"


#: ``[scheme://]…@``: everything before the last ``@`` ahead of a query or fragment (a password
#: may hold ``/``, which would end the netloc of a well-formed URL) is taken as userinfo.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^?#]*@")


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` shown as ``***@``: for messages, logs and reprs."""
    return _USERINFO.sub(r"\1***@", url)


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
    shown = without_userinfo(url)  # a password is never echoed
    if parts.scheme.lower() == "http":
        raise ConfigurationError(
            f"refusing http:// base URL {shown!r}: the services are HTTPS only "
            "(the key would travel in clear text); use https://"
        )
    if parts.scheme.lower() != "https" or not parts.hostname:
        raise ConfigurationError(
            f"base URL must look like https://host[:port][/prefix], got {shown!r}"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigurationError(
            f"base URL must not carry a query, fragment or credentials: {shown!r}"
        )
    return url.rstrip("/")


#: Seconds in each unit an age may be given in (``30d``, ``12h``, ``90m``, ``45s``, ``2w``).
AGE_UNITS: Final = {"s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0, "w": 604_800.0}


def parse_age(value: Any, *, what: str = "max_age") -> float:
    """An age in seconds from a number of seconds, a :class:`datetime.timedelta`, or a text
    with a unit: ``30d`` (days), ``12h`` (hours), ``90m`` (minutes), ``45s`` or ``2w``
    (weeks); ``"3600"`` is seconds.

    Raises
    ------
    ConfigurationError
        Not a non-negative finite age (the message names ``what`` and the units).

    Examples
    --------
    >>> parse_age("30d"), parse_age("12h"), parse_age(90)
    (2592000.0, 43200.0, 90.0)
    """
    if isinstance(value, timedelta):
        value = value.total_seconds()
    text = str(value).strip().lower()
    scale = 1.0
    if text[-1:] in AGE_UNITS and not isinstance(value, int | float):
        text, scale = text[:-1].strip(), AGE_UNITS[text[-1]]
    units = "(30d days, 12h hours, 90m minutes, 45s seconds, 2w weeks)"
    name = what + " " if what else ""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value) if isinstance(value, int | float) else float(text)
    except ValueError:
        raise ConfigurationError(
            f"{name}takes an age: seconds, or a number with a unit {units}, got {value!r}"
        ) from None
    if not (number >= 0 and number != float("inf")):
        shown = value if isinstance(value, str) else repr(value)
        raise ConfigurationError(
            f"{name}must be at least 0 (an age: seconds, or a number "
            f"with a unit {units}), got {shown}"
        )
    return number * scale


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

    @classmethod
    def declared(cls, name: str, default: Callable[[], Any], parse: Callable[[Any], Any]) -> Option:
        """The option ``name`` with its variable and doc line as :mod:`parcelsearch.knobs`
        declares them, and its ``default`` and ``parse`` (this module's)."""
        declaration = declared(name)
        assert declaration.doc is not None, name
        return cls(name, declaration.doc, declaration.env, default, parse)


#: Each option's default and parser; their variables and doc lines are declared in
#: :mod:`parcelsearch.knobs`, in this order.
_OPTIONS: Final = tuple(
    Option.declared(name, default, parse)
    for name, default, parse in (
        ("base_url", lambda: None, _text),
        ("ca_bundle", lambda: None, _text),
        ("proxy", lambda: None, _text),
        ("rate", lambda: DEFAULT_RATE, _number),
        ("response_deadline", lambda: DEFAULT_RESPONSE_DEADLINE, _number),
        ("group_id_max_chars", lambda: MAX_GROUP_ID_CHARS, _number),
        ("page_size", lambda: None, _number),
        ("result_window", lambda: None, _number),
        ("max_request_bytes", lambda: None, _number),
        ("quota", lambda: None, _text),
        ("cache_dir", _user_cache_dir, _path),
        ("service_dir", _user_service_dir, _path),
        ("match", lambda: "unknown", _text),
        ("profile", lambda: None, _text),
        ("max_age", lambda: None, _text),
        ("config_dir", _user_config_dir, _path),
        ("ask_above", lambda: DEFAULT_ASK_ABOVE, _number),
    )
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
        rows = [
            (name, _shown(getattr(self, name)), self.source(name), spec.doc)
            for name, spec in self._specs.items()
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["parcelsearch options (value · source · what it is)"]
        for name, value, source, doc in rows:
            lines.append(
                f"  {name:<{widths[0]}}  {value:<{widths[1]}}  {source:<{widths[2]}}  {doc}"
            )
        return "\n".join(lines)


def _shown(value: Any) -> str:
    """An option's value for :meth:`Options.__repr__`: a password in a URL (a proxy's)
    hidden."""
    return repr(without_userinfo(value) if isinstance(value, str) and "://" in value else value)


#: The options of this process (see :class:`Options`).
options: Final = Options()


def _whole_setting(value: Any, least: int, what: str, knob: str, example: int) -> int:
    """``value`` as a whole number (an integral float too, not a bool) of at least ``least``.

    Raises
    ------
    ConfigurationError
        ``the {what}, at least {least}, got {value!r}.``, with the hint ``knob`` = ``example``.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not float(value).is_integer()
        or value < least
    ):
        raise ConfigurationError(
            f"the {what}, at least {least}, got {value!r}.", hints=[Hint(knob, example)]
        )
    return int(value)


def group_id_max_chars() -> int:
    """The longest GroupID accepted (``options.group_id_max_chars``), checked.

    Raises
    ------
    ConfigurationError
        It is not a whole number of at least 1.
    """
    return _whole_setting(
        options.group_id_max_chars,
        1,
        "longest GroupID must be a whole number of characters",
        "group_id_max_chars",
        MAX_GROUP_ID_CHARS,
    )


def page_size_setting() -> int | None:
    """The page size the user set (``options.page_size``), checked; ``None`` when not set
    (the vendor's is learnt from its answers).

    Raises
    ------
    ConfigurationError
        It is not a whole number of at least 1.
    """
    value = options.page_size
    return (
        None
        if value is None
        else _whole_setting(
            value, 1, "page size must be a whole number of GroupIDs", "page_size", PAGE_SIZE
        )
    )


def result_window_setting() -> int | None:
    """The result window the user set (``options.result_window``), checked; ``None`` when
    not set (learnt from the vendor's refusal of a deeper page).

    Raises
    ------
    ConfigurationError
        It is not a whole number of at least 1.
    """
    value = options.result_window
    return (
        None
        if value is None
        else _whole_setting(
            value, 1, "result window must be a whole number of pages", "result_window", 5
        )
    )


def max_request_bytes_setting(given: Any = None) -> int | None:
    """The request-line limit the user set (``given``, else ``options.max_request_bytes``),
    checked; ``None`` when not set (learnt from the gateway's refusal, else 7,168).

    Raises
    ------
    ConfigurationError
        It is not a whole number of at least 1,024 bytes.
    """
    value = given if given is not None else options.max_request_bytes
    return (
        None
        if value is None
        else _whole_setting(
            value,
            1024,
            "longest request line must be a whole number of bytes",
            "max_request_bytes",
            4096,
        )
    )


def default_cache_dir() -> Path:
    """Folder of the response cache, markets list and quota ledger (``options.cache_dir``).

    ``$PARCELSEARCH_CACHE_DIR`` when set, else a per-user cache folder:
    ``$XDG_CACHE_HOME/parcelsearch`` (``~/.cache/parcelsearch``), or
    ``%LOCALAPPDATA%\\parcelsearch\\Cache`` on Windows.
    """
    return options.cache_dir  # type: ignore[no-any-return]
