"""Spike arrest, quotas and persisted counters over real HTTPS."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import _conformance
import pytest
import requests

from parcelsearch_service.server import RunningService

# Run against `parcelsearch serve --workers 2` on each backend (tests/_conformance.py).
service, service_276 = _conformance.service, _conformance.service_276


MARKETS = "/v1/markets"


def _call(
    session: requests.Session, svc: RunningService, key: str, path: str = MARKETS, **params: str
) -> requests.Response:
    return session.get(svc.base_url + path, params=params, headers={"x-api-key": key}, timeout=30)


def test_11th_call_in_one_second_is_spike_arrested(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    """Judged from the service's request log, not the client's clock: every refusal came
    when the ten admissions before it lay within one second, and no one-second window of the
    log holds more than ten admissions."""
    key = make_key("demo")
    statuses: list[int] = []
    for _ in range(40):
        response = _call(https, service, key)
        statuses.append(response.status_code)
        if response.status_code == 429:
            assert response.json()["messages"] == ["Spike arrest violation. Allowed rate : 10ps"]
            break
    log = service.keys.requests(key.name)  # type: ignore[attr-defined]
    times = log.time.astype("int64").to_numpy() / 1e9
    admitted = statuses.count(200)
    assert len(times) == admitted and admitted >= 10
    assert max(((times[i:] - t) < 1.0).sum() for i, t in enumerate(times)) <= 10
    if statuses[-1] == 429:  # the refusal was due: ten admissions in the second before it
        assert times[-1] - times[-10] < 1.0
    assert statuses[:10] == [200] * 10


def test_spike_arrest_message_retry_after_and_not_counted(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    key = make_key("demo", per_second=3)
    responses = [_call(https, service, key) for _ in range(4)]
    refused = responses[-1]
    assert refused.status_code == 429
    assert refused.json() == {
        "status": "ERROR",
        "messages": ["Spike arrest violation. Allowed rate : 3ps"],
    }
    assert int(refused.headers["Retry-After"]) == 1
    assert service.keys.get(key.name)["used_lifetime"] == 3  # type: ignore[attr-defined]
    time.sleep(1.05)
    assert _call(https, service, key).status_code == 200


def test_default_rate_message_says_10ps(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    key = make_key("production")
    statuses = []
    for _ in range(30):
        response = _call(https, service, key)
        statuses.append(response.status_code)
        if response.status_code == 429:
            assert response.json()["messages"] == ["Spike arrest violation. Allowed rate : 10ps"]
            break
    assert statuses[-1] == 429


def test_51st_demo_call_hits_the_quota(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    key = make_key("demo", per_second=1000)
    statuses = [_call(https, service, key).status_code for _ in range(50)]
    assert statuses == [200] * 50
    refused = _call(https, service, key)
    assert refused.status_code == 429
    assert refused.json()["messages"] == [
        f"Rate limit quota violation. Quota limit exceeded. Identifier : {key.name}"  # type: ignore[attr-defined]
    ]
    usage = service.keys.get(key.name)  # type: ignore[attr-defined]
    assert (usage["used_lifetime"], usage["used_month"]) == (50, 50)


def test_400s_count_toward_the_quota(
    https: requests.Session, service: RunningService, make_key: Callable[..., str]
) -> None:
    key = make_key("demo", per_second=1000, quota=3)
    for _ in range(3):
        assert _call(https, service, key, "/v1/search", searchPolygon="nonsense").status_code == 400
    assert _call(https, service, key, "/v1/search", searchPolygon="nonsense").status_code == 429


def test_limits_hold_exactly_under_concurrency(
    service: RunningService, ca_bundle: str, make_key: Callable[..., str]
) -> None:
    key = make_key("production", per_second=1000, quota=25)

    def worker(_: int) -> list[int]:
        with requests.Session() as session:
            session.trust_env, session.verify = False, ca_bundle
            return [_call(session, service, key).status_code for _ in range(10)]

    with ThreadPoolExecutor(4) as pool:
        statuses = [s for batch in pool.map(worker, range(4)) for s in batch]
    assert statuses.count(200) == 25
    assert statuses.count(429) == 15
    assert service.keys.get(key.name)["used_lifetime"] == 25  # type: ignore[attr-defined]


def test_spike_window_holds_under_concurrency(
    service: RunningService, ca_bundle: str, make_key: Callable[..., str]
) -> None:
    key = make_key("production", per_second=5, quota=1000)

    def worker(_: int) -> list[int]:
        with requests.Session() as session:
            session.trust_env, session.verify = False, ca_bundle
            return [_call(session, service, key).status_code for _ in range(8)]

    with ThreadPoolExecutor(4) as pool:
        statuses = [s for batch in pool.map(worker, range(4)) for s in batch]
    assert set(statuses) == {200, 429}
    log = service.keys.requests(key.name)  # type: ignore[attr-defined]
    times = log.time.astype("int64").to_numpy() / 1e9
    # No one-second window holds more than 5 admitted requests.
    for i, start in enumerate(times):
        assert ((times[i:] - start) < 1.0).sum() <= 5
    assert len(log) == statuses.count(200)


@pytest.mark.slow
def test_counters_survive_a_restart(
    service: Any, spawn_service: Callable[..., Any], ca_bundle: str
) -> None:
    first = spawn_service(service.backend)
    key = first.keys.create("survivor", "demo", per_second=1000, quota=5)
    with requests.Session() as session:
        session.trust_env, session.verify = False, ca_bundle
        assert [_call(session, first, key).status_code for _ in range(3)] == [200] * 3
        first.stop()
        second = spawn_service(
            service.backend, locations=(first.keys_location, first.parcels_location)
        )
        assert second.keys.get("survivor")["used_lifetime"] == 3
        statuses = [_call(session, second, key).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]


def test_request_log_records_polygon_and_page(
    https: requests.Session, service_276: RunningService, example_276: object
) -> None:
    import json

    key = service_276.keys.create("logged", "production", quota=100)
    ring = json.dumps(example_276.ring)  # type: ignore[attr-defined]
    for page in (1, 2, 3, 4):
        _call(https, service_276, key, "/v1/search", searchPolygon=ring, page=str(page))
    log = service_276.keys.requests("logged")
    assert log.page.tolist() == [1, 2, 3, 4]
    assert log.status.tolist() == [200, 200, 200, 400]
    assert log.polygon_sha256.nunique() == 1
    assert log.counted.all()
