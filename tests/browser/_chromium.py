"""Headless Chromium for the browser tests: Debian's ``chromium`` + ``chromium-driver``.

Selenium is pointed at the system chromedriver explicitly, so Selenium Manager never runs
(and never downloads a browser). The profile is fresh for every browser and the browser is
kept off the network for everything but 127.0.0.1 (no component updates, no sync, no QUIC).
Tests skip, saying so, only when no Chromium or chromedriver is installed.
``notebooks/refresh_outputs.py`` uses the same browser to take the notebooks' map pictures.

``SHOTS`` is the git-ignored folder where the browser tests leave their screenshots.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "tests" / "browser" / "_screenshots"
_BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
)


def chromium_paths() -> tuple[str, str] | None:
    """(browser, chromedriver) found on this machine, or None.

    ``PARCELSEARCH_CHROMIUM`` and ``PARCELSEARCH_CHROMEDRIVER`` name other executables.
    """
    browser = os.environ.get("PARCELSEARCH_CHROMIUM") or next(
        (p for p in map(shutil.which, _BROWSERS) if p), None
    )
    driver = (
        os.environ.get("PARCELSEARCH_CHROMEDRIVER")
        or shutil.which("chromedriver")
        or "/usr/bin/chromedriver"
    )
    if browser and Path(browser).is_file() and Path(driver).is_file():
        return browser, driver
    return None


def require_chromium() -> tuple[str, str]:
    """The paths, or skip the calling test naming what is missing."""
    paths = chromium_paths()
    if paths is None:
        pytest.skip(
            "headless Chromium not found: install Debian's chromium and "
            "chromium-driver (bash .ci/run does)"
        )
    return paths


@contextmanager
def chromium(size: tuple[int, int] = (1280, 900)) -> Iterator[webdriver.Chrome]:
    """A fresh headless Chromium (own profile, removed afterwards).

    Raises
    ------
    FileNotFoundError
        When Chromium or chromedriver is missing (tests call :func:`require_chromium` first).
    """
    paths = chromium_paths()
    if paths is None:
        raise FileNotFoundError(
            "headless Chromium not found: apt-get install chromium "
            "chromium-driver (or set PARCELSEARCH_CHROMIUM and "
            "PARCELSEARCH_CHROMEDRIVER)"
        )
    browser, driver_path = paths
    profile = tempfile.mkdtemp(prefix="parcelsearch-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot_path(name: str) -> Path:
    """Where a test saves the screenshot called ``name`` (the folder is git-ignored)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS / f"{name}.png"
