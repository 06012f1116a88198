"""The API key never appears in cache files, ledgers, the key store, logs, exception messages
and reprs, or notebook outputs: produce all of them with DEBUG logging on, then scan."""

from __future__ import annotations

import base64
import json
import logging
import re
import warnings
from pathlib import Path
from typing import Any

import geopandas as gpd
import pytest
from _faultproxy import FaultProxy
from _helpers import store_bytes

from parcelsearch import Client, Ledger, ResponseCache, search
from parcelsearch.errors import ParcelSearchError
from parcelsearch.notices import PartialResultWarning

ROOT = Path(__file__).resolve().parents[2]
# What a key looks like: secrets.token_urlsafe(30), 40 URL-safe base64 characters.
KEY_SHAPE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{40}(?![A-Za-z0-9_-])")


def _needles(key: str) -> list[bytes]:
    """The key and recognisable parts of it, as they could be written."""
    return [
        key.encode(),
        key[:16].encode(),
        key[-16:].encode(),
        json.dumps(key).encode(),
        key.encode("utf-16-le"),
    ]


def _scan_files(folder: Path, key: str) -> tuple[int, list[str]]:
    files, found = 0, []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        files += 1
        data = path.read_bytes()
        found += [f"{path}: {needle[:8]!r}…" for needle in _needles(key) if needle in data]
    return files, found


def _errors(client: Client, proxy: FaultProxy, areas: gpd.GeoDataFrame) -> list[BaseException]:
    """Errors raised with this key: budget, transport, malformed body, quota refusal."""
    raised: list[BaseException] = []
    try:
        search(
            areas,
            client=client,
            id_column="area_id",
            budget=2,
            progress=False,
            cache=False,
            ledger=False,
        )
    except ParcelSearchError as exc:
        raised.append(exc)
    with warnings.catch_warnings(record=True) as told:  # allow_partial: returned, warned
        warnings.simplefilter("always")
        search(
            areas,
            client=client,
            id_column="area_id",
            budget=2,
            allow_partial=True,
            progress=False,
            cache=False,
            ledger=False,
        )
    for item in told:
        if isinstance(item.message, PartialResultWarning):
            raised += [item.message, item.message.error]  # type: ignore[attr-defined]
    for fault in ("datarows", "cut-length", "reset", "503"):
        proxy.rule = lambda arrival, fault=fault: fault
        faulty = Client(
            api_key=client._key.reveal(),
            base_url=proxy.base_url,
            ca_bundle=client.ca_bundle,
            rate=50,
            retries=0,
            cache_dir=client.cache_dir,
        )
        try:
            faulty.search_page("[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]", 1)
        except ParcelSearchError as exc:
            raised.append(exc)
        finally:
            faulty.close()
    return raised


def test_key_never_written_or_shown(
    service: Any,
    fast_key: Any,
    ca_bundle: str,
    tmp_path: Path,
    fault_proxy: FaultProxy,
    demo_areas_gdf: gpd.GeoDataFrame,
    caplog: pytest.LogCaptureFixture,
    capsys: Any,
    figures: Any,
) -> None:
    key = fast_key()
    caplog.set_level(logging.DEBUG)  # every logger: toolkit, urllib3, the service's own
    cache_dir = tmp_path / "cache"
    client = Client(
        api_key=key, base_url=service.base_url, ca_bundle=ca_bundle, rate=40, cache_dir=cache_dir
    )
    result = search(demo_areas_gdf, client=client, id_column="area_id", progress=False)
    again = search(demo_areas_gdf, client=client, id_column="area_id", progress=False)
    assert again.calls == 0
    raised = _errors(client, fault_proxy, demo_areas_gdf)
    assert len(raised) == 7  # the partial result's warning and its error both checked

    files, found = _scan_files(cache_dir, key)  # parquet pages, market list, ledger (+WAL)
    assert files >= 2 and (cache_dir / "ledger.sqlite").exists()
    store = service.keys.path
    data = store_bytes(store)  # the service's key store, its WAL and SHM
    files += len(list(store.parent.glob(store.name + "*")))
    found += [f"{store}*: {n[:8]!r}…" for n in _needles(key) if n in data]
    shown = [
        repr(client),
        str(client.__dict__),
        repr(client.session.__dict__),
        repr(result),
        result._repr_html_(),
        result.summary().to_string(),
        repr(result.tiles),
        repr(again),
        repr(ResponseCache(cache_dir)),
        repr(Ledger(cache_dir / "ledger.sqlite")),
        caplog.text,
        "\n".join(str(r.args) for r in caplog.records),
        *(str(e) for e in raised),
        *(repr(e) for e in raised),
        *(repr(getattr(e, "__dict__", {})) for e in raised),
    ]
    out, err = capsys.readouterr()
    shown += [out, err]
    for text in shown:
        for needle in _needles(key):
            if needle.decode("utf-8", "replace") in text:
                found.append(f"shown: {text[:80]!r}")
    assert not found, "\n".join(found)
    assert len(caplog.records) > 10  # DEBUG logging was on and produced records
    figures.add("inputs tried", "secret scan: files scanned", files)
    figures.add("inputs tried", "secret scan: texts scanned (reprs, logs, errors)", len(shown))
    figures.add("inputs tried", "secret scan: log records", len(caplog.records))


def _scanned(output: dict[str, Any]) -> str:
    """An output as JSON without its pictures, once they are checked to be PNG bytes (their
    base64 is full of key-shaped runs; the maps' pictures are PNGs from headless Chromium)."""
    data = dict(output.get("data", {}))
    if "image/png" in data:
        assert base64.b64decode(data.pop("image/png"))[:8] == b"\x89PNG\r\n\x1a\n"
    return json.dumps({**output, "data": data})


def test_notebook_outputs_hold_no_key(figures: Any) -> None:
    """Committed notebooks: no output holds a key-shaped token or an ``x-api-key`` value."""
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    outputs = 0
    for notebook in notebooks:
        for cell in json.loads(notebook.read_text())["cells"]:
            for output in cell.get("outputs", []):
                outputs += 1
                text = _scanned(output)
                tokens = [
                    t for t in KEY_SHAPE.findall(text) if not re.fullmatch(r"[0-9a-f]+", t)
                ]  # hex digests are not keys
                assert not tokens, (notebook.name, tokens)
    figures.add("inputs tried", "notebook outputs scanned", outputs)


def test_key_shape_pattern_finds_a_real_key(service: Any, make_key: Any) -> None:
    """The notebook scan's pattern matches the keys the service issues."""
    key = make_key()
    assert KEY_SHAPE.fullmatch(key)
    assert KEY_SHAPE.search(f"Client(key='{key}')")
