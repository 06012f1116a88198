"""What a key may be: its name, type, quota period, services, per-second rate and quota.

Every rule is checked here once, for ``parcelsearch keys create``, the portal and
:meth:`~parcelsearch_service.keys.KeyStore.create` alike; :func:`bounded_rate` is the rate
as the gateway applies it, whatever a store holds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from parcelsearch.errors import ConfigurationError
from parcelsearch.settings import KEY_TYPES

__all__ = [
    "SERVICES",
    "QUOTA_PERIODS",
    "MIN_RATE",
    "MAX_RATE",
    "MAX_QUOTA",
    "MAX_KEY_NAME",
    "NewKey",
    "check_limits",
    "check_new_key",
    "bounded_rate",
]

SERVICES: tuple[str, ...] = ("search", "markets")
QUOTA_PERIODS: tuple[str, ...] = ("lifetime", "month")
#: The per-second rates a key may have: one call in 100 s at the least (a spike-arrest
#: Retry-After is never longer), a million a second at the most (far more than a worker
#: serves: in effect no rate limit).
MIN_RATE, MAX_RATE = 0.01, 1_000_000.0
#: The largest quota a key may have (far beyond any use; well inside 64-bit counters).
MAX_QUOTA = 10**12
#: The longest key name (a portal app's key is named ``<e-mail>/<app name>``: up to 355).
MAX_KEY_NAME = 400


class NewKey(NamedTuple):
    """A new key's settings, checked: the values of its row in table ``keys``."""

    name: str
    key_type: str
    per_second: float
    quota: int | None
    quota_period: str
    services: str  # comma-separated, in the order of SERVICES


def check_limits(per_second: object, quota: object) -> None:
    """Refuse a per-second rate or a quota outside the ranges the gateway works with.

    Parameters
    ----------
    per_second
        Calls a second: a number from :data:`MIN_RATE` to :data:`MAX_RATE`.
    quota
        Calls a quota period: a whole number from 0 to :data:`MAX_QUOTA`, or ``None``.

    Raises
    ------
    ConfigurationError
        Naming the field and its allowed range.
    """
    rate_ok = (
        isinstance(per_second, int | float)
        and not isinstance(per_second, bool)
        and MIN_RATE <= per_second <= MAX_RATE
    )
    if not rate_ok:
        raise ConfigurationError(
            f"per_second must be a number from {MIN_RATE:g} to {MAX_RATE:,.0f} (calls a "
            f"second), got {str(per_second)[:40]}"
        )
    if quota is not None and (
        isinstance(quota, bool) or not isinstance(quota, int) or not 0 <= quota <= MAX_QUOTA
    ):
        raise ConfigurationError(
            f"quota must be a whole number from 0 to {MAX_QUOTA:,} (or none), got {str(quota)[:40]}"
        )


def bounded_rate(per_second: float) -> float:
    """``per_second`` as the gateway applies it: within :data:`MIN_RATE`–:data:`MAX_RATE`
    whatever the store holds (a rate written there by other means, or before the ranges were
    checked, cannot overflow the admission's arithmetic)."""
    if not per_second >= MIN_RATE:  # NaN included
        return MIN_RATE
    return min(float(per_second), MAX_RATE)


def check_new_key(
    name: object,
    key_type: str,
    per_second: float | None,
    quota: int | None,
    quota_period: str | None,
    services: Iterable[str] | str,
) -> NewKey:
    """A new key's settings checked, the type's defaults filled in
    (:data:`parcelsearch.settings.KEY_TYPES`).

    Parameters
    ----------
    name, key_type, per_second, quota, quota_period, services
        As :meth:`~parcelsearch_service.keys.KeyStore.create` takes them.

    Returns
    -------
    NewKey
        The name trimmed, the rate as a float, the services in their canonical order.

    Raises
    ------
    ConfigurationError
        A name that is not printable text or is too long, an unknown type, period or
        service, or a limit out of its range.
    """
    name = _check_name(name)
    if key_type not in KEY_TYPES:
        raise ConfigurationError(
            f"key type must be one of {', '.join(KEY_TYPES)}, got {key_type!r}"
        )
    default_rate, default_quota, default_period = KEY_TYPES[key_type]
    rate = default_rate if per_second is None else per_second
    limit = default_quota if quota is None else quota
    check_limits(rate, limit)
    period = default_period if quota_period is None else quota_period
    if period not in QUOTA_PERIODS:
        raise ConfigurationError(
            f"quota period must be one of {', '.join(QUOTA_PERIODS)}, got {quota_period!r}"
        )
    return NewKey(name, key_type, float(rate), limit, period, _check_services(services))


def _check_name(name: object) -> str:
    name = name.strip() if isinstance(name, str) else name
    if not isinstance(name, str) or not name or not name.isprintable():
        raise ConfigurationError(f"key name must be printable, non-empty text, got {name!r}")
    if len(name) > MAX_KEY_NAME:
        raise ConfigurationError(
            f"key name must have at most {MAX_KEY_NAME} characters, got {len(name):,}"
        )
    return name


def _check_services(wanted: Iterable[str] | str) -> str:
    names = wanted.split(",") if isinstance(wanted, str) else list(wanted)
    names = [s.strip() for s in names if s.strip()]
    unknown = sorted(set(names) - set(SERVICES))
    if unknown or not names:
        raise ConfigurationError(
            f"services must be some of {', '.join(SERVICES)}, got {','.join(names) or 'none'}"
        )
    return ",".join(s for s in SERVICES if s in names)
