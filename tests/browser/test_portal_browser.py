"""The developer portal in a real headless Chromium: sign in, create an app, copy its key,
spend it, see the gateway's counts, revoke it; another user can neither see nor revoke it;
CSRF-less and cross-user requests are refused; names are shown as text."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from conftest import PASSWORD, Browser, click_through, next_page
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from parcelsearch_service.server import RunningService

Shot = Callable[[webdriver.Chrome, str], Path]
#: A small ring inside the bundled demo parcels.
RING = "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]"


def sign_in(chrome: webdriver.Chrome, svc: RunningService, email: str) -> None:
    chrome.get(svc.base_url + "/portal/")
    assert chrome.current_url.endswith("/portal/signin")
    chrome.find_element(By.NAME, "email").send_keys(email)
    chrome.find_element(By.NAME, "password").send_keys(PASSWORD)
    chrome.find_element(By.ID, "sign-in").click()
    WebDriverWait(chrome, 30).until(expected_conditions.url_to_be(svc.base_url + "/portal/"))


def create_app(chrome: webdriver.Chrome, name: str, key_type: str = "production") -> str:
    form = chrome.find_element(By.ID, "create-app")
    form.find_element(By.NAME, "name").send_keys(name)
    Select(form.find_element(By.NAME, "key_type")).select_by_value(key_type)
    click_through(chrome, form.find_element(By.ID, "create"))
    return str(wait_for(chrome, "new-key").text)


def wait_for(chrome: webdriver.Chrome, element_id: str) -> WebElement:
    """The element ``#element_id`` once the page that has it has loaded."""
    located = expected_conditions.presence_of_element_located((By.ID, element_id))
    element: WebElement = WebDriverWait(chrome, 30).until(located)
    return element


def row(chrome: webdriver.Chrome, name: str) -> WebElement:
    """The card (overview) or page (one app) of app ``name`` on the current page."""
    matches = [
        r
        for r in chrome.find_elements(By.CSS_SELECTOR, "[data-app]")
        if r.get_attribute("data-app") == name
    ]
    assert len(matches) == 1, f"{name}: {len(matches)} rows"
    return matches[0]


def usage(chrome: webdriver.Chrome, name: str, which: str) -> str:
    return row(chrome, name).find_element(By.CSS_SELECTOR, f'[data-usage="{which}"]').text


def search(svc: RunningService, key: str) -> requests.Response:
    return requests.get(
        svc.base_url + "/v1/search",
        params={"searchPolygon": RING},
        headers={"x-api-key": key},
        verify=str(svc.ca_path),
        timeout=30,
    )


def submit_form(chrome: webdriver.Chrome, action: str, fields: dict[str, str]) -> None:
    """Post a form the page does not offer (as a forged or tampered request would), and
    return once the answer has loaded."""
    next_page(
        chrome,
        lambda: chrome.execute_script(
            "const f = document.createElement('form'); f.method = 'post'; f.action = arguments[0];"
            "for (const [k, v] of Object.entries(arguments[1])) {"
            "  const i = document.createElement('input'); i.type = 'hidden'; i.name = k;"
            "  i.value = v; f.appendChild(i); }"
            "document.body.appendChild(f); f.submit();",
            action,
            fields,
        ),
    )


def test_portal_in_a_real_browser(
    browser: Browser,
    portal_on_each_backend: RunningService,
    screenshot: Shot,
    keys_location: str,
) -> None:
    svc = portal_on_each_backend
    backend = "postgresql" if keys_location.startswith("postgresql") else "sqlite"
    alice = browser()
    sign_in(alice, svc, "alice@example.com")
    cookie = alice.get_cookie("__Host-parcelsearch-portal")
    assert cookie is not None
    assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert alice.execute_script("return document.cookie") == ""  # HttpOnly: not for scripts

    key = create_app(alice, "browser-app")
    assert len(key) >= 40
    screenshot(alice, f"{backend}-1-new-key")

    n = 5
    assert [search(svc, key).status_code for _ in range(n)] == [200] * n
    log = svc.keys.requests("alice@example.com/browser-app")  # witness: the request log
    assert int(log["counted"].sum()) == n

    alice.get(svc.base_url + "/portal/")  # reload: the key is not shown again
    assert usage(alice, "browser-app", "month") == str(n)
    assert alice.find_elements(By.ID, "new-key") == []
    assert key not in alice.page_source
    app_id = row(alice, "browser-app").get_attribute("data-app-id")
    alice.get(f"{svc.base_url}/portal/apps/{app_id}")
    assert usage(alice, "browser-app", "lifetime") == str(n)
    assert key not in alice.page_source
    bars = row(alice, "browser-app").find_elements(By.CSS_SELECTOR, "svg.wide g.bar")
    assert len(bars) == 30 and bars[-1].get_attribute("data-calls") == str(n)
    screenshot(alice, f"{backend}-2-usage")

    # A second user sees nothing of alice's and cannot revoke it, even by forging the POST.
    bob = browser()
    sign_in(bob, svc, "bob@example.com")
    assert bob.find_elements(By.CSS_SELECTOR, "[data-app]") == []
    assert "browser-app" not in bob.page_source
    bobs_token = bob.find_element(By.NAME, "csrf_token").get_attribute("value")
    submit_form(bob, f"/portal/apps/{app_id}/revoke", {"csrf_token": bobs_token or ""})
    assert wait_for(bob, "message").text == "No such app."
    screenshot(bob, f"{backend}-3-cross-user-refused")
    assert search(svc, key).status_code == 200

    # A POST without the CSRF token is refused, and nothing is created.
    submit_form(
        alice, "/portal/apps", {"name": "no-token", "key_type": "demo", "services": "search"}
    )
    assert "CSRF token is missing or wrong" in wait_for(alice, "message").text
    screenshot(alice, f"{backend}-4-csrf-refused")
    assert "no-token" not in [k["name"] for k in svc.keys.list()]

    # Revoke: the key stops at once.
    alice.get(f"{svc.base_url}/portal/apps/{app_id}")
    click_through(
        alice, row(alice, "browser-app").find_element(By.CSS_SELECTOR, '[data-action="revoke"]')
    )
    refused = search(svc, key)
    assert refused.status_code == 401 and refused.json()["messages"] == ["Invalid ApiKey"]
    assert "revoked" in row(alice, "browser-app").text
    assert usage(alice, "browser-app", "lifetime") == str(n + 1)
    screenshot(alice, f"{backend}-5-revoked")

    # Sign out ends the session.
    click_through(alice, alice.find_element(By.ID, "sign-out"))
    assert alice.current_url.endswith("/portal/signin")
    alice.get(svc.base_url + "/portal/")
    assert alice.current_url.endswith("/portal/signin")


def test_app_names_show_as_text(
    browser: Browser, portal_service: RunningService, screenshot: Shot
) -> None:
    chrome = browser()
    sign_in(chrome, portal_service, "bob@example.com")
    name = '<script>alert("x")</script><b>bold</b>'
    create_app(chrome, name, key_type="demo")
    chrome.get(portal_service.base_url + "/portal/")
    cell = row(chrome, name).find_element(By.CSS_SELECTOR, '[data-field="name"]')
    assert cell.text == name
    chrome.get(str(cell.get_attribute("href")))  # the app's own page
    cell = row(chrome, name).find_element(By.CSS_SELECTOR, 'h1 [data-field="name"]')
    assert cell.text == name  # shown as text, not run or rendered
    assert cell.find_elements(By.TAG_NAME, "b") == []
    with pytest.raises(NoAlertPresentException):
        chrome.switch_to.alert.text  # noqa: B018 - raises when no alert is open
    screenshot(chrome, "6-escaped-name")


def test_the_ca_is_what_the_browser_trusts(
    browser: Browser, portal_service: RunningService
) -> None:
    chrome = browser(trust_ca=False)  # same flags, empty NSS database
    chrome.get(portal_service.base_url + "/portal/signin")
    assert chrome.find_elements(By.NAME, "password") == []
    assert re.search(r"ERR_CERT_AUTHORITY_INVALID|not private", chrome.page_source)
