"""The vendor as analysts in an organisation reach it: through a proxy (``HTTPS_PROXY`` and
the rest, with or without credentials, ``--proxy``), through TLS inspection whose CA comes
from ``--ca-bundle``, ``REQUESTS_CA_BUNDLE`` or ``SSL_CERT_FILE``, ``NO_PROXY`` honoured,
``.netrc`` never read, and the key only ever to the vendor's host, inside the tunnel.

The stand-in vendor here answers as ``vendor.test``, a name only the proxy resolves (as behind
a corporate proxy); its request log and the proxy's record of what it saw in clear
(``tests/_proxy.py``) are the witnesses."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from _cli import run
from _proxy import ForwardProxy
from _vendor import MINIMUM, StandInVendor, exact, search

KEY = "a-vendor-key"
PROXY_VARIABLES = (
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "PARCELSEARCH_PROXY",
)


@pytest.fixture(scope="module")
def far_vendor(
    _vendor_session: Any, service_cert_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    """A stand-in vendor whose certificate names ``vendor.test`` (signed by the test CA)."""
    import trustme

    folder = tmp_path_factory.mktemp("far-vendor")
    shutil.copy(service_cert_dir / "ca.pem", folder / "ca.pem")
    ca = trustme.CA.from_pem(
        (service_cert_dir / "ca.pem").read_bytes(), (service_cert_dir / "ca-key.pem").read_bytes()
    )
    leaf = ca.issue_cert("vendor.test")
    (folder / "server-key.pem").write_bytes(leaf.private_key_pem.bytes())
    (folder / "server.pem").write_bytes(b"".join(b.bytes() for b in leaf.cert_chain_pems))
    host, port = _vendor_session._upstream
    vendor = StandInVendor(f"https://{host}:{port}", _vendor_session._key, folder)
    try:
        yield vendor
    finally:
        vendor.close()


@pytest.fixture
def far(far_vendor: Any, monkeypatch: pytest.MonkeyPatch, ca_bundle: str, tmp_path: Path) -> Any:
    """The analyst's environment pointed at ``https://vendor.test:<port>``, no proxy or CA
    variable set (each test sets its own), ``HOME`` in ``tmp_path``."""
    far_vendor.reset()
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PARCELSEARCH_API_KEY", KEY)
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", f"https://vendor.test:{far_vendor.port}")
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", ca_bundle)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PARCELSEARCH_RATE", "200")
    monkeypatch.delenv("PARCELSEARCH_QUOTA", raising=False)
    yield far_vendor
    far_vendor.reset()


def _hosts(vendor: Any) -> dict[str, str]:
    return {"vendor.test": "127.0.0.1"}


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"])
def test_a_tunnel_reaches_the_vendor_and_sees_no_key(
    far, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch, variable
) -> None:
    with ForwardProxy(hosts=_hosts(far)) as proxy:
        monkeypatch.setenv(variable, proxy.url)
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
        assert code == 0, err
        assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
        assert far.calls() == MINIMUM
        assert {target for target, _ in proxy.connects} == {f"vendor.test:{far.port}"}
        clear = proxy.clear_text()
        assert b"CONNECT vendor.test" in clear and KEY.encode() not in clear
        assert b"x-api-key" not in clear.lower() and b"searchPolygon" not in clear
        assert all(
            arrival.had_key and arrival.host.startswith("vendor.test") for arrival in far.log
        )


def test_proxy_credentials_are_sent_to_the_proxy_and_never_shown(
    far, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch
) -> None:
    with ForwardProxy(user="ana", password="s3cret-proxy", hosts=_hosts(far)) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url_with("ana", "s3cret-proxy"))
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
        assert code == 0, err
        assert exact(ids, vendor_fabric[2]) and far.calls() == MINIMUM
        assert "s3cret-proxy" not in out + err
        cache = tmp_path / "cache"
        assert all(
            b"s3cret-proxy" not in path.read_bytes() for path in cache.rglob("*") if path.is_file()
        )

        far.log.clear()
        monkeypatch.setenv("HTTPS_PROXY", proxy.url_with("ana", "wrong-password"))
        code, out, err, ids, meta = search(
            capsys, vendor_areas, tmp_path / "w.parquet", "--refresh", "all"
        )
        assert code != 0
        assert "asks for authentication (HTTP 407 Proxy Authentication Required" in err
        assert "were refused" in err and "wrong-password" not in err + out
        assert f"http://***@127.0.0.1:{proxy.port}" in err
        assert far.calls() == 0  # nothing reached the vendor

        monkeypatch.setenv("HTTPS_PROXY", proxy.url)  # no credentials at all
        code, out, err, ids, meta = search(
            capsys, vendor_areas, tmp_path / "n.parquet", "--refresh", "all"
        )
        assert code != 0 and "no user name and password were given" in err
        assert far.calls() == 0


def test_the_proxy_flag_for_those_who_cannot_set_the_environment(
    far, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    with ForwardProxy(user="ana", password="flag-pass", hosts=_hosts(far)) as proxy:
        code, out, err, ids, meta = search(
            capsys,
            vendor_areas,
            tmp_path / "ids.parquet",
            "--proxy",
            proxy.url_with("ana", "flag-pass"),
        )
        assert code == 0, err
        assert exact(ids, vendor_fabric[2]) and far.calls() == MINIMUM
        assert len(proxy.connects) >= 1 and "flag-pass" not in out + err


@pytest.mark.parametrize("setting", ["--ca-bundle", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"])
def test_tls_inspection_with_the_ca_from_each_setting(
    far, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch, ca_bundle, setting
) -> None:
    with ForwardProxy(
        hosts=_hosts(far), inspect=True, upstream_ca=ca_bundle, folder=tmp_path
    ) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("PARCELSEARCH_CA_BUNDLE")
        # without the inspection CA: the certificate failure names every way to give it
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "no.parquet")
        assert code != 0
        assert "TLS verification failed" in err and "operating system's trust store" in err
        for way in ("--ca-bundle", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "PARCELSEARCH_CA_BUNDLE"):
            assert way in err
        assert far.calls() == 0
        extra: tuple[str, ...] = ()
        if setting == "--ca-bundle":
            extra = ("--ca-bundle", str(proxy.ca_pem))
        else:
            monkeypatch.setenv(setting, str(proxy.ca_pem))
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet", *extra)
        assert code == 0, err
        assert exact(ids, vendor_fabric[2]) and far.calls() == MINIMUM
        assert b"GET /v1/search?" in proxy.clear_text()  # it inspected, as IT meant it to


def test_netrc_is_never_read(far, vendor_areas, tmp_path, capsys, monkeypatch, ca_bundle) -> None:
    netrc = tmp_path / ".netrc"
    netrc.write_text(
        "machine vendor.test login ana password netrc-secret\n"
        "default login ana password netrc-secret\n"
    )
    netrc.chmod(0o600)
    with ForwardProxy(
        hosts=_hosts(far), inspect=True, upstream_ca=ca_bundle, folder=tmp_path
    ) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(proxy.ca_pem))
        monkeypatch.delenv("PARCELSEARCH_CA_BUNDLE")
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
        assert code == 0, err
        clear = proxy.clear_text()
        assert b"GET /v1/search?" in clear
        assert b"authorization:" not in clear.lower() and b"bmV0cmMtc2VjcmV0" not in clear


def test_no_proxy_is_honoured_and_loopback_never_proxied(
    far, vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch
) -> None:
    with ForwardProxy(hosts=_hosts(far)) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "example.org,.test")
        monkeypatch.setenv("PARCELSEARCH_BASE_URL", f"https://vendor.test:{far.port}")
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
        assert code != 0  # sent directly: vendor.test resolves only at the proxy
        assert proxy.connects == [] and far.calls() == 0
        # the stand-in on 127.0.0.1 (a local service): reached directly, proxy or not
        monkeypatch.setenv("PARCELSEARCH_BASE_URL", vendor_env.base_url)
        monkeypatch.delenv("NO_PROXY")
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "local.parquet")
        assert code == 0, err
        assert exact(ids, vendor_fabric[2]) and proxy.connects == []


def test_doctor_shows_the_proxy_and_the_trust_store(far, capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://ana:doctor-pass@127.0.0.1:3128")
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert code == 0, err
    assert "proxy: http://***@127.0.0.1:3128 (from HTTPS_PROXY)" in out
    assert "trust: CA bundle" in out and "doctor-pass" not in out + err
    monkeypatch.delenv("PARCELSEARCH_CA_BUNDLE")
    monkeypatch.setenv("NO_PROXY", "vendor.test")
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert code == 0, err
    assert "proxy: none (NO_PROXY names this host)" in out
    assert "trust: the operating system's trust store (truststore)" in out


@pytest.mark.slow
@pytest.mark.skipif(
    sys.platform != "linux" or shutil.which("openssl") is None,
    reason="the OS trust store read through OpenSSL's folders: Linux",
)
def test_a_ca_installed_on_the_machine_just_works(
    far, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch, ca_bundle
) -> None:
    # the operating system's trust store (truststore): on Linux, OpenSSL's default places,
    # of which SSL_CERT_DIR names the folder, as an IT department's installer fills it
    import subprocess

    store = tmp_path / "os-store"
    store.mkdir()
    digest = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", ca_bundle],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    shutil.copy(ca_bundle, store / f"{digest}.0")
    monkeypatch.delenv("PARCELSEARCH_CA_BUNDLE")
    monkeypatch.setenv("SSL_CERT_DIR", str(store))
    with ForwardProxy(hosts=_hosts(far)) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
        assert code == 0, err
        assert exact(ids, vendor_fabric[2]) and far.calls() == MINIMUM
    code, out, err = run(["doctor", "--dry-run"], capsys)
    assert "trust: the operating system's trust store (truststore)" in out


@pytest.mark.slow
def test_a_tunnel_the_proxy_drops_is_asked_again_and_one_that_always_drops_is_said(
    far, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch
) -> None:
    """A proxy that closes a CONNECT without answering (busy, restarting) is asked again; one
    that always does ends the run after a bounded number of tries, nothing having reached
    the vendor."""
    with ForwardProxy(hosts=_hosts(far), drop=2) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
        assert code == 0, err
        assert exact(ids, vendor_fabric[2]) and far.calls() == MINIMUM
        assert [status for _, status in proxy.connects].count(0) == 2
    far.log.clear()
    with ForwardProxy(hosts=_hosts(far), drop=-1) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        code, out, err, ids, meta = search(
            capsys, vendor_areas, tmp_path / "no.parquet", "--refresh", "all"
        )
        assert code != 0 and "Remote end closed connection" in err
        assert far.calls() == 0 and meta["complete"] is False
        assert 1 < len(proxy.connects) <= 8  # asked again, within a bounded allowance
