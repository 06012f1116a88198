"""Learn how the vendor matches parcels with one priced call: a sliver across your own area.

A sliver one grid step (about 11 cm) tall and up to :data:`SLIVER_M` long, through the
middle of the largest part of the areas, is searched once (page 1). A vendor matching
footprints (``"intersects"``) returns every parcel the sliver crosses; one matching a
point of each parcel (``"representative-point"``) only those whose point lies in those
11 cm, which for parcels more than a few metres deep is almost always none.

- no parcel: ``"representative-point"``;
- :data:`CROSSED` or more: ``"intersects"``;
- one or two: ``"unknown"`` (too few to tell).

The rule learnt is remembered with the rest of what is known of the vendor at that base URL
(:class:`~parcelsearch._fetch.vendor_profile.VendorProfile`, in the client's cache folder);
:func:`remembered_rule` reads it back, and :func:`parcelsearch.search`
uses it when neither ``match=`` nor ``$PARCELSEARCH_MATCH`` is given.

A sliver that crosses no parcel at all (open water, empty land) reads as the point rule,
so the areas should be where parcels are. Mistakes lean to the strict side: a point rule
over very dense lots (deeper than the sliver is tall only a few times over a kilometre)
may read as ``"intersects"``, which only costs connectors' savings.
"""

from __future__ import annotations

import math
import os
from typing import Any

import shapely

from parcelsearch import _wire, settings
from parcelsearch._fetch.http import Spend
from parcelsearch._fetch.vendor_profile import VendorProfile, load_profile
from parcelsearch.client import Client
from parcelsearch.planning.areas import validate_areas

__all__ = [
    "CROSSED",
    "SLIVER_M",
    "learn_match_rule",
    "remembered_rule",
    "rule_for",
    "rule_of",
    "sliver",
]

#: Longest sliver, in metres along the ground.
SLIVER_M = 1_000.0
#: Parcels a sliver must match to show the footprint rule.
CROSSED = 3
_STEP = 10.0**-settings.COORD_DECIMALS


def sliver(areas: Any) -> str:
    """The sliver's ring (``searchPolygon`` JSON): one grid step tall, up to
    :data:`SLIVER_M` long, centred on the representative point of the largest part of
    ``areas`` (any input :func:`parcelsearch.plan` takes), within that part's bounds."""
    validated = validate_areas(areas)
    parts = shapely.get_parts(validated.geometry.to_numpy())
    part = parts[int(shapely.area(parts).argmax())]
    middle = part.representative_point()
    minx, _, maxx, _ = part.bounds
    half = SLIVER_M / 2 / (111_320.0 * max(math.cos(math.radians(middle.y)), 1e-6))
    x0, x1 = max(minx, middle.x - half), min(maxx, middle.x + half)
    x0, x1 = round(x0, settings.COORD_DECIMALS), round(x1, settings.COORD_DECIMALS)
    if x1 - x0 < _STEP:
        x1 = round(x0 + _STEP, settings.COORD_DECIMALS)
    y0 = round(middle.y, settings.COORD_DECIMALS)
    y1 = round(y0 + _STEP, settings.COORD_DECIMALS)
    return _wire.ring_json([(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0)])


def rule_of(rows: int) -> str:
    """The rule a sliver's page 1 shows by the parcels it matched (see the module's rules)."""
    return "representative-point" if rows == 0 else "intersects" if rows >= CROSSED else "unknown"


def learn_match_rule(
    client: Client, areas: Any, remember: bool = True, spend: Spend | None = None
) -> str:
    """How the vendor behind ``client`` matches parcels, from one search call (page 1 of
    :func:`sliver`): ``"representative-point"``, ``"intersects"`` or ``"unknown"`` (see the
    module's rules). The call is priced like any other (one call of the key's quota).

    Parameters
    ----------
    client
        The :class:`~parcelsearch.Client` of the service to ask.
    areas
        The areas you mean to search (any input :func:`parcelsearch.plan` takes).
    remember
        Keep the rule learnt for ``client.base_url`` (:func:`remembered_rule`); an
        ``"unknown"`` answer forgets what was kept.
    spend
        The spend hook the call goes through (:meth:`parcelsearch.Client.search_page`);
        none by default.

    Returns
    -------
    str
        A name :func:`parcelsearch.plan` takes as ``match=``.
    """
    rule = rule_of(client.search_page(sliver(areas), 1, spend=spend).rows)
    if remember:  # an "unknown" answer forgets what was kept
        client.learn(match_rule=None if rule == "unknown" else rule)
    return rule


def rule_for(
    base_url: str | None = None,
    profile: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    *,
    vendor: VendorProfile | None = None,
) -> tuple[str | None, str | None]:
    """The rule learnt for the service a search would ask, with no key and no call: its base
    URL is ``base_url``, else that of the profile a client would use
    (:func:`parcelsearch.profiles.chosen`), else ``$PARCELSEARCH_BASE_URL``. What
    :func:`parcelsearch.search` plans under when no ``match=`` is given, for ``parcelsearch
    plan`` to show the same pieces.

    ``vendor``: what a client already resolved and read of its service
    (:attr:`parcelsearch.Client.vendor`): its rule and base URL, nothing resolved or read
    again (one resolution per search).

    Returns
    -------
    tuple
        The rule (None: none learnt) and the base URL it was looked up for (None: none
        configured).
    """
    from parcelsearch import profiles

    if vendor is not None:
        return vendor.match_rule, vendor.base_url
    url = base_url
    if url is None:
        named = profiles.chosen(profile)  # as a client would choose it (its key unread)
        saved = profiles.load(named) if named is not None else None
        url = saved.base_url if saved is not None else None
    url = url or settings.options.base_url
    if not url:
        return None, None
    url = settings.check_base_url(url)
    folder = cache_dir if cache_dir is not None else settings.options.cache_dir
    return load_profile(folder, url).match_rule, url


def remembered_rule(client: Client) -> str | None:
    """The rule :func:`learn_match_rule` learnt for ``client.base_url`` (from its cache
    folder), or None."""
    return load_profile(client.cache_dir, client.base_url).match_rule  # as kept now
