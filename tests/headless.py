"""Headless Chromium driven by selenium, started as CI starts it: Debian's ``chromium`` and
``chromium-driver``, no network of its own, a fresh profile. The browser test and the report
benchmark (``bench/``) both use it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


class NoBrowser(Exception):
    """Why no browser can be started here."""


@contextmanager
def chromium() -> Iterator[Any]:
    """A selenium driver of headless Chromium, with the console's messages kept (``get_log``);
    ``NoBrowser`` where selenium or the browser is not installed."""
    try:
        from selenium import webdriver
    except ImportError:
        raise NoBrowser("selenium is not installed (pip install -e '.[test]')") from None
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        raise NoBrowser(
            "no browser installed: apt-get install -y chromium chromium-driver (as .ci/run does)"
        )
    os.environ["SE_OFFLINE"] = "true"  # selenium must not look for drivers online
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with tempfile.TemporaryDirectory(prefix="agentv-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        browser = webdriver.Chrome(
            service=webdriver.ChromeService(executable_path=driver), options=options
        )
        try:
            yield browser
        finally:
            browser.quit()
