"""KeyStore: hashes only, defaults per type, validation, listing, the request log."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from parcelsearch.errors import ConfigurationError
from parcelsearch_service.gateway import admit
from parcelsearch_service.keys import KeyStore, PostgresKeyStore, SqliteKeyStore, hash_key
from parcelsearch_service.limits import Outcome, Refusal


def _ok() -> Outcome[str]:
    return Outcome(200, "ok")


@pytest.fixture
def store(keys_location: str) -> Iterator[KeyStore]:
    """A fresh key store, on SQLite and on PostgreSQL."""
    keys = KeyStore(keys_location)
    yield keys
    keys.close()


def test_only_the_hash_is_stored(store: KeyStore) -> None:
    key = store.create("alice")
    rows = store.execute(store.connection(), "SELECT * FROM keys").fetchall()
    stored = " ".join(str(row[column]) for row in rows for column in row.keys())
    assert key not in stored and key[:12] not in stored
    assert hash_key(key) in stored
    assert admit(store, key, "markets", "/v1/markets", _ok).status == 200
    assert key not in repr(store) + repr(store.list())


@pytest.mark.parametrize(
    ("key_type", "limits"),
    [
        pytest.param("demo", (10.0, 50, "lifetime"), id="demo"),
        pytest.param("production", (10.0, 500, "month"), id="production"),
    ],
)
def test_defaults_per_type(store: KeyStore, key_type: str, limits: tuple[object, ...]) -> None:
    store.create("k", key_type=key_type)
    row = store.get("k")
    assert (row["per_second"], row["quota"], row["quota_period"]) == limits
    assert row["services"] == ["search", "markets"]
    assert (row["used_lifetime"], row["used_month"], row["revoked"]) == (0, 0, False)


def test_overrides(store: KeyStore) -> None:
    store.create(
        "big",
        "production",
        per_second=100,
        quota=10**6,
        quota_period="lifetime",
        services="markets",
    )
    row = store.get("big")
    assert (row["per_second"], row["quota"], row["quota_period"], row["services"]) == (
        100.0,
        10**6,
        "lifetime",
        ["markets"],
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"key_type": "gold"}, "key type must be one of demo, production", id="type"),
        pytest.param(
            {"per_second": 0}, "per_second must be a number from 0.01 to 1,000,000", id="rate"
        ),
        pytest.param({"per_second": 1e308}, "per_second must be a number from", id="rate-huge"),
        pytest.param({"per_second": 1e-320}, "per_second must be a number from", id="rate-tiny"),
        pytest.param({"per_second": float("nan")}, "per_second must be a number", id="rate-nan"),
        pytest.param({"quota": -1}, "quota must be a whole number from 0 to", id="quota"),
        pytest.param({"quota": 2**63}, "quota must be a whole number from 0 to", id="quota-big"),
        pytest.param({"name": "k" * 401}, "key name must have at most 400", id="long-name"),
        pytest.param({"quota_period": "week"}, "quota period must be one of", id="period"),
        pytest.param({"services": ("zoning",)}, "services must be some of", id="service"),
        pytest.param({"services": ()}, "services must be some of", id="no-service"),
        pytest.param({"name": " "}, "key name must be printable", id="blank-name"),
    ],
)
def test_invalid_settings(store: KeyStore, kwargs: dict[str, object], match: str) -> None:
    kwargs.setdefault("name", "k")
    with pytest.raises(ConfigurationError, match=match):
        store.create(**kwargs)  # type: ignore[arg-type]


def test_names_are_unique_and_revocation_sticks(store: KeyStore) -> None:
    key = store.create("bob")
    with pytest.raises(ConfigurationError, match="a key named 'bob' already exists"):
        store.create("bob")
    store.revoke("bob")
    assert admit(store, key, "markets", "/v1/markets", _ok) == Refusal(401, "Invalid ApiKey")
    assert store.get("bob")["revoked"] is True
    with pytest.raises(ConfigurationError, match="no key named 'carol'"):
        store.revoke("carol")


def test_keys_are_distinct_and_unknown_keys_fail(store: KeyStore) -> None:
    keys = {store.create(f"k{i}") for i in range(20)}
    assert len(keys) == 20
    assert admit(store, "x" * 40, "markets", "/v1/markets", _ok) == Refusal(401, "Invalid ApiKey")
    assert [row["name"] for row in store.list()] == [f"k{i}" for i in range(20)]


def test_empty_request_log_has_typed_columns(store: KeyStore) -> None:
    store.create("quiet")
    log = store.requests("quiet")
    assert list(log.columns) == ["time", "path", "polygon_sha256", "page", "status", "counted"]
    assert len(log) == 0
    assert isinstance(log.time.dtype, pd.DatetimeTZDtype) and str(log.time.dt.tz) == "UTC"


def test_only_the_hash_reaches_the_sqlite_file(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.sqlite")
    key = store.create("alice")
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("keys.sqlite*"))
    assert key.encode() not in raw
    assert hash_key(key).encode() in raw


def test_the_location_picks_the_implementation(keys_location: str) -> None:
    store = KeyStore(keys_location)
    try:
        expected = SqliteKeyStore if keys_location.endswith(".sqlite") else PostgresKeyStore
        assert type(store) is expected and isinstance(store, KeyStore)
        assert "password" not in repr(store)
    finally:
        store.close()


def test_a_second_store_on_the_same_location_sees_the_keys(
    store: KeyStore, keys_location: str
) -> None:
    key = store.create("shared")
    other = KeyStore(keys_location)
    try:
        assert admit(other, key, "markets", "/v1/markets", _ok).status == 200
        assert store.get("shared")["used_lifetime"] == 1
    finally:
        other.close()
