"""Fixtures for the toolkit's end-to-end tests: a client on the session service."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import geopandas as gpd
import pytest

import parcelsearch
from parcelsearch.service.server import RunningService


@pytest.fixture
def make_client(
    service: RunningService, ca_bundle: str, tmp_path: Path, make_key: Callable[..., Any]
) -> Callable[..., parcelsearch.Client]:
    """``make_client(key_type="production", quota=..., **client_kwargs)``: a fresh key and a
    client for it, with its own cache folder in ``tmp_path``."""

    def make(key_type: str = "production", *, key_overrides: dict[str, Any] | None = None,
             **kwargs: Any) -> parcelsearch.Client:
        key = make_key(key_type, **(key_overrides or {"quota": 100_000}))
        kwargs.setdefault("cache_dir", tmp_path / "cache")
        client = parcelsearch.Client(
            api_key=key, base_url=service.base_url, ca_bundle=ca_bundle, **kwargs
        )
        client.key_name = key.name  # type: ignore[attr-defined]
        return client

    return make


@pytest.fixture(scope="session")
def demo_areas() -> gpd.GeoDataFrame:
    """The bundled demo study areas, indexed by ``area_id``."""
    return parcelsearch.demo_areas().set_index("area_id")
