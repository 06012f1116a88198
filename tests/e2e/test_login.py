"""The profile flow end to end (issue 41): 'parcelsearch login' keeps the key (here in the
file fallback: this machine has no OS keyring), searches on the command line and in Python
use it, and the key appears in no output, log, cache file or notebook."""

from __future__ import annotations

import io
import logging
import stat
from pathlib import Path

import pytest
from _cli import run

import parcelsearch

ROOT = Path(__file__).resolve().parents[2]


def test_login_then_search_without_a_key_anywhere(
    make_key,
    service,
    ca_bundle,
    tmp_path: Path,
    capsys,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    key = make_key("production", quota=1_000, per_second=50)
    for name in (
        "PARCELSEARCH_API_KEY",
        "PARCELSEARCH_BASE_URL",
        "PARCELSEARCH_CA_BUNDLE",
        "PARCELSEARCH_PROFILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PARCELSEARCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    printed: list[str] = []

    def cli(*argv: str, stdin: str = "") -> int:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        code, out, err = run(list(argv), capsys)
        printed.extend([out, err])
        return code

    assert (
        cli("login", "--base-url", service.base_url, "--ca-bundle", ca_bundle, stdin=f"{key}\n")
        == 0
    )
    fingerprint = parcelsearch.Client(profile="default").fingerprint
    assert f"profile 'default' saved: key sha256:{fingerprint}" in printed[-2]
    credentials = tmp_path / "config" / "credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600

    areas = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().iloc[[1, 3]].to_file(areas)
    assert (
        cli("search", str(areas), "--id-column", "area_id", "--out", str(tmp_path / "ids.csv")) == 0
    )  # the 'default' profile: key, URL and CA
    spent = len(service.keys.requests(key.name))
    assert spent > 0
    client = parcelsearch.Client(profile="default", cache_dir=tmp_path / "py-cache")
    result = parcelsearch.search(
        parcelsearch.demo_areas().iloc[[1, 3]], id_column="area_id", client=client, progress=False
    )
    assert len(service.keys.requests(key.name)) == spent + result.calls
    printed.extend([repr(client), repr(result), result._repr_html_()])
    assert cli("profiles") == 0 and cli("profiles", "--json") == 0
    assert f"sha256:{fingerprint}" in printed[-2]

    assert cli("logout") == 0
    assert cli("search", str(areas), "--out", str(tmp_path / "x.csv")) == 2
    assert "no API key" in printed[-1]

    # The witness: the key in no output, log, file written (but the 0600 credentials
    # file, now without it), nor any committed notebook.
    assert not [text for text in printed if key in text]
    assert key not in caplog.text
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(written) > 10
    assert not [p for p in written if key.encode() in p.read_bytes()]
    for notebook in (ROOT / "notebooks").glob("*.ipynb"):
        text = notebook.read_text(encoding="utf-8")
        assert 'PARCELSEARCH_API_KEY\\"] =' not in text and "api_key=" not in text, notebook
