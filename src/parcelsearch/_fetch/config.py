"""The client's configuration, read and checked once: the key (held as a :class:`Secret`),
the base URL, the CA bundle and the positive numbers (rate, response deadline), each from its
argument, else :data:`parcelsearch.settings.options` and the environment; a missing or bad
one is a :class:`~parcelsearch.errors.ConfigurationError` whose hint names the knob."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from parcelsearch import settings
from parcelsearch._fetch.network import unreadable_ca
from parcelsearch.errors import ConfigurationError, Hint

__all__ = ["Secret", "positive", "resolve_base_url", "resolve_ca_bundle", "resolve_key"]


class Secret:
    """Holds the key; its repr never shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value held (for the one place it is sent)."""
        return self._value

    def __repr__(self) -> str:
        return "<secret>"


def resolve_key(api_key: str | None) -> str:
    """``api_key``, else ``$PARCELSEARCH_API_KEY``, stripped: printable ASCII, not empty."""
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


def resolve_base_url(base_url: str | None) -> str:
    """``base_url``, else the option's, checked (:func:`parcelsearch.settings.check_base_url`)."""
    url = base_url if base_url is not None else (settings.options.base_url or "")
    if not url.strip():
        raise ConfigurationError("no base URL of the services.", hints=[Hint("base_url")])
    return settings.check_base_url(url)


def resolve_ca_bundle(ca_bundle: str | os.PathLike[str] | None) -> str | None:
    """``ca_bundle``, else the option's: a readable PEM file, or ``None`` (none given)."""
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
    unreadable = unreadable_ca(path)
    if unreadable is not None:
        raise ConfigurationError(
            f"CA bundle {str(path)!r} holds no certificate that can be read ({unreadable}).",
            hints=[Hint("ca_bundle", phrase="point {knob} at a PEM file")],
        )
    return str(path)


def positive(given: float | None, setting: str, what: str, example: float) -> float:
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
