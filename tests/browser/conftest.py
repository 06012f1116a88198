"""Headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by selenium.

Nothing is downloaded: selenium is given the system chromedriver (``Service(executable_path=
…)``, which skips Selenium Manager) and ``SE_OFFLINE=1``. Chromium trusts the service's local
CA through an NSS database (``certutil`` from ``libnss3-tools``) in a temporary ``$HOME`` —
not through ``--ignore-certificate-errors`` — so ``Secure`` cookies and TLS are exercised as a
user's browser would. Screenshots go to ``tests/browser/_screenshots/`` (git-ignored).

A system part that is missing — Chromium, its driver, or ``certutil`` — makes the tests that
need it skip, saying which part and how to install it (``bash .ci/run`` installs them all);
it never fails them. ``PARCELSEARCH_CHROMIUM``, ``PARCELSEARCH_CHROMEDRIVER`` and
``PARCELSEARCH_CERTUTIL`` name other executables (or a missing one, to see the skip).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.server import RunningService, start_service
from parcelsearch_service.tls import ensure_certificates

CHROMIUM = Path(os.environ.get("PARCELSEARCH_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("PARCELSEARCH_CHROMEDRIVER", "/usr/bin/chromedriver"))
CERTUTIL = os.environ.get("PARCELSEARCH_CERTUTIL") or shutil.which("certutil")
SCREENSHOTS = Path(__file__).parent / "_screenshots"
PASSWORD = "correct horse battery staple"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1600,1000",
)

Browser = Callable[..., webdriver.Chrome]


@pytest.fixture(scope="session")
def chromium() -> tuple[Path, Path]:
    """The Chromium and chromedriver executables (skip, saying why, if missing)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            pytest.skip(
                f"{path} not found: install Debian's chromium and chromium-driver "
                "(bash .ci/run does)"
            )
    return CHROMIUM, CHROMEDRIVER


@pytest.fixture(scope="session")
def certutil() -> Path:
    """NSS's ``certutil``, with which Chromium is made to trust the test CA (skip, saying why,
    if missing)."""
    if CERTUTIL is None or not Path(CERTUTIL).is_file():
        pytest.skip(
            f"certutil not found{f' at {CERTUTIL}' if CERTUTIL else ''}: install "
            "libnss3-tools (bash .ci/run does)"
        )
    return Path(CERTUTIL)


@contextlib.contextmanager
def _portal(keys: str | Path, cert_dir: Path) -> Iterator[RunningService]:
    with start_service(keys=keys, cert_dir=cert_dir, portal=True) as svc:
        users = PortalStore(svc.keys)
        users.add_user("alice@example.com", PASSWORD)
        users.add_user("bob@example.com", PASSWORD)
        yield svc


@pytest.fixture(scope="session")
def portal_service(
    tmp_path_factory: pytest.TempPathFactory, service_cert_dir: Path
) -> Iterator[RunningService]:
    """A portal-enabled service (SQLite) with users alice and bob."""
    with _portal(
        tmp_path_factory.mktemp("browser-portal") / "keys.sqlite", service_cert_dir
    ) as svc:
        yield svc


@pytest.fixture
def portal_on_each_backend(keys_location: str, service_cert_dir: Path) -> Iterator[RunningService]:
    """A portal-enabled service on a fresh SQLite file, then on a fresh PostgreSQL database."""
    with _portal(keys_location, service_cert_dir) as svc:
        yield svc


def _nss_home(certutil: Path, root: Path, ca: Path | None) -> Path:
    """A ``$HOME`` whose NSS database (Chromium's trust store on Linux) trusts ``ca``."""
    nss = root / ".pki" / "nssdb"
    nss.mkdir(parents=True)
    subprocess.run(
        [certutil, "-d", f"sql:{nss}", "-N", "--empty-password"], check=True, capture_output=True
    )
    if ca is not None:
        subprocess.run(
            [
                certutil,
                "-d",
                f"sql:{nss}",
                "-A",
                "-t",
                "C,,",
                "-n",
                "parcelsearch test CA",
                "-i",
                str(ca),
            ],
            check=True,
            capture_output=True,
        )
    return root


@pytest.fixture
def browser(
    certutil: Path, chromium: tuple[Path, Path], service_cert_dir: Path, tmp_path: Path
) -> Iterator[Browser]:
    """``browser(trust_ca=True)``: a fresh headless Chromium (own profile and $HOME)."""
    drivers: list[webdriver.Chrome] = []
    binary, driver = chromium
    ca = ensure_certificates(service_cert_dir).ca  # the CA of every test service

    def start(trust_ca: bool = True) -> webdriver.Chrome:
        n = len(drivers)
        home = _nss_home(certutil, tmp_path / f"home{n}", ca if trust_ca else None)
        options = webdriver.ChromeOptions()
        options.binary_location = str(binary)
        for flag in (*FLAGS, f"--user-data-dir={tmp_path / f'profile{n}'}"):
            options.add_argument(flag)
        env = {**os.environ, "HOME": str(home), "SE_OFFLINE": "1"}
        service = Service(executable_path=str(driver), env=env)
        chrome = webdriver.Chrome(service=service, options=options)
        chrome.set_page_load_timeout(30)
        drivers.append(chrome)
        return chrome

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "1")  # never let selenium fetch anything
        yield start
    for chrome in drivers:
        chrome.quit()


@pytest.fixture(scope="session")
def screenshot() -> Callable[[webdriver.Chrome, str], Path]:
    """``screenshot(driver, name)``: a PNG in the ignored ``_screenshots`` folder."""
    SCREENSHOTS.mkdir(exist_ok=True)

    def take(chrome: webdriver.Chrome, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        chrome.save_screenshot(str(path))
        return path

    return take


def next_page(chrome: webdriver.Chrome, act: Callable[[], object]) -> None:
    """Do ``act`` (a click, a form submitted) and return once the page it leads to has
    replaced this one and loaded.

    Elements looked up between the act and the next page's arrival would belong to the old
    page (or, mid-navigation, to no document at all: chromedriver then answers "Node with
    given id does not belong to the document", even to a staleness check). So the old page's
    window is marked first, and the wait is for a loaded document whose window lacks the
    mark: only a new page can be that, even at the same address. What fails while the
    browser is between pages is asked again.
    """
    chrome.execute_script("window.__leftBehind = true;")
    act()
    WebDriverWait(chrome, 30, ignored_exceptions=(WebDriverException,)).until(
        lambda _: chrome.execute_script(
            "return window.__leftBehind !== true && document.readyState === 'complete';"
        )
    )


def click_through(chrome: webdriver.Chrome, target: WebElement) -> None:
    """Click ``target`` and return once the page it leads to has loaded (:func:`next_page`)."""
    next_page(chrome, target.click)
