"""local_service(): the reference service and a ready client, with or without ``with``."""

from __future__ import annotations

import parcelsearch


def test_context_manager_yields_a_ready_client() -> None:
    with parcelsearch.local_service() as client:
        assert "Abilene, TX" in parcelsearch.markets(client)
        assert client.base_url.startswith("https://127.0.0.1:")


def test_without_with_stop_is_idempotent_and_cleans_up() -> None:
    svc = parcelsearch.local_service(key_type="demo")
    folder = svc.directory
    assert svc.usage()["quota"] == 50
    assert "running" in repr(svc)
    svc.stop()
    svc.stop()
    assert not folder.exists()
    assert "stopped" in repr(svc)


def test_key_stays_secret() -> None:
    svc = parcelsearch.local_service()
    try:
        key = svc.client._key.reveal()
        assert key not in repr(svc) and key not in repr(svc.client)
    finally:
        svc.stop()
