"""The developer portal over real HTTPS (uvicorn on 127.0.0.1), as a browser without scripts
sees it: sign-in, sessions, CSRF, the Apps section, one page per app, the new key and its
snippets, the Account and All apps pages, Getting started, and that its counts are the
gateway's own (witness: the request log)."""

from __future__ import annotations

import html
import logging
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import markupsafe
import pytest
import requests

from parcelsearch_service.keys import KeyStore
from parcelsearch_service.portal.routes import COOKIE
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.server import RunningService, start_service

PASSWORD = "correct horse battery staple"
#: A small ring inside the bundled demo parcels (as tests/e2e/test_service_errors.py uses).
SQUARE = "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]"


class PortalClient:
    """A browser-like client: cookies, the CSRF token of the last page, HTML parsing."""

    def __init__(self, svc: RunningService) -> None:
        self.base = svc.base_url
        self.ca = str(svc.ca_path)
        self.http = requests.Session()
        self.http.trust_env = False
        self.http.verify = self.ca
        self.csrf = ""
        self.last: requests.Response | None = None

    def _seen(self, response: requests.Response) -> requests.Response:
        found = re.search(r'name="csrf_token" value="([^"]+)"', response.text)
        if found:
            self.csrf = found.group(1)
        self.last = response
        return response

    def get(self, path: str = "/portal/", **kw: Any) -> requests.Response:
        return self._seen(self.http.get(self.base + path, **kw))

    def post(
        self, path: str, data: dict[str, Any] | None = None, csrf: bool = True, **kw: Any
    ) -> requests.Response:
        body = dict(data or {})
        if csrf:
            body.setdefault("csrf_token", self.csrf)
        return self._seen(self.http.post(self.base + path, data=body, **kw))

    def sign_in(self, email: str, password: str = PASSWORD) -> requests.Response:
        self.get("/portal/signin")
        return self.post("/portal/signin", {"email": email, "password": password})

    def create(
        self,
        name: str,
        key_type: str = "production",
        services: tuple[str, ...] = ("search", "markets"),
    ) -> str:
        page = self.post(
            "/portal/apps", {"name": name, "key_type": key_type, "services": list(services)}
        )
        assert page.status_code == 200, page.text
        return new_key(page.text)

    def app_id(self, name: str) -> int:
        page = self.get()
        shown = str(markupsafe.escape(name))
        found = re.search(rf'data-app="{re.escape(shown)}" data-app-id="(\d+)"', page.text)
        assert found, f"{name} not on the page"
        return int(found.group(1))

    def cell(self, name: str, usage: str) -> str:
        """A figure of app ``name`` from its own page (``data-usage="…"``)."""
        page = self.get(f"/portal/apps/{self.app_id(name)}").text
        found = re.search(rf'data-usage="{usage}">([^<]*)<', page)
        assert found, f"no {usage} on the page of {name}"
        return found.group(1)


def new_key(page: str) -> str:
    found = re.search(r'<code id="new-key">([^<]+)</code>', page)
    assert found, "no #new-key on the page"
    return found.group(1)


def call(svc: RunningService, key: str, path: str = "/v1/markets") -> requests.Response:
    params = {"searchPolygon": SQUARE} if "search" in path else None
    return requests.get(
        svc.base_url + path,
        headers={"x-api-key": key},
        params=params,
        verify=str(svc.ca_path),
        timeout=30,
    )


@pytest.fixture(scope="module")
def portal(
    tmp_path_factory: pytest.TempPathFactory, service_cert_dir: Path
) -> Iterator[RunningService]:
    """One portal-enabled service (SQLite) with users alice, bob and admin."""
    root = tmp_path_factory.mktemp("portal")
    with start_service(keys=root / "keys.sqlite", cert_dir=service_cert_dir, portal=True) as svc:
        users = PortalStore(svc.keys)
        for email, admin in [
            ("alice@example.com", False),
            ("bob@example.com", False),
            ("admin@example.com", True),
        ]:
            users.add_user(email, PASSWORD, admin=admin)
        yield svc


@pytest.fixture
def client(portal: RunningService) -> Callable[[str], PortalClient]:
    def signed_in(email: str) -> PortalClient:
        c = PortalClient(portal)
        assert c.sign_in(email).status_code == 200
        return c

    return signed_in


# ---------------------------------------------------------------- sign-in and sessions


def test_signin_cookie_is_secure_httponly_strict_and_rotated(portal: RunningService) -> None:
    c = PortalClient(portal)
    first = c.get("/portal/signin")
    before = c.http.cookies[COOKIE]
    assert re.search(r"Secure", first.headers["set-cookie"])
    signed = c.post(
        "/portal/signin",
        {"email": "alice@example.com", "password": PASSWORD},
        allow_redirects=False,
    )
    assert signed.status_code == 303
    header = signed.headers["set-cookie"]
    for attribute in ("Secure", "HttpOnly", "SameSite=strict", "Path=/"):
        assert attribute in header
    after = c.http.cookies[COOKIE]
    assert after != before
    # The pre-sign-in session is over: its cookie gets the sign-in form, not the apps.
    old = requests.get(
        portal.base_url + "/portal/",
        cookies={COOKIE: before},
        verify=str(portal.ca_path),
        allow_redirects=False,
    )
    assert old.status_code == 303 and old.headers["location"].endswith("/portal/signin")
    assert "alice@example.com" in c.get().text


def test_sign_out_ends_the_session(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    c = client("alice@example.com")
    cookie = c.http.cookies[COOKIE]
    assert c.post("/portal/signout").url.endswith("/portal/signin")
    again = requests.get(
        portal.base_url + "/portal/",
        cookies={COOKIE: cookie},
        verify=str(portal.ca_path),
        allow_redirects=False,
    )
    assert again.status_code == 303


def test_wrong_password_is_refused_without_saying_which(portal: RunningService) -> None:
    c = PortalClient(portal)
    wrong = c.sign_in("bob@example.com", "not the password at all")
    unknown = c.sign_in("nobody@example.com", "not the password at all")
    assert wrong.status_code == unknown.status_code == 401
    assert "Wrong e-mail address or password." in wrong.text
    assert "Wrong e-mail address or password." in unknown.text


def test_signin_is_limited_per_account_with_a_clear_message(portal: RunningService) -> None:
    PortalStore(portal.keys).add_user("carol@example.com", PASSWORD)
    c = PortalClient(portal)
    for _ in range(5):
        assert c.sign_in("carol@example.com", "guess guess guess").status_code == 401
    blocked = c.sign_in("carol@example.com", PASSWORD)  # even the right password waits now
    assert blocked.status_code == 429
    assert "Too many failed sign-in attempts for this account" in blocked.text
    assert re.search(r"try again in \d+ (minute|second)s?", blocked.text)
    assert int(blocked.headers["retry-after"]) > 0
    assert COOKIE in c.http.cookies and "carol@example.com" not in c.get().text


def test_signin_is_limited_per_client_address(tmp_path: Path, service_cert_dir: Path) -> None:
    with start_service(
        keys=tmp_path / "keys.sqlite", cert_dir=service_cert_dir, portal=True
    ) as svc:
        PortalStore(svc.keys).add_user("dave@example.com", PASSWORD)
        c = PortalClient(svc)
        for i in range(20):  # 20 different accounts from one address: under 5 each
            assert c.sign_in(f"guess{i}@example.com", "nope nope nope").status_code == 401
        blocked = c.sign_in("dave@example.com", PASSWORD)
        assert blocked.status_code == 429
        assert "Too many failed sign-in attempts for your address" in blocked.text


# ---------------------------------------------------------------- headers, CSRF, escaping


def test_security_headers_on_every_portal_page(client: Callable[[str], PortalClient]) -> None:
    c = client("alice@example.com")
    for response in (
        c.get(),
        c.get("/portal/signin"),
        c.get("/portal/static/portal.css"),
        c.get("/portal/nothing-here"),
    ):
        csp = response.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "default-src 'none'" in csp
        assert "'unsafe-inline'" not in csp
        assert response.headers["strict-transport-security"].startswith("max-age=")
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["referrer-policy"] == "no-referrer"
    scripts = re.findall(r"<script[^>]*>", c.get().text)
    assert scripts == ['<script src="/portal/static/portal.js" defer>']  # ours, no inline
    assert " style=" not in c.get().text  # nothing inline for the CSP to refuse


@pytest.mark.parametrize(
    ("data", "headers"),
    [
        pytest.param({}, {}, id="no-token"),
        pytest.param({"csrf_token": "forged"}, {}, id="wrong-token"),
        pytest.param(None, {"Origin": "https://evil.example"}, id="foreign-origin"),
        pytest.param(None, {"Sec-Fetch-Site": "cross-site"}, id="cross-site-fetch"),
    ],
)
def test_post_without_valid_csrf_is_refused(
    client: Callable[[str], PortalClient],
    portal: RunningService,
    data: dict[str, str] | None,
    headers: dict[str, str],
) -> None:
    c = client("alice@example.com")
    before = len(portal.keys.list())
    form = {"name": "csrf-victim", "key_type": "demo", "services": "search"}
    if data is None:
        response = c.post("/portal/apps", form, headers=headers)
    else:
        response = c.post("/portal/apps", {**form, **data}, csrf=False, headers=headers)
    assert response.status_code == 403
    assert "CSRF token is missing or wrong" in response.text
    assert len(portal.keys.list()) == before


def test_signin_without_csrf_token_is_refused(portal: RunningService) -> None:
    c = PortalClient(portal)
    c.get("/portal/signin")
    response = c.post(
        "/portal/signin", {"email": "alice@example.com", "password": PASSWORD}, csrf=False
    )
    assert response.status_code == 403


def test_app_names_are_escaped(client: Callable[[str], PortalClient]) -> None:
    c = client("alice@example.com")
    name = '<script>alert("x")</script>'
    key_page = c.post("/portal/apps", {"name": name, "key_type": "demo", "services": "search"}).text
    for page in (key_page, c.get().text, c.get(f"/portal/apps/{c.app_id(name)}").text):
        assert "<script>" not in page
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page


# ---------------------------------------------------------------- apps


def test_key_shown_once_and_only_its_hash_stored(
    client: Callable[[str], PortalClient],
    portal: RunningService,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG):
        c = client("alice@example.com")
        key = c.create("shown-once")
        assert call(portal, key).status_code == 200
        later = c.get().text
        again = new_key(c.post(f"/portal/apps/{c.app_id('shown-once')}/regenerate").text)
        c.post(f"/portal/apps/{c.app_id('shown-once')}/revoke")
    assert key not in later  # only the response to the create POST showed it
    assert "new-key" not in later
    assert "created app 'shown-once'" in caplog.text  # the log has events, not secrets
    for secret in (key, again, PASSWORD):
        assert secret not in caplog.text
    store_file = Path(portal.keys.location)
    for path in (store_file, Path(f"{store_file}-wal")):
        if path.exists():
            assert key.encode() not in path.read_bytes()


def test_n_calls_show_as_n_in_month_and_lifetime(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    c = client("alice@example.com")
    key = c.create("counted")
    n = 7
    statuses = [call(portal, key, "/v1/search").status_code for _ in range(n)]
    assert statuses == [200] * n
    log = portal.keys.requests("alice@example.com/counted")
    assert int(log["counted"].sum()) == n  # the witness: the service's request log
    assert c.cell("counted", "month") == str(n)
    assert c.cell("counted", "lifetime") == str(n)
    assert c.cell("counted", "remaining") == str(500 - n)
    assert c.cell("counted", "resets").endswith("UTC")
    page = c.get(f"/portal/apps/{c.app_id('counted')}").text
    wide = page.split('<svg class="chart wide"')[1].split("</svg>")[0]
    bars = [int(x) for x in re.findall(r'data-calls="(\d+)"', wide)]
    assert len(bars) == 30 and bars[-1] == n and sum(bars) == n


def test_regenerate_stops_the_old_key_at_once(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    c = client("alice@example.com")
    old = c.create("regen")
    assert call(portal, old).status_code == 200
    page = c.post(f"/portal/apps/{c.app_id('regen')}/regenerate")
    fresh = new_key(page.text)
    assert fresh != old
    refused = call(portal, old)
    assert refused.status_code == 401 and refused.json()["messages"] == ["Invalid ApiKey"]
    assert call(portal, fresh).status_code == 200
    assert c.cell("regen", "lifetime") == "2"  # one app, one count across both keys


def test_revoke_stops_the_key_at_once(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    c = client("alice@example.com")
    key = c.create("to-revoke")
    assert call(portal, key).status_code == 200
    c.post(f"/portal/apps/{c.app_id('to-revoke')}/revoke")
    refused = call(portal, key)
    assert refused.status_code == 401
    assert refused.json()["messages"] == ["Invalid ApiKey"]
    assert portal.keys.get("alice@example.com/to-revoke")["revoked"]


def test_other_users_apps_are_invisible_and_answer_404(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    alice, bob = client("alice@example.com"), client("bob@example.com")
    key = alice.create("alices-app")
    app_id = alice.app_id("alices-app")
    assert "alices-app" not in bob.get().text
    for action in ("revoke", "regenerate", "limits"):
        response = bob.post(
            f"/portal/apps/{app_id}/{action}", {"per_second": "100", "quota": "100000"}
        )
        assert response.status_code == 404
    assert bob.post("/portal/apps/999999/revoke").status_code == 404
    assert call(portal, key).status_code == 200  # untouched


def test_admin_sees_all_and_raises_limits_applied_at_once(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    alice, admin = client("alice@example.com"), client("admin@example.com")
    portal.keys.create("from-the-cli", key_type="demo")
    key = alice.create("limited", key_type="demo", services=("markets",))
    app_id = alice.app_id("limited")
    page = admin.get().text
    assert 'data-app="limited"' in page and 'data-app="from-the-cli"' in page
    # Non-admins cannot change limits.
    assert (
        alice.post(f"/portal/apps/{app_id}/limits", {"per_second": "50", "quota": "9"}).status_code
        == 403
    )
    admin.post(f"/portal/apps/{app_id}/limits", {"per_second": "1", "quota": "2"})
    first, second = call(portal, key), call(portal, key)
    assert first.status_code == 200 and second.status_code == 429
    assert second.json()["messages"] == ["Spike arrest violation. Allowed rate : 1ps"]
    assert alice.cell("limited", "spike-refusals") == "1"
    admin.post(f"/portal/apps/{app_id}/limits", {"per_second": "20", "quota": "3"})
    assert [call(portal, key).status_code for _ in range(3)] == [200, 200, 429]
    assert "Quota limit exceeded. Identifier : alice@example.com/limited" in call(portal, key).text
    assert alice.cell("limited", "lifetime") == "3"
    assert alice.cell("limited", "remaining") == "0"
    assert alice.cell("limited", "resets") == "never (a lifetime quota)"
    bad = admin.post(f"/portal/apps/{app_id}/limits", {"per_second": "fast", "quota": "3"})
    assert bad.status_code == 400 and "per_second must be a number from 0.01 to" in bad.text


def test_create_with_a_taken_name_or_no_service_says_why(
    client: Callable[[str], PortalClient],
) -> None:
    c = client("bob@example.com")
    c.create("bobs-app")
    taken = c.post("/portal/apps", {"name": "bobs-app", "key_type": "demo", "services": "search"})
    assert taken.status_code == 400 and "you already have an app named" in taken.text
    none = c.post("/portal/apps", {"name": "bobs-other", "key_type": "demo"})
    assert none.status_code == 400 and "choose at least one service" in none.text
    long = c.post("/portal/apps", {"name": "x" * 101, "key_type": "demo", "services": "search"})
    assert long.status_code == 400 and "at most 100 characters" in long.text
    odd = c.post("/portal/apps", {"name": "odd", "key_type": "gold", "services": "search"})
    assert odd.status_code == 400 and "key type must be one of demo, production" in odd.text


def test_portal_is_off_unless_asked(service: RunningService) -> None:
    response = requests.get(service.base_url + "/portal/", verify=str(service.ca_path))
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json"


def test_portal_without_slash_redirects(portal: RunningService) -> None:
    response = requests.get(
        portal.base_url + "/portal", verify=str(portal.ca_path), allow_redirects=False
    )
    assert response.status_code == 308 and response.headers["location"] == "/portal/"


# ---------------------------------------------------------------- both backends


def test_core_flow_on_each_backend(keys_location: str, service_cert_dir: Path) -> None:
    with start_service(keys=keys_location, cert_dir=service_cert_dir, portal=True) as svc:
        users = PortalStore(svc.keys)
        users.add_user("erin@example.com", PASSWORD)
        users.add_user("frank@example.com", PASSWORD)
        erin, frank = PortalClient(svc), PortalClient(svc)
        assert erin.sign_in("erin@example.com").status_code == 200
        assert frank.sign_in("frank@example.com").status_code == 200
        key = erin.create("erins")
        n = 4
        assert [call(svc, key, "/v1/search").status_code for _ in range(n)] == [200] * n
        assert erin.cell("erins", "month") == erin.cell("erins", "lifetime") == str(n)
        assert svc.keys.get("erin@example.com/erins")["used_lifetime"] == n
        app_id = erin.app_id("erins")
        assert frank.post(f"/portal/apps/{app_id}/revoke").status_code == 404
        assert "erins" not in frank.get().text
        erin.post(f"/portal/apps/{app_id}/revoke")
        assert call(svc, key).status_code == 401


# ---------------------------------------------------------------- one page per app, the new key


def test_app_page_says_the_limits_in_words_and_charts_30_and_90_days(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    c = client("bob@example.com")
    key = c.create("worded", key_type="demo", services=("search",))
    assert [call(portal, key, "/v1/search").status_code for _ in range(2)] == [200, 200]
    app_id = c.app_id("worded")
    page = c.get(f"/portal/apps/{app_id}").text
    assert "50 calls for life" in page and "at most 10 calls a second" in page
    assert "Calls per day, last 30 days" in page
    weekly = c.get(f"/portal/apps/{app_id}?days=90").text
    assert "Calls per week, last 90 days" in weekly
    wide = weekly.split('<svg class="chart wide"')[1].split("</svg>")[0]
    bars = [int(x) for x in re.findall(r'data-calls="(\d+)"', wide)]
    assert len(bars) == 13 and bars[-1] == 2 and sum(bars) == 2  # 12 weeks and 6 days
    bad = c.get(f"/portal/apps/{app_id}?days=7")
    assert bad.status_code == 400 and "days must be 30 or 90, got &#39;7&#39;" in bad.text
    assert c.get("/portal/apps/999999").status_code == 404


def _exported(snippet: str) -> dict[str, str]:
    """The variables the shell snippet's ``export`` sets."""
    words = shlex.split(snippet.split("\nparcelsearch ")[0].replace("\\\n", " "))
    assert words[0] == "export"
    return dict(word.split("=", 1) for word in words[1:])


def key_name(keys: KeyStore, app: str) -> str:
    """The key store's name of the portal app ``app`` (its name, or ``<e-mail>/<app>`` where
    app names are unique per account)."""
    return next(str(k["name"]) for k in keys.list() if str(k["name"]).split("/")[-1] == app)


def test_new_key_page_has_snippets_that_work(
    client: Callable[[str], PortalClient], portal: RunningService, tmp_path: Path
) -> None:
    c = client("bob@example.com")
    c.create("snippets")
    page = c.last.text if c.last is not None else ""
    key = new_key(page)
    shell = html.unescape(
        re.search(r'<pre id="snippet-shell"><code>(.*?)</code>', page, re.S).group(1)
    )  # type: ignore[union-attr]
    variables = _exported(shell)
    assert variables == {
        "PARCELSEARCH_API_KEY": key,
        "PARCELSEARCH_BASE_URL": portal.base_url,
        "PARCELSEARCH_CA_BUNDLE": str(Path(portal.ca_path).resolve()),
    }
    assert 'href="/portal/ca.pem"' in page
    python = html.unescape(
        re.search(r'<pre id="snippet-python"><code>(.*?)</code>', page, re.S).group(1)
    )  # type: ignore[union-attr]
    compile(python, "snippet", "exec")
    assert f"api_key={key!r}" in python
    # Run the snippet's first command as a user would: one call, seen by the service.
    env = {**os.environ, **variables, "PARCELSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-m", "parcelsearch.cli", "markets", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert key not in done.stdout + done.stderr
    assert list(portal.keys.requests(key_name(portal.keys, "snippets"))["path"]) == ["/v1/markets"]


def test_ca_certificate_and_getting_started_need_no_sign_in(portal: RunningService) -> None:
    anyone = PortalClient(portal)
    ca = anyone.get("/portal/ca.pem")
    assert ca.status_code == 200 and ca.content == Path(portal.ca_path).read_bytes()
    start = anyone.get("/portal/start")
    assert start.status_code == 200
    for text in (
        "The Search service",
        "The Markets service",
        "50 calls for life",
        "500 calls a calendar month (UTC)",
        "at most 10 calls a second",
        f"{portal.base_url}/v1/markets",
        "parcelsearch search areas.gpkg",
    ):
        assert html.escape(text, quote=False) in start.text, text


def test_getting_started_and_docs_are_linked_from_every_page(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    c = client("admin@example.com")
    c.create("linked")
    paths = [
        "/portal/",
        f"/portal/apps/{c.app_id('linked')}",
        "/portal/account",
        "/portal/admin",
        "/portal/start",
        "/portal/nothing-here",
    ]
    pages = [c.get(path).text for path in paths]
    pages.append(PortalClient(portal).get("/portal/signin").text)
    for text in pages:
        assert 'href="/portal/start"' in text and 'href="/openapi.json"' in text


# ---------------------------------------------------------------- account and admin pages


def two_sessions(portal: RunningService, email: str) -> tuple[PortalClient, PortalClient]:
    """A new account ``email`` signed in twice: (here, there), here signed in last."""
    PortalStore(portal.keys).add_user(email, PASSWORD)
    here, there = PortalClient(portal), PortalClient(portal)
    assert there.sign_in(email).status_code == 200
    assert here.sign_in(email).status_code == 200
    return here, there


def test_password_change_needs_the_current_one_and_signs_out_other_sessions(
    portal: RunningService,
) -> None:
    here, there = two_sessions(portal, "gina@example.com")
    here.get("/portal/account")
    new = "a new passphrase for gina"
    wrong = here.post(
        "/portal/account/password",
        {"current_password": "not it at all", "new_password": new, "new_password_again": new},
    )
    assert wrong.status_code == 400 and "the current password is wrong" in wrong.text
    differ = here.post(
        "/portal/account/password",
        {"current_password": PASSWORD, "new_password": new, "new_password_again": new + "!"},
    )
    assert differ.status_code == 400 and "the two new passwords differ" in differ.text
    assert "gina@example.com" in there.get().text  # nothing changed yet
    done = here.post(
        "/portal/account/password",
        {"current_password": PASSWORD, "new_password": new, "new_password_again": new},
    )
    assert done.status_code == 200
    assert "Password changed; 1 other session signed out." in done.text
    assert there.get(allow_redirects=False).status_code == 303  # signed out
    assert "gina@example.com" in here.get().text  # this one stays
    assert PortalClient(portal).sign_in("gina@example.com").status_code == 401
    assert PortalClient(portal).sign_in("gina@example.com", new).status_code == 200


def test_account_lists_sessions_and_sign_ins_and_signs_out_the_others(
    portal: RunningService,
) -> None:
    here, there = two_sessions(portal, "hank@example.com")
    page = here.get("/portal/account").text
    assert page.count("<li><strong>This session</strong>") == 1
    assert page.count("<li>Another session") == 1
    signins = re.findall(r"<tr><td>[^<]+UTC</td><td>127\.0\.0\.1</td>", page)
    assert len(signins) == 2
    assert "python-requests" in page  # the browser's own description
    for secret in (PASSWORD, here.http.cookies[COOKIE], there.http.cookies[COOKIE]):
        assert secret not in page
    done = here.post("/portal/account/signout-others")
    assert "1 other session signed out." in done.text
    assert there.get(allow_redirects=False).status_code == 303
    assert "<li>Another session" not in here.get("/portal/account").text


def test_all_apps_page_is_for_admins_with_owners_and_usage(
    client: Callable[[str], PortalClient], portal: RunningService
) -> None:
    alice, admin = client("alice@example.com"), client("admin@example.com")
    key = alice.create("overseen")
    assert call(portal, key).status_code == 200
    refused = alice.get("/portal/admin")
    assert refused.status_code == 403 and "Only an admin" in refused.text
    page = admin.get("/portal/admin").text
    card = re.search(r'<li class="card" data-app="overseen".*?</li>\n', page, re.S)
    assert card is not None
    assert 'data-field="owner">alice@example.com<' in card.group(0)
    assert 'data-usage="lifetime">1<' in card.group(0)
    app_id = alice.app_id("overseen")
    moved = admin.post(
        f"/portal/apps/{app_id}/limits",
        {"per_second": "5", "quota": "1000", "back": "admin"},
        allow_redirects=False,
    )
    assert moved.status_code == 303 and moved.headers["location"] == "/portal/admin"
    assert "1,000 calls a calendar month (UTC)" in alice.get(f"/portal/apps/{app_id}").text
    gone = admin.post(f"/portal/apps/{app_id}/revoke", {"back": "admin"}, allow_redirects=False)
    assert gone.headers["location"] == "/portal/admin"
    assert call(portal, key).status_code == 401
