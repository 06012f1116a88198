"""Fixtures for the toolkit's end-to-end tests: a client on the session service."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import geopandas as gpd
import pytest

import parcelsearch
from parcelsearch_service.server import RunningService

#: Calls per second the keys of these tests allow, and the rate their clients send at: the
#: pace our own service allows, not the vendor's 10/s (the calls made stay the same; the run
#: is faster). Below the key's rate, so spike arrest refuses nothing and the service's log
#: counts exactly the calls the client made. Tests of pacing set their own rates.
KEY_RATE = 50
CLIENT_RATE = 40


@pytest.fixture
def make_client(
    service: RunningService, ca_bundle: str, tmp_path: Path, make_key: Callable[..., Any]
) -> Callable[..., parcelsearch.Client]:
    """``make_client(key_type="production", quota=..., **client_kwargs)``: a fresh key and a
    client for it, with its own cache folder in ``tmp_path``. Without ``key_overrides``, the
    key allows ``KEY_RATE`` calls/s and the client sends ``CLIENT_RATE`` (unless given
    ``rate``); a test that sets the key's limits (a quota, a rate) keeps the vendor's pace,
    which how many calls are under way when a limit is reached depends on."""

    def make(
        key_type: str = "production", *, key_overrides: dict[str, Any] | None = None, **kwargs: Any
    ) -> parcelsearch.Client:
        if key_overrides is None:
            key_overrides = {"quota": 100_000, "per_second": KEY_RATE}
            kwargs.setdefault("rate", CLIENT_RATE)
        key = make_key(key_type, **key_overrides)
        kwargs.setdefault("cache_dir", tmp_path / "cache")
        client = parcelsearch.Client(
            api_key=key, base_url=service.base_url, ca_bundle=ca_bundle, **kwargs
        )
        client.key_name = key.name  # type: ignore[attr-defined]
        return client

    return make


@pytest.fixture
def key(make_key: Callable[..., Any]) -> Any:
    """A production key for command-line runs, allowing ``KEY_RATE`` calls/s: above the
    ``CLIENT_RATE`` that ``env`` sets, so no request is refused by spike arrest and retried,
    and the service's log counts exactly the calls the client made."""
    return make_key("production", quota=1_000, per_second=KEY_RATE)


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch,
    service: RunningService,
    ca_bundle: str,
    key: Any,
    tmp_path: Path,
) -> Any:
    """The command line's environment on the session service, with ``key``, sending
    ``CLIENT_RATE`` calls/s; its cache in ``tmp_path / "cache"``."""
    monkeypatch.setenv("PARCELSEARCH_API_KEY", key)
    monkeypatch.setenv("PARCELSEARCH_RATE", str(CLIENT_RATE))
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", service.base_url)
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", ca_bundle)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PARCELSEARCH_QUOTA", raising=False)
    return key


@pytest.fixture(scope="session")
def demo_areas() -> gpd.GeoDataFrame:
    """The bundled demo study areas, indexed by ``area_id``."""
    return parcelsearch.demo_areas().set_index("area_id")


# -- the stand-in vendor (tests/_vendor.py): the reference service behind a switchable gateway --


@pytest.fixture(scope="session")
def vendor_fabric() -> tuple[Any, Any, dict[str, set[str]]]:
    from _vendor import vendor_fabric as make

    return make()


@pytest.fixture(scope="session")
def _vendor_session(
    tmp_path_factory: pytest.TempPathFactory,
    service_cert_dir: Path,
    vendor_fabric: tuple[Any, Any, dict[str, set[str]]],
) -> Any:
    from _vendor import StandInVendor

    from parcelsearch_service.server import start_service

    root = tmp_path_factory.mktemp("vendor")
    with start_service(
        parcels=vendor_fabric[0], keys=root / "keys.sqlite", cert_dir=service_cert_dir
    ) as upstream:
        key = upstream.keys.create(
            "stand-in-vendor", key_type="production", quota=1_000_000, per_second=1_000
        )
        vendor = StandInVendor(upstream.base_url, key, service_cert_dir)
        try:
            yield vendor
        finally:
            vendor.close()


@pytest.fixture
def vendor(_vendor_session: Any) -> Any:
    """The stand-in vendor, answering like the reference service until ``vendor.set(...)``;
    its request log starts empty."""
    _vendor_session.reset()
    yield _vendor_session
    _vendor_session.reset()


@pytest.fixture
def vendor_areas(tmp_path: Path, vendor_fabric: tuple[Any, Any, Any]) -> Path:
    """The stand-in's four study areas as a file (``area_id``: alpha … delta)."""
    path = tmp_path / "areas.gpkg"
    vendor_fabric[1].reset_index().to_file(path)
    return path


@pytest.fixture
def vendor_env(monkeypatch: pytest.MonkeyPatch, vendor: Any, ca_bundle: str, tmp_path: Path) -> Any:
    """The environment of an analyst pointed at the stand-in vendor (fast key: 200/s)."""
    monkeypatch.setenv("PARCELSEARCH_API_KEY", "a-vendor-key")
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", vendor.base_url)
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", ca_bundle)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PARCELSEARCH_RATE", "200")
    monkeypatch.delenv("PARCELSEARCH_QUOTA", raising=False)
    return vendor
