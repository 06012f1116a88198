"""A local certificate authority and a server certificate for the reference service.

``ensure_certificates(DIR)`` writes, once:

- ``DIR/ca.pem`` — the CA certificate clients verify against (``verify=DIR/ca.pem``);
- ``DIR/ca-key.pem`` — the CA's private key (mode 0600), kept to re-issue the server cert;
- ``DIR/server.pem`` / ``DIR/server-key.pem`` — the server certificate for ``localhost``,
  ``127.0.0.1`` and ``::1`` (plus any other host asked for) and its key (0600).

Existing files are reused when the server certificate still covers the host names and is
valid for at least another day; otherwise a new server certificate is issued from the
same CA, so clients that trust ``ca.pem`` keep working.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509

from parcelsearch import settings

__all__ = ["Certificates", "ensure_certificates", "DEFAULT_HOSTS", "default_cert_dir"]

DEFAULT_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")


def default_cert_dir() -> Path:
    """The default certificate directory, in the per-user service directory."""
    return Path(settings.options.service_dir) / "certs"


@dataclass(frozen=True)
class Certificates:
    """Paths of the CA certificate and the server's certificate and key."""

    ca: Path
    cert: Path
    key: Path


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)


def _covers(cert_path: Path, hosts: Iterable[str]) -> bool:
    """Whether the certificate at ``cert_path`` names every host and has a day left."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    dns = set(names.get_values_for_type(x509.DNSName))
    ips = set(names.get_values_for_type(x509.IPAddress))
    for host in hosts:
        try:
            if ipaddress.ip_address(host) not in ips:
                return False
        except ValueError:
            if host not in dns:
                return False
    return cert.not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=1)


def ensure_certificates(cert_dir: str | Path, hosts: Iterable[str] = ()) -> Certificates:
    """Create (or reuse) the CA and a server certificate for ``hosts`` in ``cert_dir``.

    Parameters
    ----------
    cert_dir
        Directory for the PEM files; created if missing.
    hosts
        Extra host names or IP addresses the server certificate must cover (the
        defaults ``localhost``, ``127.0.0.1`` and ``::1`` are always included).
    """
    directory = Path(cert_dir)
    directory.mkdir(parents=True, exist_ok=True)
    extra = [h for h in hosts if h not in ("", "0.0.0.0", "::")]
    wanted = list(dict.fromkeys([*DEFAULT_HOSTS, *extra]))
    paths = Certificates(
        directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"
    )
    ca_key = directory / "ca-key.pem"
    if paths.ca.exists() and ca_key.exists():
        ca = trustme.CA.from_pem(paths.ca.read_bytes(), ca_key.read_bytes())
    else:
        ca = trustme.CA(organization_name="parcelsearch reference service")
        _write_private(ca_key, ca.private_key_pem.bytes())
        paths.ca.write_bytes(ca.cert_pem.bytes())
    if not (paths.cert.exists() and paths.key.exists() and _covers(paths.cert, wanted)):
        leaf = ca.issue_cert(*wanted, common_name="localhost")
        _write_private(paths.key, leaf.private_key_pem.bytes())
        paths.cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    return paths
