"""A headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium, to look at a
built site: screenshots for the README and the browser tests. Offline: the browser gets no network
(every host name resolves to nothing) and its background traffic is switched off; its DevTools
performance log records every request a page makes, so a caller can check that none left the machine.

Needs ``selenium`` (the ``test`` extra) and the system browser; :func:`browser_problem` says what is
missing instead of failing deep inside.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.errors import UsageError

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--no-pings",
    "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
)


def chromium_path() -> str | None:
    return next((p for p in CHROMIUM if Path(p).is_file()), None) or shutil.which("chromium")


def browser_problem() -> str | None:
    """Why no browser can be started here (None when one can)."""
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed: pip install -e '.[test]'"
    if chromium_path() is None:
        return "Debian's chromium is not installed: apt-get install -y chromium chromium-driver"
    if not Path(CHROMEDRIVER).is_file():
        return f"{CHROMEDRIVER} is missing: apt-get install -y chromium-driver"
    return None


@contextmanager
def headless_chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A Selenium WebDriver on a fresh profile, logging every network request (see :func:`requests_made`)."""
    problem = browser_problem()
    if problem:
        raise UsageError(f"cannot start a browser: {problem}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="site-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = chromium_path() or ""
        for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()


def requests_made(driver: Any) -> list[str]:
    """URLs of every request the pages asked for since the last call (from the DevTools performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def screenshot(
    driver: Any,
    page: Path,
    out_png: Path,
    *,
    full_height: bool = True,
    max_height: int = 6000,
    width: int = 1400,
    height: int = 1000,
) -> None:
    """Opens ``page`` (a file) and saves a PNG of it, as tall as the page (up to ``max_height``) when
    ``full_height``."""
    driver.set_window_size(width, height)
    driver.get(page.resolve().as_uri())
    wait_for_plots(driver)
    if full_height:
        needed = min(max_height, int(driver.execute_script("return document.body.scrollHeight")))
        driver.set_window_size(width, max(height, needed + 100))
        wait_for_plots(driver)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(out_png))


def wait_for_plots(driver: Any, timeout_s: float = 30.0) -> None:
    """Waits until every Plotly div on the page has drawn its SVG, with a trace group per trace."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout_s).until(
        lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('.plotly-graph-div')).every(g => g._fullLayout"
            " && g.querySelector('svg.main-svg')"
            " && g.querySelectorAll('.scatterlayer .trace').length === g.data.length);"
        )
    )
