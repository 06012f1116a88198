"""The sliver learn_match_rule sends: one grid step tall, at most a kilometre long, across
the largest part of the areas (the call itself: tests/e2e/test_match_rule.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
import shapely
from requests.adapters import BaseAdapter
from shapely import MultiPolygon, box

import parcelsearch
from parcelsearch._fetch.vendor_profile import VendorProfile, load_profile
from parcelsearch.client import Client
from parcelsearch.notices import NothingMatchedWarning
from parcelsearch.rule_probe import SLIVER_M, sliver


@pytest.mark.parametrize(
    "area",
    [
        box(-97.5, 32.7, -97.4, 32.8),  # 9 km wide: the sliver is cut to a kilometre
        MultiPolygon([box(0, 0, 0.001, 0.001), box(0.01, 0, 0.02, 0.005)]),  # the larger part
        box(10, 10, 10.0000004, 10.1),  # narrower than a grid step: one step wide
    ],
)
def test_the_sliver_is_one_grid_step_tall_across_the_largest_part(area):
    ring = json.loads(sliver([area]))
    polygon = shapely.Polygon(ring)
    assert polygon.is_valid and len(ring) == 5
    (x0, y0), (x1, _), (_, y1) = ring[:3]
    assert round(y1 - y0, 6) == 1e-6 and x1 > x0
    assert (x1 - x0) * 111_320 * 0.8 <= SLIVER_M
    largest = max(shapely.get_parts(area), key=lambda p: p.area)
    assert polygon.intersects(largest)


class _NothingFound(BaseAdapter):
    """A vendor in memory that finds no parcel in any ring (every page: 0 rows)."""

    def send(self, request: Any, **kwargs: Any) -> requests.Response:
        answer = requests.Response()
        answer.status_code, answer.url = 200, request.url
        page = int(parse_qs(urlsplit(request.url).query).get("page", ["1"])[0])
        body = {"status": "OK", "rows": 0, "pages": 0, "page": page, "data": []}
        answer._content = json.dumps(body).encode()
        answer.headers["Content-Type"] = "application/json"
        return answer

    def close(self) -> None:
        pass


def test_a_search_resolves_the_vendors_profile_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 60: the client reads what is known of the vendor (its profile) when it is made;
    the search plans under the rule learnt from that same reading, never a second one."""
    from parcelsearch import rule_probe
    from parcelsearch._fetch import learning

    read: list[str] = []

    def counted(folder: Any, base_url: str) -> VendorProfile:
        read.append(base_url)
        return load_profile(folder, base_url)

    monkeypatch.setattr(learning, "load_profile", counted)
    monkeypatch.setattr(rule_probe, "load_profile", counted)
    session = requests.Session()
    session.mount("https://", _NothingFound())
    with Client("sk-test", "https://vendor.test", cache_dir=tmp_path, session=session) as client:
        client.learn(match_rule="intersects")
        with pytest.warns(NothingMatchedWarning):  # the vendor in memory finds nothing
            result = parcelsearch.search(
                [box(-97.5, 32.7, -97.499, 32.701)], client=client, progress=False, ledger=False
            )
    assert read == ["https://vendor.test"]  # the client's reading, and no other
    assert result.metadata["match"] == "intersects"  # the rule of that reading
    assert rule_probe.rule_for(vendor=client.vendor) == ("intersects", "https://vendor.test")
