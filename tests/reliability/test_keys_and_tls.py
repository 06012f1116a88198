"""Keys: only hashes at rest, no plaintext comparison, revocation takes effect at once.
TLS: plain HTTP fails, the client verifies certificates and refuses ``http://``.
"""

from __future__ import annotations

import ast
import inspect
import socket
import sqlite3
import ssl
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
import requests
import trustme
from _helpers import store_bytes

from parcelsearch import Client
from parcelsearch.errors import AuthenticationError, ConfigurationError, TransportError
from parcelsearch_service import gateway
from parcelsearch_service import limits as limits_module
from parcelsearch_service.keys import KeyStore, hash_key
from parcelsearch_service.keys import schema as key_schema
from parcelsearch_service.limits import INVALID_KEY
from parcelsearch_service.postgres_admission import PostgresAdmission, postgres_parameters
from parcelsearch_service.sqlite_admission import SqliteAdmission

RING = "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]"


def test_only_hashes_at_rest(
    service: Any, make_key: Any, https: requests.Session, figures: Any
) -> None:
    keys = [make_key("production", quota=100) for _ in range(5)]
    for key in keys:  # used, so counters and the request log are written too
        assert (
            https.get(
                service.base_url + "/v1/markets", headers={"x-api-key": key}, timeout=10
            ).status_code
            == 200
        )
    raw = store_bytes(service.keys.path)
    for key in keys:
        assert key.encode() not in raw
        assert key[:12].encode() not in raw  # nor a recognisable piece of it
        assert hash_key(key).encode() in raw  # the hash is what is kept
    db = sqlite3.connect(f"file:{service.keys.path}?mode=ro", uri=True)
    try:
        texts = [str(v) for row in db.execute("SELECT * FROM keys") for v in row]
    finally:
        db.close()
    assert not any(key in text for key in keys for text in texts)
    figures.add("inputs tried", "keys scanned for at rest", len(keys))


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _key_uses(node: ast.AST) -> set[str]:
    """The plaintext key (``api_key``, or a call's ``call.api_key``) in ``node``, not
    looking into calls inside it (each call is checked on its own)."""
    if isinstance(node, ast.Name) and node.id == "api_key":
        return {node.id}
    if isinstance(node, ast.Attribute) and node.attr == "api_key":
        return {ast.unparse(node)}
    return set().union(
        *(
            _key_uses(child)
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, ast.Call)
        )
    )


@pytest.mark.parametrize(
    ("function", "carriers"),
    [
        (gateway.admit, {"hash_key", "Call"}),
        (SqliteAdmission.decide, {"hash_key"}),
        (SqliteAdmission._admit, {"hash_key"}),
        (PostgresAdmission.decide, {"hash_key"}),
        (postgres_parameters, {"hash_key"}),
    ],
    ids=[
        "gateway.admit",
        "SqliteAdmission.decide",
        "SqliteAdmission._admit",
        "PostgresAdmission.decide",
        "postgres_parameters",
    ],
)
def test_key_comparison_does_not_leak_timing(function: Any, carriers: set[str]) -> None:
    """Structural: the plaintext key is only ever hashed (or carried, unread, in a
    ``Call``). It is never compared with ``==``, ``in`` or the like, never sent to SQL; the
    lookup is by hash."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            assert not _key_uses(node), ast.unparse(node)
        if isinstance(node, ast.Call):
            used = set().union(
                *(
                    _key_uses(arg)
                    for arg in [*node.args, *(k.value for k in node.keywords)]
                    if not isinstance(arg, ast.Call)
                )
            )
            callee = ast.unparse(node.func)
            if used:
                assert callee in carriers, f"the key reaches {callee}(): {ast.unparse(node)}"
    assert "api_key" not in repr(limits_module.Call("secret", "search", "/", lambda: None))
    # Both admissions look the key up by its hash: SQLite's statements and PostgreSQL's
    # function (the digest is the only form of the key that reaches either).
    assert "key_hash = ?" in inspect.getsource(SqliteAdmission._one_by_one)
    assert "WHERE key_hash = p_hash" in "".join(key_schema.POSTGRES_SCHEMA)


def test_sql_never_sees_the_plaintext_key(
    service: Any, make_key: Any, https: requests.Session
) -> None:
    """Every statement the service runs while admitting a request, with bound values
    expanded, holds the key's hash and never the key."""
    key = make_key("production", quota=100)
    statements: list[str] = []
    traced: list[sqlite3.Connection] = []
    original = KeyStore.connection

    def tracing(self: KeyStore) -> sqlite3.Connection:
        conn = original(self)
        if conn not in traced:
            conn.set_trace_callback(statements.append)
            traced.append(conn)
        return conn

    KeyStore.connection = tracing  # type: ignore[method-assign]
    try:
        assert (
            https.get(
                service.base_url + "/v1/search",
                params={"searchPolygon": RING},
                headers={"x-api-key": key},
                timeout=10,
            ).status_code
            == 200
        )
        assert (
            https.get(
                service.base_url + "/v1/search",
                params={"searchPolygon": RING},
                headers={"x-api-key": key + "x"},
                timeout=10,
            ).status_code
            == 401
        )
    finally:
        KeyStore.connection = original  # type: ignore[method-assign]
        for conn in traced:
            conn.set_trace_callback(None)
    assert any(hash_key(key) in s for s in statements), statements[:5]
    assert not any(key in s for s in statements)


def _hammer_until_refused(
    url: str, key: str, ca: str, revoked_at: list[float], results: list[tuple[float, int]]
) -> None:
    with requests.Session() as session:
        session.verify = ca
        session.trust_env = False
        for _ in range(2000):
            response = session.get(url, headers={"x-api-key": key}, timeout=10)
            results.append((time.monotonic(), response.status_code))
            if response.status_code == 401:
                return


@pytest.mark.slow
@pytest.mark.parametrize("how", ["KeyStore.revoke", "cli"])
def test_revoked_key_stops_working_at_once(
    how: str, service: Any, make_key: Any, ca_bundle: str, figures: Any
) -> None:
    key = make_key("production", per_second=100_000, quota=1_000_000)
    results: list[tuple[float, int]] = []
    revoked_at: list[float] = []
    worker = threading.Thread(
        target=_hammer_until_refused,
        args=(service.base_url + "/v1/markets", key, ca_bundle, revoked_at, results),
    )
    worker.start()
    time.sleep(0.3)
    started = time.monotonic()
    if how == "cli":
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "parcelsearch.cli",
                "keys",
                "revoke",
                "--keys",
                str(service.keys.path),
                "--name",
                key.name,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    else:
        service.keys.revoke(key.name)
    revoked = time.monotonic()
    worker.join(30)
    assert not worker.is_alive()
    before = [status for t, status in results if t < started]
    assert before and set(before) == {200}  # it worked until then
    # once revoked, refused: of the requests answered after the revocation returned, at most
    # the one in flight at that moment succeeded; the hammering stopped at the first 401.
    after = [status for t, status in results if t >= revoked]
    assert results[-1][1] == 401 and after.count(200) <= 1
    response = requests.get(
        service.base_url + "/v1/markets", headers={"x-api-key": key}, verify=ca_bundle, timeout=10
    )
    assert response.status_code == 401 and response.json()["messages"] == [INVALID_KEY]
    figures.add("calls counted", f"revocation ({how}): requests while revoking", len(results))


# -- TLS --------------------------------------------------------------------------------


def test_plain_http_to_the_https_port_fails(service: Any, make_key: Any) -> None:
    key = make_key("production", quota=100)
    url = f"http://127.0.0.1:{service.port}/v1/markets"
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(url, headers={"x-api-key": key}, timeout=10)
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        sock.sendall(f"GET /v1/markets HTTP/1.1\r\nHost: x\r\nx-api-key: {key}\r\n\r\n".encode())
        try:
            answer = sock.recv(4096)
        except ConnectionResetError:
            answer = b""
    assert not answer.startswith(b"HTTP/1.1 200")
    assert len(service.keys.requests(key.name)) == 0  # nothing was admitted


def _client(service: Any, key: str, ca: str | None, tmp_path: Path, **kwargs: Any) -> Client:
    return Client(
        api_key=key,
        base_url=kwargs.pop("base_url", service.base_url),
        ca_bundle=ca,
        rate=50,
        retries=1,
        cache_dir=tmp_path / "cache",
        **kwargs,
    )


@pytest.fixture
def other_ca(tmp_path: Path) -> str:
    path = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(path))
    return str(path)


def test_client_verifies_the_certificate(
    service: Any,
    make_key: Any,
    tmp_path: Path,
    other_ca: str,
    ca_bundle: str,
    monkeypatch: pytest.MonkeyPatch,
    figures: Any,
) -> None:
    key = make_key("production", quota=100)
    with pytest.raises(TransportError, match="TLS verification") as info:
        _client(service, key, other_ca, tmp_path).markets()
    assert key not in str(info.value)
    # no bundle at all: the system store does not know the local CA either
    monkeypatch.delenv("PARCELSEARCH_CA_BUNDLE", raising=False)
    with pytest.raises(TransportError, match="TLS verification"):
        _client(service, key, None, tmp_path).markets()
    # the right CA but the wrong name: 'localhost.localdomain' is not on the certificate
    monkeypatch.setattr(socket, "getaddrinfo", _resolve_everything_to_loopback(socket.getaddrinfo))
    with pytest.raises(TransportError, match="TLS verification"):
        _client(
            service,
            key,
            ca_bundle,
            tmp_path,
            base_url=f"https://not-this-host.invalid:{service.port}",
        ).markets()
    assert len(service.keys.requests(key.name)) == 0  # the key never reached the service
    assert _client(service, key, ca_bundle, tmp_path).markets()  # and the right CA works
    figures.add("faults injected", "TLS: wrong CA / no CA / wrong host name", 3)


def _resolve_everything_to_loopback(real: Any) -> Any:
    def fake(host: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == "not-this-host.invalid" else host, *args, **kwargs)

    return fake


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8443",
        "HTTP://127.0.0.1:8443",
        "  http://127.0.0.1:8443  ",
        "ftp://127.0.0.1",
        "127.0.0.1:8443",
        "https://user:pw@127.0.0.1:8443",
    ],
)
def test_client_refuses_anything_but_https(
    url: str, monkeypatch: pytest.MonkeyPatch, figures: Any
) -> None:
    with pytest.raises(ConfigurationError, match="https"):
        Client(api_key="k" * 40, base_url=url)
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", url)
    with pytest.raises(ConfigurationError, match="https"):
        Client(api_key="k" * 40)
    figures.add("inputs tried", "non-HTTPS base URLs")


def test_tls_only_modern_protocols(service: Any, ca_bundle: str) -> None:
    """The server does not speak TLS 1.0/1.1."""
    context = ssl.create_default_context(cafile=ca_bundle)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            context.wrap_socket(sock, server_hostname="127.0.0.1")


def test_wrong_key_is_refused_with_the_vendor_message(
    service: Any, ca_bundle: str, tmp_path: Path
) -> None:
    client = Client(
        api_key="not-a-key",
        base_url=service.base_url,
        ca_bundle=ca_bundle,
        rate=50,
        cache_dir=tmp_path,
    )
    with pytest.raises(AuthenticationError, match=INVALID_KEY):
        client.markets()
