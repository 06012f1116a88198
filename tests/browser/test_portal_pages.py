"""The portal's pages as a person uses them, in headless Chromium, on both key stores.

One walk a store: create an app and read its key and snippet from the page (and copy the key
with the copy button, our own script from 'self', into the clipboard); make N calls and
read N from the chart's labels and its table (30 and 90 days); an admin raises a limit and the
owner sees it (and a spike-arrest refusal shows apart from the calls); change the password
and see the other session signed out. Every page is audited with axe-core (vendored, see
``axe/README.md``; injected through WebDriver, never loaded by the page) for serious or
critical violations, checked for sideways scrolling at 375, 800 and 1280 px, and
photographed at 375 and 1280 px into the ignored ``_screenshots/`` folder.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import PASSWORD, Browser, click_through
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from parcelsearch_service.keys import KeyStore
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.server import RunningService

Shot = Callable[[webdriver.Chrome, str], Path]
AXE = Path(__file__).parent / "axe" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
WIDTHS = (375, 800, 1280)
SHOT_WIDTHS = (375, 1280)
#: A small ring inside the bundled demo parcels.
RING = "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]"
NEW_PASSWORD = "a brand new passphrase for alice"


def axe_source() -> str:
    data = AXE.read_bytes()
    assert hashlib.sha256(data).hexdigest() == AXE_SHA256, "tests/browser/axe/axe.min.js changed"
    return data.decode("utf-8")


def wait_for(chrome: webdriver.Chrome, css: str) -> WebElement:
    located = expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    element: WebElement = WebDriverWait(chrome, 30).until(located)
    return element


def text_of(chrome: webdriver.Chrome, css: str) -> str:
    """The text of ``css`` whether shown or not (``textContent``), trimmed."""
    return str(wait_for(chrome, css).get_attribute("textContent")).strip()


def sign_in(
    chrome: webdriver.Chrome, svc: RunningService, email: str, password: str = PASSWORD
) -> None:
    chrome.get(svc.base_url + "/portal/signin")
    chrome.find_element(By.NAME, "email").send_keys(email)
    chrome.find_element(By.NAME, "password").send_keys(password)
    chrome.find_element(By.ID, "sign-in").click()
    WebDriverWait(chrome, 30).until(expected_conditions.url_to_be(svc.base_url + "/portal/"))


class Audit:
    """Checks every page it is shown: axe-core, no sideways scroll, screenshots."""

    def __init__(self, backend: str, screenshot: Shot) -> None:
        self.backend = backend
        self.screenshot = screenshot
        self.axe = axe_source()
        self.pages: list[str] = []

    def __call__(self, chrome: webdriver.Chrome, name: str) -> None:
        self.pages.append(name)
        chrome.execute_script(self.axe)
        violations: list[dict[str, Any]] = chrome.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {resultTypes: ['violations']})"
            ".then(r => done(r.violations), e => done([{id: 'axe failed', impact: 'critical',"
            " help: String(e), nodes: []}]));"
        )
        bad = [
            f"{v['id']} ({v['impact']}): {v['help']}: {[n['target'] for n in v['nodes']][:3]}"
            for v in violations
            if v["impact"] in ("serious", "critical")
        ]
        assert bad == [], f"{name}: {bad}"
        for width in WIDTHS:
            chrome.set_window_size(width, 900)
            scroll, client = chrome.execute_script(
                "const d = document.documentElement; return [d.scrollWidth, d.clientWidth];"
            )
            assert scroll <= client, f"{name} scrolls sideways at {width} px ({scroll} > {client})"
            if width in SHOT_WIDTHS:
                height = chrome.execute_script("return document.documentElement.scrollHeight")
                chrome.set_window_size(width, min(int(height), 3000))
                self.screenshot(chrome, f"portal-{self.backend}-{name}-{width}")
        chrome.set_window_size(1280, 900)


def key_name(keys: KeyStore, app: str) -> str:
    """The key store's name of the portal app ``app`` (its name, or ``<e-mail>/<app>`` where
    app names are unique per account)."""
    return next(str(k["name"]) for k in keys.list() if str(k["name"]).split("/")[-1] == app)


def call(svc: RunningService, key: str) -> int:
    response = requests.get(
        svc.base_url + "/v1/search",
        params={"searchPolygon": RING},
        headers={"x-api-key": key},
        verify=str(svc.ca_path),
        timeout=30,
    )
    return response.status_code


@pytest.mark.slow
def test_portal_pages_on_each_store(
    browser: Browser,
    portal_on_each_backend: RunningService,
    screenshot: Shot,
    keys_location: str,
) -> None:
    svc = portal_on_each_backend
    backend = "postgresql" if keys_location.startswith("postgresql") else "sqlite"
    PortalStore(svc.keys).add_user("admin@example.com", PASSWORD, admin=True)
    audit = Audit(backend, screenshot)

    elsewhere = browser()  # alice's other session, on another "device"
    sign_in(elsewhere, svc, "alice@example.com")
    alice = browser()
    alice.get(svc.base_url + "/portal/signin")
    audit(alice, "signin")
    alice.find_element(By.NAME, "email").send_keys("alice@example.com")
    alice.find_element(By.NAME, "password").send_keys("not the password at all")
    click_through(alice, alice.find_element(By.ID, "sign-in"))  # back to the same address
    assert text_of(alice, "#message") == "Wrong e-mail address or password."
    audit(alice, "signin-error")
    message, form = (
        alice.find_element(By.CSS_SELECTOR, css).rect["width"] for css in ("#message", "form.panel")
    )
    assert message <= form  # the error is as wide as the form it is about, no wider
    alice.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB, Keys.TAB)  # past "skip"
    focused = alice.switch_to.active_element
    assert focused.text == "parcelsearch developer portal"
    assert focused.value_of_css_property("outline-style") == "solid"  # focus is visible
    assert focused.value_of_css_property("outline-width") == "3px"
    sign_in(alice, svc, "alice@example.com")
    audit(alice, "apps-empty")

    # Create an app: the key and a ready-to-paste snippet for this service are on the page.
    form = alice.find_element(By.ID, "create-app")
    form.find_element(By.NAME, "name").send_keys("field-survey")
    Select(form.find_element(By.NAME, "key_type")).select_by_value("production")
    click_through(alice, form.find_element(By.ID, "create"))
    key = text_of(alice, "#new-key")
    assert len(key) >= 40
    export = text_of(alice, "#snippet-shell").split("\nparcelsearch ")[0]
    words = shlex.split(export.replace("\\\n", " "))
    assert words[0] == "export"
    exported = dict(word.split("=", 1) for word in words[1:])
    assert exported == {
        "PARCELSEARCH_API_KEY": key,
        "PARCELSEARCH_BASE_URL": svc.base_url,
        "PARCELSEARCH_CA_BUNDLE": str(Path(svc.ca_path).resolve()),
    }
    assert f"api_key={key!r}" in text_of(alice, "#snippet-python")
    copy = alice.find_element(By.CSS_SELECTOR, 'button[data-copy="new-key"]')
    assert copy.is_displayed()  # our own script ran under the CSP and revealed it
    alice.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": svc.base_url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    copy.click()
    WebDriverWait(alice, 30).until(lambda _: copy.get_attribute("data-copied") == "yes")
    assert text_of(alice, ".copy-status") == "Copied to the clipboard."
    assert (
        alice.execute_async_script(
            "navigator.clipboard.readText().then(arguments[0], e => arguments[0](String(e)));"
        )
        == key
    )
    audit(alice, "new-key")

    # N calls: N on the chart's label for today, in its table, and in the 90-day view.
    n = 6
    assert [call(svc, key) for _ in range(n)] == [200] * n
    log = svc.keys.requests(key_name(svc.keys, "field-survey"))
    assert int(log["counted"].sum()) == n  # the witness: the service's request log
    today = datetime.now(UTC).date().isoformat()
    click_through(alice, alice.find_element(By.LINK_TEXT, "Go to field-survey: usage and limits"))
    bar = f'g.bar[data-day="{today}"]'
    for drawing in ("wide", "narrow"):  # for wide screens and for phones
        assert text_of(alice, f"svg.{drawing} {bar} text.value") == str(n)
        assert len(alice.find_elements(By.CSS_SELECTOR, f"svg.{drawing} g.bar")) == 30
    assert text_of(alice, f'#usage-table tr[data-day="{today}"] td[data-calls]') == str(n)
    assert text_of(alice, '[data-usage="month"]') == str(n)
    audit(alice, "app-30-days")
    click_through(alice, alice.find_element(By.LINK_TEXT, "90 days"))
    wait_for(alice, '[data-chart="calls-per-week"]')
    assert text_of(alice, f"{bar} text.value") == str(n)  # this week's bar ends today
    assert text_of(alice, "#usage-table tfoot td") == str(n)
    audit(alice, "app-90-days")
    app_url = alice.current_url.split("?")[0]

    # An admin raises the quota (and slows the rate); the owner sees both at once.
    admin = browser()
    sign_in(admin, svc, "admin@example.com")
    admin.get(svc.base_url + "/portal/admin")
    card = admin.find_element(By.CSS_SELECTOR, '#all-apps [data-app="field-survey"]')
    assert text_of(admin, '#all-apps [data-app="field-survey"] [data-field="owner"]') == (
        "alice@example.com"
    )
    card.find_element(By.TAG_NAME, "summary").click()
    quota = card.find_element(By.NAME, "quota")
    quota.clear()
    quota.send_keys("2000")
    rate = card.find_element(By.NAME, "per_second")
    rate.clear()
    rate.send_keys("1")
    click_through(admin, card.find_element(By.CSS_SELECTOR, '[data-action="limits"]'))
    assert admin.current_url == svc.base_url + "/portal/admin"
    audit(admin, "admin")
    assert [call(svc, key), call(svc, key)] == [200, 429]  # 1 a second: a spike refusal
    alice.get(app_url)
    assert text_of(alice, '[data-field="quota"]') == "2,000 calls a calendar month (UTC)"
    assert text_of(alice, '[data-field="per-second"]') == "at most 1 call a second"
    assert text_of(alice, '[data-usage="remaining"]') == f"{2000 - n - 1:,}"
    assert text_of(alice, f"{bar} text.refused-value") == "+1✕"
    assert text_of(alice, f'#usage-table tr[data-day="{today}"] td[data-refused]') == "1"
    audit(alice, "app-after-limits")

    # Change the password: the other session is signed out, this one stays.
    click_through(alice, alice.find_element(By.LINK_TEXT, "Account"))
    assert len(wait_for(alice, "#sessions").find_elements(By.TAG_NAME, "li")) == 2
    assert len(alice.find_elements(By.CSS_SELECTOR, "#signins tbody tr")) == 2
    audit(alice, "account")
    for field, value in [
        ("current_password", PASSWORD),
        ("new_password", NEW_PASSWORD),
        ("new_password_again", NEW_PASSWORD),
    ]:
        alice.find_element(By.NAME, field).send_keys(value)
    click_through(alice, alice.find_element(By.ID, "change"))
    assert text_of(alice, "#message") == "Password changed; 1 other session signed out."
    elsewhere.get(svc.base_url + "/portal/")
    assert elsewhere.current_url.endswith("/portal/signin")
    alice.get(svc.base_url + "/portal/")
    assert alice.find_elements(By.CSS_SELECTOR, '[data-app="field-survey"]')
    audit(alice, "apps")

    click_through(alice, alice.find_element(By.ID, "getting-started"))
    assert svc.base_url + "/v1/markets" in text_of(alice, "#start-curl")
    audit(alice, "start")
    alice.get(svc.base_url + "/portal/nothing-here")
    audit(alice, "not-found")
    assert audit.pages == [
        "signin",
        "signin-error",
        "apps-empty",
        "new-key",
        "app-30-days",
        "app-90-days",
        "admin",
        "app-after-limits",
        "account",
        "apps",
        "start",
        "not-found",
    ]
