"""Local CA and server certificate: created once, reused, re-issued for new hosts."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

from cryptography import x509

from parcelsearch_service.tls import ensure_certificates


def _names(path: Path) -> set[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(v) for v in san.get_values_for_type(x509.DNSName)} | {
        str(v) for v in san.get_values_for_type(x509.IPAddress)
    }


def test_creates_ca_and_server_certificate(tmp_path: Path) -> None:
    certs = ensure_certificates(tmp_path / "certs")
    assert certs.ca == tmp_path / "certs" / "ca.pem"
    assert {"localhost", "127.0.0.1", "::1"} <= _names(certs.cert)
    assert stat.S_IMODE(certs.key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "certs" / "ca-key.pem").stat().st_mode) == 0o600
    context = ssl.create_default_context(cafile=str(certs.ca))
    context.load_cert_chain(certs.cert, certs.key)  # the pair matches


def test_reused_when_present(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path)
    before = (first.ca.read_bytes(), first.cert.read_bytes())
    second = ensure_certificates(tmp_path)
    assert (second.ca.read_bytes(), second.cert.read_bytes()) == before


def test_new_host_gets_a_new_leaf_from_the_same_ca(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path)
    ca = first.ca.read_bytes()
    cert = first.cert.read_bytes()
    again = ensure_certificates(tmp_path, ["10.1.2.3"])
    assert again.ca.read_bytes() == ca and again.cert.read_bytes() != cert
    assert "10.1.2.3" in _names(again.cert)
