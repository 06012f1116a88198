"""The HTTP client: configuration, pacing, retries, response checks, error mapping.

Faults the reference service cannot produce on demand (dropped connections, truncated
bodies, stalls, 5xx) come from a tiny scripted HTTPS server on 127.0.0.1 below; the
behaviour against the real service is in ``tests/e2e/test_client_e2e.py``.
"""

from __future__ import annotations

import email.utils
import gzip
import json
import logging
import math
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
import trustme
from _spend_hooks import Reserving
from _threads import moments

from parcelsearch import _wire
from parcelsearch.client import (
    Cancelled,
    Client,
    RateLimiter,
    RetryPolicy,
    key_fingerprint,
)
from parcelsearch.errors import (
    AuthenticationError,
    BadPolygonError,
    BudgetExhaustedError,
    ConfigurationError,
    EndpointGoneError,
    InputError,
    MalformedResponseError,
    PageGoneError,
    ParcelSearchError,
    QuotaExhaustedError,
    RateLimitError,
    RequestTooLargeError,
    ServiceError,
    ServiceFailureError,
    TransportError,
)

KEY = "sk-test-Zq8v1TOPSECRET"
RING = _wire.ring_json([(-97.5, 32.25), (-97.4, 32.25), (-97.4, 32.3), (-97.5, 32.25)])
SPIKE = "Spike arrest violation. Allowed rate : 10ps"
QUOTA = "Rate limit quota violation. Quota limit exceeded. Identifier : analyst-1"


def ids(n: int, start: int = 0) -> list[str]:
    return [f"{k:017x}" for k in range(start, start + n)]


def ok(total: int, number: int = 1, **override: Any) -> dict[str, Any]:
    """A success body: page ``number`` of ``total`` rows, fields overridden as given."""
    data = ids(max(0, min(100, total - 100 * (number - 1))), start=100 * number)
    body = {
        "status": "OK",
        "rows": total,
        "dataRows": len(data),
        "pages": math.ceil(total / 100),
        "page": number,
        "data": data,
    }
    body.update(override)
    return body


def error(*messages: str) -> dict[str, Any]:
    return {"status": "ERROR", "messages": list(messages)}


# -- a scripted HTTPS server ---------------------------------------------------------------

Action = tuple[int, Any, dict[str, str]] | str | tuple[str, float]


class FaultServer:
    """HTTPS on 127.0.0.1 answering each GET with the next scripted action.

    Actions: ``(status, body, headers)``; ``"drop"`` (close without answering);
    ``"truncate"`` (promise 400 bytes, send 20, close); ``("stall", s)`` (wait, then 200);
    ``("trickle", s)`` (a 200 whose body comes 4 bytes every ``s`` seconds);
    ``("trickle-head", s)`` (its head so, too).
    """

    def __init__(self, directory: Path) -> None:
        ca = trustme.CA()
        self.ca_path = directory / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_path))
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        self.script: deque[Action] = deque()
        self.default: Action = (200, ok(0), {})
        self.lines: list[str] = []
        self.keys: list[str | None] = []
        self.times: list[float] = []
        self.trickle_cut = threading.Event()  # a client hung up on a trickled body
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                server.lines.append(self.requestline)
                server.keys.append(self.headers.get("x-api-key"))
                server.times.append(time.monotonic())
                action = server.script.popleft() if server.script else server.default
                if action == "drop":
                    self.close_connection = True
                    return
                if action == "truncate":
                    self.send_response(200)
                    self.send_header("Content-Length", "400")
                    self.end_headers()
                    self.wfile.write(b'{"status": "OK", "ro')
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if action[0] == "trickle-head":  # ("trickle-head", gap): the head, too
                    raw = json.dumps(ok(5)).encode()
                    head = (
                        f"HTTP/1.1 200 OK\r\nContent-Length: {len(raw)}\r\n"
                        + "".join(f"X-Pad-{k}: {'y' * 20}\r\n" for k in range(40))
                        + "\r\n"
                    ).encode()
                    try:
                        for start in range(0, len(head), 4):
                            self.wfile.write(head[start : start + 4])
                            self.wfile.flush()
                            time.sleep(float(action[1]))
                    except OSError:
                        server.trickle_cut.set()
                    self.close_connection = True
                    return
                if action[0] == "trickle":  # ("trickle", gap): a body 4 bytes a gap
                    raw = json.dumps(ok(5)).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    try:
                        for start in range(0, len(raw), 4):
                            self.wfile.write(raw[start : start + 4])
                            self.wfile.flush()
                            time.sleep(float(action[1]))
                    except OSError:
                        server.trickle_cut.set()
                    self.close_connection = True
                    return
                if isinstance(action[0], str):  # ("stall", seconds)
                    time.sleep(float(action[1]))
                    action = (200, ok(0), {})
                status, body, headers = action  # type: ignore[misc]
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # clients that hang up mid-answer are part of the script

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.base_url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> FaultServer:
        self.script.clear()
        self.default = (200, ok(0), {})
        for record in (self.lines, self.keys, self.times):
            record.clear()
        self.trickle_cut.clear()
        return self

    def then(self, *actions: Action) -> FaultServer:
        self.script.extend(actions)
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def _shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServer]:
    fault = FaultServer(tmp_path_factory.mktemp("fault"))
    yield fault
    fault.close()


@pytest.fixture
def server(_shared_server: FaultServer) -> FaultServer:
    return _shared_server.reset()


@pytest.fixture
def client(server: FaultServer) -> Iterator[Client]:
    with Client(
        KEY,
        server.base_url,
        server.ca_path,
        rate=1000,
        retries=RetryPolicy(total=3, backoff_factor=0.01),
        timeout=5,
    ) as made:
        yield made


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "API_KEY",
        "BASE_URL",
        "CA_BUNDLE",
        "RATE",
        "RESPONSE_DEADLINE",
        "GROUP_ID_MAX_CHARS",
    ):
        monkeypatch.delenv(f"PARCELSEARCH_{name}", raising=False)


def assert_no_key(exc: BaseException) -> None:
    text = f"{exc} {exc!r} {getattr(exc, 'url', '')} {getattr(exc, 'messages', '')}"
    assert KEY not in text
    cause = exc.__cause__ or exc.__context__
    if cause is not None and not exc.__suppress_context__:
        assert_no_key(cause)


# -- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        pytest.param({"base_url": "https://x"}, {}, "PARCELSEARCH_API_KEY", id="no-key"),
        pytest.param(
            {"api_key": "  ", "base_url": "https://x"}, {}, "PARCELSEARCH_API_KEY", id="blank-key"
        ),
        pytest.param({"api_key": KEY}, {}, "PARCELSEARCH_BASE_URL", id="no-base-url"),
        pytest.param(
            {"api_key": KEY, "base_url": "http://127.0.0.1:8080"},
            {},
            "HTTPS only",
            id="http-refused",
        ),
        pytest.param(
            {},
            {"PARCELSEARCH_API_KEY": KEY, "PARCELSEARCH_BASE_URL": "http://a"},
            "HTTPS only",
            id="http-refused-from-env",
        ),
        pytest.param({"api_key": KEY, "base_url": "ftp://x"}, {}, "https://host", id="ftp"),
        pytest.param(
            {"api_key": KEY, "base_url": "https://x/?a=1"}, {}, "query", id="query-in-base-url"
        ),
        pytest.param(
            {"api_key": "a key", "base_url": "https://x"}, {}, "whitespace", id="key-with-space"
        ),
        pytest.param(
            {"api_key": KEY, "base_url": "https://x", "ca_bundle": "/nope.pem"},
            {},
            "not a file",
            id="missing-ca",
        ),
        pytest.param(
            {"api_key": KEY, "base_url": "https://x"},
            {"PARCELSEARCH_RATE": "fast"},
            "PARCELSEARCH_RATE",
            id="rate-not-a-number",
        ),
        pytest.param(
            {"api_key": KEY, "base_url": "https://x", "rate": 0}, {}, "positive", id="rate-zero"
        ),
    ],
)
def test_configuration_errors_say_how_to_fix(
    kwargs: dict[str, Any], env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message) as caught:
        Client(**kwargs)
    assert_no_key(caught.value)


def test_defaults_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    trustme.CA().cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("PARCELSEARCH_API_KEY", KEY)
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", "https://api.example.com/prod/")
    monkeypatch.setenv("PARCELSEARCH_CA_BUNDLE", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("PARCELSEARCH_RATE", "4")
    made = Client()
    assert (made.base_url, made.ca_bundle, made.rate) == (
        "https://api.example.com/prod",
        str(tmp_path / "ca.pem"),
        4.0,
    )
    assert made.fingerprint == key_fingerprint(KEY)


def test_repr_shows_url_and_fingerprint_never_the_key() -> None:
    made = Client(KEY, "https://api.example.com")
    assert repr(made) == (
        f"Client(base_url='https://api.example.com', key=sha256:{made.fingerprint}…, rate=10/s)"
    )
    assert KEY not in repr(vars(made)) and KEY not in str(made)
    assert len(made.fingerprint) == 16


# -- pacing -------------------------------------------------------------------------------


def test_limiter_spaces_calls_from_all_threads() -> None:
    limiter = RateLimiter(40.0)
    released = moments(lambda _: limiter.wait(), threads=8, each=5)
    gaps = [b - a for a, b in zip(released, released[1:], strict=False)]
    assert len(released) == 40
    assert min(gaps) >= limiter.interval * 0.999  # never a burst
    assert limiter.interval == pytest.approx(1 / (40 * 0.97))


# -- retries ------------------------------------------------------------------------------


def test_5xx_is_retried_and_every_attempt_passes_the_hook(
    server: FaultServer, client: Client
) -> None:
    server.then(
        (500, error("busy"), {}), (502, b"<html>bad gateway</html>", {}), (200, ok(250, 2), {})
    )
    calls: list[int] = []
    page = client.search_page(RING, 2, spend=Reserving(lambda: calls.append(1)))
    assert (page.rows, page.pages, page.data_rows, page.from_cache) == (250, 3, 100, False)
    assert len(server.lines) == len(calls) == 3


@pytest.mark.parametrize(
    "retry_after",
    [
        pytest.param(lambda: "1", id="seconds"),
        pytest.param(lambda: email.utils.formatdate(time.time() + 2, usegmt=True), id="http-date"),
    ],
)
def test_spike_arrest_429_waits_for_retry_after(
    server: FaultServer, client: Client, retry_after: Callable[[], str]
) -> None:
    server.then((429, error(SPIKE), {"Retry-After": retry_after()}), (200, ok(5), {}))
    assert client.search_page(RING, 1).rows == 5
    assert len(server.lines) == 2
    assert server.times[1] - server.times[0] >= 0.9


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param(error(QUOTA), {"Retry-After": "1"}, id="plain"),
        pytest.param(
            gzip.compress(json.dumps(error(QUOTA)).encode()),
            {"Content-Encoding": "gzip"},
            id="gzipped",
        ),
    ],
)
def test_quota_429_is_not_retried(
    server: FaultServer, client: Client, body: Any, headers: dict[str, str]
) -> None:
    server.then((429, body, headers), (200, ok(5), {}))
    calls: list[int] = []
    with pytest.raises(QuotaExhaustedError, match="Quota limit exceeded") as caught:
        client.search_page(RING, 1, spend=Reserving(lambda: calls.append(1)))
    assert (caught.value.status, caught.value.messages) == (429, [QUOTA])
    assert len(server.lines) == len(calls) == 1
    assert_no_key(caught.value)


@pytest.mark.parametrize(
    ("status", "body", "cls", "messages"),
    [
        pytest.param(429, error(SPIKE), RateLimitError, [SPIKE], id="429-spike"),
        pytest.param(500, error("boom"), ServiceFailureError, ["boom"], id="500"),
    ],
)
def test_retryable_errors_that_persist_are_raised_verbatim(
    server: FaultServer,
    client: Client,
    status: int,
    body: Any,
    cls: type[ServiceError],
    messages: list[str],
) -> None:
    server.default = (status, body, {})
    calls: list[int] = []
    with pytest.raises(cls) as caught:
        client.search_page(RING, 1, spend=Reserving(lambda: calls.append(1)))
    assert (caught.value.status, caught.value.messages) == (status, messages)
    assert len(server.lines) == len(calls) == 4  # 1 + 3 retries
    assert_no_key(caught.value)


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        pytest.param(401, AuthenticationError, id="401"),
        pytest.param(400, BadPolygonError, id="400"),
        pytest.param(414, RequestTooLargeError, id="414"),
        pytest.param(404, ServiceError, id="404"),
        pytest.param(405, ServiceError, id="405"),
    ],
)
def test_client_errors_are_mapped_and_not_retried(
    server: FaultServer, client: Client, status: int, cls: type[ServiceError]
) -> None:
    message = f"Service said no ({status}). Verbatim: Invalid ApiKey"
    server.default = (status, error(message), {})
    with pytest.raises(cls, match=r"Service said no .*Verbatim: Invalid ApiKey") as caught:
        client.search_page(RING, 1)
    assert (caught.value.status, caught.value.messages) == (status, [message])
    assert len(server.lines) == 1
    assert_no_key(caught.value)


def test_dropped_connection_is_retried(server: FaultServer, client: Client) -> None:
    server.then("drop", (200, ok(3), {}))
    assert client.search_page(RING, 1).data_rows == 3
    assert len(server.lines) == 2


def test_read_timeout_is_retried(server: FaultServer) -> None:
    server.then(("stall", 1.5), (200, ok(3), {}))
    with Client(
        KEY,
        server.base_url,
        server.ca_path,
        rate=1000,
        timeout=0.5,
        retries=RetryPolicy(total=2, backoff_factor=0.01),
    ) as made:
        assert made.search_page(RING, 1).rows == 3
    assert len(server.lines) == 2


def test_connection_failures_become_transport_error(server: FaultServer, client: Client) -> None:
    server.default = "drop"
    calls: list[int] = []
    with pytest.raises(TransportError, match="gave up after") as caught:
        client.search_page(RING, 1, spend=Reserving(lambda: calls.append(1)))
    assert len(server.lines) == len(calls) == 4
    assert_no_key(caught.value)


def test_nothing_listening_is_a_transport_error(tmp_path: Path) -> None:
    server = FaultServer(tmp_path)
    server.close()
    with Client(
        KEY, server.base_url, server.ca_path, retries=RetryPolicy(total=1, backoff_factor=0.01)
    ) as made:
        with pytest.raises(TransportError) as caught:
            made.markets()
    assert_no_key(caught.value)


def test_untrusted_certificate_is_refused(server: FaultServer) -> None:
    with Client(KEY, server.base_url, retries=0) as made:
        with pytest.raises(TransportError, match="TLS verification"):
            made.search_page(RING, 1)
    assert server.lines == []  # the request never reached the server


def test_a_hook_that_raises_stops_before_the_retry(server: FaultServer, client: Client) -> None:
    server.then((503, error("busy"), {}), (200, ok(3), {}))
    calls: list[int] = []

    def budget_of_one() -> None:
        if calls:
            raise BudgetExhaustedError("budget of 1 calls reached", spent=1, budget=1)
        calls.append(1)

    with pytest.raises(BudgetExhaustedError):
        client.search_page(RING, 1, spend=Reserving(budget_of_one))
    assert len(server.lines) == 1


# -- response checks ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"maintenance, back soon", "not JSON", id="not-json"),
        pytest.param(b'{"status": "OK", "rows": 3', "not JSON", id="json-cut"),
        pytest.param(error("odd"), "not 'OK'", id="error-envelope-with-200"),
        pytest.param(ok(250, 2, dataRows=99), "dataRows is 99", id="data-rows-disagree"),
        pytest.param(ok(250, 2, pages=2), "ceil", id="pages-not-ceil"),
        pytest.param(ok(250, 3), "asked for page 2", id="echoed-page-differs"),
        pytest.param(ok(250, 2, data=ids(99), dataRows=99), "must hold 100", id="short-page"),
        pytest.param(
            ok(250, 2, data=["<a href=x>1</a>"] * 100),
            "id 1 of the page: holds markup",
            id="markup-group-id",
        ),
        pytest.param(
            ok(250, 2, data=[*ids(99), ""]), "id 100 of the page: empty", id="empty-group-id"
        ),
        pytest.param(ok(250, 2, data=[*ids(99), "a\x1b[2Jb"]), "control", id="control-group-id"),
        pytest.param(
            ok(250, 2, data=[*ids(99), "x" * 129]),
            "129 characters, more than 128",
            id="long-group-id",
        ),
        pytest.param(ok(250, 2, data=[*ids(99), 17]), "a int, not a string", id="number-id"),
        pytest.param(ok(250, 2, rows="250 rows"), "not a count", id="rows-not-a-number"),
        pytest.param(ok(250, 2, data=None), "not a list", id="data-missing"),
        pytest.param(
            {k: v for k, v in ok(250, 2).items() if k != "pages"}, "'pages'", id="pages-missing"
        ),
    ],
)
def test_responses_that_do_not_add_up_are_refused(
    server: FaultServer, client: Client, body: Any, message: str
) -> None:
    server.default = (200, body, {})
    with pytest.raises(MalformedResponseError, match=message) as caught:
        client.search_page(RING, 2)
    assert_no_key(caught.value)


def test_page_beyond_the_last_is_refused(server: FaultServer, client: Client) -> None:
    server.default = (200, ok(250, 4, pages=3, dataRows=0, data=[]), {})
    with pytest.raises(PageGoneError, match="past the last page of an answer of 250 rows"):
        client.search_page(RING, 4)


def test_empty_result_is_page_one_of_zero(server: FaultServer, client: Client) -> None:
    server.default = (
        200,
        {"status": "OK", "rows": 0, "dataRows": 0, "pages": 0, "page": 1, "data": []},
        {},
    )
    page = client.search_page(RING, 1)
    assert (page.rows, page.pages, page.data) == (0, 0, ())


def test_body_that_cannot_be_decoded_is_refused(server: FaultServer, client: Client) -> None:
    server.default = (200, b"definitely not gzip", {"Content-Encoding": "gzip"})
    with pytest.raises(MalformedResponseError, match="undecodable.*each attempt costs a call"):
        client.search_page(RING, 1)
    assert len(server.lines) == 4  # a transient fault: retried (retries=3), then a clear error


def test_body_cut_mid_transfer_is_refused(server: FaultServer, client: Client) -> None:
    server.default = "truncate"
    with pytest.raises(MalformedResponseError, match="cut short.*gave up after 4 attempts"):
        client.search_page(RING, 1)
    assert len(server.lines) == 4  # a transient fault: retried like a 5xx (retries=3)


# -- the wire -----------------------------------------------------------------------------


def test_request_line_is_byte_for_byte_what_the_planner_budgets(
    server: FaultServer, client: Client
) -> None:
    server.default = (200, ok(700, 7), {})
    client.search_page(RING, 7)
    target = _wire.search_target("/v1/search", RING, 7)
    assert server.lines == [f"GET {target} HTTP/1.1"]
    assert len(server.lines[0].encode()) == _wire.request_line_bytes(target)
    assert server.keys == [KEY]


def test_page_carries_its_request_key(server: FaultServer, client: Client) -> None:
    server.default = (200, ok(120, 2), {})
    page = client.search_page(RING, 2, path="/prod/v1/search")
    assert page.request_key == _wire.request_key(server.base_url, "/prod/v1/search", RING, 2)
    assert (page.base_url, page.path) == (server.base_url, "/prod/v1/search")


def test_key_never_reaches_the_logs(
    server: FaultServer, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    server.then((503, error("busy"), {}), (401, error("Invalid ApiKey"), {}))
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(AuthenticationError):
            client.search_page(RING, 1)
    assert caplog.records and KEY not in caplog.text


@pytest.mark.parametrize("page", [0, -1, True, 1.0])
def test_page_numbers_start_at_one(client: Client, page: Any) -> None:
    with pytest.raises(InputError, match="page must be"):
        client.search_page(RING, page)


# -- markets ------------------------------------------------------------------------------


def test_markets(server: FaultServer, client: Client) -> None:
    server.default = (
        200,
        {"status": "OK", "dataRows": 2, "data": ["Abilene, TX", "Boise, ID"]},
        {},
    )
    assert client.markets() == ["Abilene, TX", "Boise, ID"]
    assert server.lines == ["GET /v1/markets HTTP/1.1"]


def test_markets_that_do_not_add_up(server: FaultServer, client: Client) -> None:
    server.default = (200, {"status": "OK", "dataRows": 3, "data": ["Abilene, TX"]}, {})
    with pytest.raises(MalformedResponseError, match="dataRows is 3"):
        client.markets()


# -- an injected session ------------------------------------------------------------------


class _RefusingAdapter(requests.adapters.BaseAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        self.sent += 1
        raise requests.ConnectionError("connection reset by peer")

    def close(self) -> None:
        pass


def test_an_injected_session_is_used_and_still_gated() -> None:
    session = requests.Session()
    adapter = _RefusingAdapter()
    session.mount("https://", adapter)
    calls: list[int] = []
    with Client(
        KEY,
        "https://api.example.com",
        session=session,
        retries=RetryPolicy(total=2, backoff_factor=0.01),
    ) as made:
        with pytest.raises(TransportError, match="connection reset") as caught:
            made.search_page(RING, 1, spend=Reserving(lambda: calls.append(1)))
    assert adapter.sent == len(calls) == 3  # every attempt through the injected session, gated
    assert isinstance(caught.value, ParcelSearchError)


# -- what a real vendor sends (issue 37) -------------------------------------------------------


def test_an_answer_that_cannot_be_read_is_asked_once_more_then_final(
    server: FaultServer, client: Client
) -> None:
    server.default = (200, ok(250, 2, dataRows=99), {})
    with pytest.raises(MalformedResponseError, match="dataRows is 99.*after 2 attempts"):
        client.search_page(RING, 2)
    assert len(server.lines) == 2  # not retries + 1


def test_a_same_origin_redirect_is_followed_and_remembered(
    server: FaultServer, client: Client
) -> None:
    moved = server.base_url + "/v1/search/?" + _wire.search_target("", RING, 1).lstrip("?")
    server.then((301, b"", {"Location": moved}))
    server.default = (200, ok(30), {})
    assert client.search_page(RING, 1).rows == 30
    assert client.search_page(RING, 1).rows == 30
    paths = [line.split()[1].partition("?")[0] for line in server.lines]
    assert paths == ["/v1/search", "/v1/search/", "/v1/search/"]  # the next asks there at once
    assert server.keys == [KEY] * 3


@pytest.mark.parametrize("location", ["https://example.invalid/v1/search", "http://127.0.0.1:9/x"])
def test_other_redirects_are_refused_naming_where(
    server: FaultServer, client: Client, location: str
) -> None:
    server.default = (302, b"", {"Location": location})
    with pytest.raises(ServiceError, match=f"redirects .* to {location}") as caught:
        client.search_page(RING, 1)
    assert caught.value.status == 302 and len(server.lines) == 1
    assert_no_key(caught.value)


def test_a_password_in_a_redirect_s_location_is_not_echoed(
    server: FaultServer, client: Client
) -> None:
    """Issue 46, point 10: ``user:password@`` in a Location (the same host and port: another
    origin all the same) was echoed in the refusal."""
    location = server.base_url.replace("//", "//mallory:hunter2-Sekret@") + "/v1/search/"
    server.default = (302, b"", {"Location": location})
    with pytest.raises(ServiceError, match=r"redirects .* to https://\*\*\*@127") as caught:
        client.search_page(RING, 1)
    assert "hunter2" not in f"{caught.value} {caught.value!r} {caught.value.url}"
    assert len(server.lines) == 1 and client.facts.moved == {}


def test_a_learnt_path_that_fails_is_named_in_the_message(
    server: FaultServer, tmp_path: Path
) -> None:
    """Issue 46, point 7: the message named ``/v1/search`` while the request went to the
    learnt path."""
    moved = {server.base_url + "/v1/search": server.base_url + "/v1/search/"}
    (tmp_path / "vendors.json").write_text(json.dumps({server.base_url: {"moved": moved}}))
    server.default = (400, {"status": "ERROR", "message": "bad polygon"}, {})
    with Client(KEY, server.base_url, server.ca_path, cache_dir=tmp_path, retries=0) as made:
        with pytest.raises(ParcelSearchError, match="GET /v1/search/ page 1"):
            made.search_page(RING, 1)
    assert [line.split()[1].partition("?")[0] for line in server.lines] == ["/v1/search/"]


def test_a_probe_forgets_a_learnt_path_that_answers_404(
    server: FaultServer, tmp_path: Path
) -> None:
    """``doctor``'s probes too: a learnt path the vendor removed is forgotten, in the vendor
    profile as well, and the default asked at once."""
    moved = {server.base_url + "/v1/markets": server.base_url + "/v1/markets/"}
    (tmp_path / "vendors.json").write_text(json.dumps({server.base_url: {"moved": moved}}))
    server.then((404, {"status": "ERROR", "message": "no such resource"}, {}))
    server.default = (200, {"status": "OK", "data": ["Abilene, TX"]}, {})
    with Client(KEY, server.base_url, server.ca_path, cache_dir=tmp_path, retries=0) as made:
        assert made.probe("/v1/markets").status == 200
    assert [line.split()[1] for line in server.lines] == ["/v1/markets/", "/v1/markets"]
    saved = json.loads((tmp_path / "vendors.json").read_text())
    assert saved[server.base_url]["moved"] == {}
    # a request another thread sent to the learnt path before it was forgotten: the default
    from parcelsearch._fetch.answers import Refusal

    late = made.facts.unlearn(
        404, Refusal((), None, "other", "envelope"), server.base_url + "/v1/markets/?x=1"
    )
    assert late is not None and late.url == server.base_url + "/v1/markets?x=1"


@pytest.mark.parametrize(
    "status, body, error, words",
    [
        (
            429,
            {
                "fault": {
                    "faultstring": "Rate limit quota violation. Quota limit  exceeded.",
                    "detail": {"errorcode": "policies.ratelimit.QuotaViolation"},
                }
            },
            QuotaExhaustedError,
            "HTTP 429: Rate limit quota violation",
        ),
        (
            403,
            {
                "fault": {
                    "faultstring": "Quota limit exceeded",
                    "detail": {"errorcode": "policies.ratelimit.QuotaViolation"},
                }
            },
            QuotaExhaustedError,
            "HTTP 403: Quota limit exceeded",
        ),
        (
            401,
            {
                "fault": {
                    "faultstring": "Invalid ApiKey",
                    "detail": {"errorcode": "oauth.v2.InvalidApiKey"},
                }
            },
            AuthenticationError,
            "HTTP 401: Invalid ApiKey (GET",
        ),
    ],
    ids=["quota-429", "quota-403", "invalid-key"],
)
def test_gateway_faults_are_final_in_the_vendor_s_words(
    server: FaultServer, client: Client, status, body, error, words
) -> None:
    server.default = (status, body, {})
    with pytest.raises(error) as caught:
        client.search_page(RING, 1)
    assert str(caught.value).startswith(words) and len(server.lines) == 1
    assert "b'" not in str(caught.value) and "{" not in str(caught.value)


# -- the vendor's facts learnt, not assumed (issue 47) -------------------------------------------


@pytest.mark.parametrize(
    "group_ids",
    [
        ["ABCDEF0123456789A", "PCL-00012", "группа 7", "x" * 128],
    ],
    ids=["upper-dashes-unicode-long"],
)
def test_group_ids_are_opaque_strings(
    server: FaultServer, client: Client, group_ids: list[str]
) -> None:
    server.default = (200, ok(4, data=group_ids), {})
    assert client.search_page(RING, 1).data == tuple(group_ids)


MAINTENANCE = (
    b"<!DOCTYPE html><html><head><title>Down for maintenance</title></head>"
    b"<body><h1>Back soon</h1></body></html>"
)


def test_a_maintenance_page_is_probed_once_the_vendor_answered_before(
    server: FaultServer, client: Client
) -> None:
    server.then(
        (200, ok(5), {}),
        (200, MAINTENANCE, {}),
        (200, MAINTENANCE, {}),
        (200, MAINTENANCE, {}),
        (200, ok(5), {}),
    )
    assert client.search_page(RING, 1).rows == 5
    assert client.search_page(RING, 1).rows == 5  # down, then 2 probes fail, the third not
    assert len(server.lines) == 5
    assert client.stats["retried HTML page"] == 3


@pytest.mark.parametrize(
    "status, body", [(200, MAINTENANCE), (503, error("down")), (504, b"gateway timeout")]
)
def test_an_outage_met_first_costs_at_most_two_calls(
    server: FaultServer, client: Client, status: int, body: bytes
) -> None:
    server.default = (status, body, {})
    calls: list[int] = []
    with pytest.raises(ServiceFailureError) as caught:
        client.search_page(RING, 1, spend=Reserving(lambda: calls.append(1)))
    text = str(caught.value)
    assert "the outage cost 2 calls" in text and "1 of them a probe" in text
    assert "gave up after 2 attempts" in text and "<" not in text
    assert len(server.lines) == len(calls) == 2 and caught.value.status == status
    assert_no_key(caught.value)
    if status == 200:
        assert "an HTML page titled 'Down for maintenance' where JSON is due" in text


def test_an_outage_mid_run_is_probed_at_most_three_times(
    server: FaultServer, client: Client
) -> None:
    server.then((200, ok(5), {}))
    assert client.search_page(RING, 1).rows == 5
    server.default = (503, error("down for maintenance"), {})
    started = time.monotonic()
    with pytest.raises(ServiceFailureError) as caught:
        client.search_page(RING, 1)
    assert "the outage cost 4 calls" in str(caught.value)
    assert "3 of them probes, one at a time, over " in str(caught.value)
    assert len(server.lines) == 1 + 4
    assert time.monotonic() - started >= 0.04 + 0.08 + 0.16  # backed off: 4 × factor × 2ⁿ


def test_a_gone_endpoint_is_final_quoting_the_vendor_and_its_sunset(
    server: FaultServer, client: Client
) -> None:
    sunset = "Sat, 31 Oct 2026 23:59:59 GMT"
    server.default = (410, error("v1 is retired; use /v2/search"), {"Sunset": sunset})
    with pytest.raises(EndpointGoneError) as caught:
        client.search_page(RING, 1)
    text = str(caught.value)
    assert text.startswith(
        "HTTP 410 Gone: the vendor has retired GET /v1/search "
        f"(Sunset: {sunset}): v1 is retired; use /v2/search."
    )
    assert "Client(base_url='https://...')" in text
    assert caught.value.sunset == sunset and len(server.lines) == 1
    assert_no_key(caught.value)


def test_a_trickled_body_is_abandoned_at_the_response_deadline(server: FaultServer) -> None:
    server.then(("trickle", 0.3), (200, ok(5), {}))
    with Client(
        KEY,
        server.base_url,
        server.ca_path,
        rate=1000,
        timeout=5,
        retries=RetryPolicy(total=3, backoff_factor=0.01),
        response_deadline=1,
    ) as made:
        assert made.search_page(RING, 1).rows == 5
        assert made.stats["retried deadline"] == 1
    assert len(server.lines) == 2
    assert server.trickle_cut.wait(10)  # the server saw the client hang up mid-body


def test_a_trickled_head_is_abandoned_at_the_response_deadline(server: FaultServer) -> None:
    server.then(("trickle-head", 0.3), (200, ok(5), {}))
    with Client(
        KEY,
        server.base_url,
        server.ca_path,
        rate=1000,
        timeout=5,
        retries=RetryPolicy(total=3, backoff_factor=0.01),
        response_deadline=1,
    ) as made:
        assert made.search_page(RING, 1).rows == 5
        assert made.stats["retried deadline"] == 1
    assert len(server.lines) == 2
    assert server.trickle_cut.wait(10)  # hung up before the head was whole


def test_a_response_that_trickles_every_time_names_the_deadline(server: FaultServer) -> None:
    server.default = ("trickle", 0.3)
    with Client(
        KEY,
        server.base_url,
        server.ca_path,
        rate=1000,
        timeout=5,
        retries=RetryPolicy(total=1, backoff_factor=0.01),
        response_deadline=0.5,
    ) as made:
        with pytest.raises(TransportError) as caught:
            made.search_page(RING, 1)
    text = caught.value.render("cli")
    assert "no whole response within the 0.5 s response deadline" in text
    assert "--response-deadline" in text and "PARCELSEARCH_RESPONSE_DEADLINE" in text
    assert len(server.lines) == 2


@pytest.mark.parametrize(
    ("value", "env"),
    [
        (0, {}),
        (None, {"PARCELSEARCH_RESPONSE_DEADLINE": "slow"}),
    ],
    ids=["zero", "env-not-a-number"],
)
def test_a_response_deadline_that_is_not_positive_is_refused(
    monkeypatch: pytest.MonkeyPatch, value: Any, env: dict[str, str]
) -> None:
    for name, text in env.items():
        monkeypatch.setenv(name, text)
    with pytest.raises(ConfigurationError, match="response deadline must be a positive") as caught:
        Client(KEY, "https://x", response_deadline=value)
    assert "PARCELSEARCH_RESPONSE_DEADLINE" in str(caught.value)


def test_the_response_deadline_defaults_to_60_s_and_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Client(KEY, "https://x").response_deadline == 60.0
    monkeypatch.setenv("PARCELSEARCH_RESPONSE_DEADLINE", "7.5")
    made = Client(KEY, "https://x")
    assert made.response_deadline == made.transport.deadline == 7.5


def test_a_retry_after_longer_than_a_run_waits_is_final(
    server: FaultServer, client: Client
) -> None:
    server.then((429, error(SPIKE), {"Retry-After": "600"}), (200, ok(5), {}))
    with pytest.raises(RateLimitError) as caught:
        client.search_page(RING, 1)
    text = str(caught.value)
    assert "the vendor asks this key to wait 600 s (Retry-After), until" in text
    assert "no request was sent before that time" in text
    assert "still rate-limited after the retries" not in text
    assert len(server.lines) == 1
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    with pytest.raises(Cancelled):  # the key is paused for every caller, not only this one
        client.search_page(RING, 1, cancel=stop)
    assert len(server.lines) == 1


def test_a_vendor_with_longer_ids_is_read_with_the_option(
    server: FaultServer, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.default = (200, ok(1, data=["G" * 200]), {})
    with pytest.raises(MalformedResponseError, match="200 characters, more than 128"):
        client.search_page(RING, 1)
    monkeypatch.setenv("PARCELSEARCH_GROUP_ID_MAX_CHARS", "256")
    assert client.search_page(RING, 1).data == ("G" * 200,)


def test_a_longest_id_that_is_not_a_whole_number_is_refused_before_any_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PARCELSEARCH_GROUP_ID_MAX_CHARS", "many")
    with pytest.raises(
        ConfigurationError, match="the longest GroupID must be a whole number"
    ) as caught:
        Client(KEY, "https://x")
    assert "PARCELSEARCH_GROUP_ID_MAX_CHARS" in str(caught.value)


def test_doctor_s_probe_retries_a_maintenance_page_too(server: FaultServer, client: Client) -> None:
    server.then((200, MAINTENANCE, {}), (200, {"status": "OK", "data": []}, {}))
    probe = client.probe("/v1/markets")
    assert probe.status == 200 and probe.payload is not None and probe.refusal is None
    assert len(server.lines) == 2
