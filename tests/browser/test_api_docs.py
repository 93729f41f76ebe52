"""Swagger UI (``/api/docs/``) and Redoc (``/api/redoc/``) render in a real
headless Chromium with the network off (issue 17 point 2): a Chromium of its
own whose host resolver answers every name but the server's with NOTFOUND and
whose proxy is a dead port (only loopback bypasses it), so a page that needed
a CDN or a web font would stay blank. Every request the pages made is read
from Chromium's performance log and must have gone to this server."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.browser.conftest import CHROMIUM_ARGS, PAGE_TIMEOUT, _require_chromium

OFFLINE_ARGS = (
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--proxy-server=http://127.0.0.1:9",  # discard port: nothing listens
    "--proxy-bypass-list=127.0.0.1",
)
MIN_OPERATIONS = 20  # the API has far more; a page that rendered none has failed


@pytest.fixture(scope="module")
def offline_driver() -> Iterator[Any]:
    chromium, driver_path = _require_chromium()
    os.environ.setdefault("SE_AVOID_STATS", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (*CHROMIUM_ARGS, *OFFLINE_ARGS):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT)
    try:
        yield driver
    finally:
        driver.quit()


def _requested_hosts(driver: Any) -> set[str]:
    """The hosts of the page's requests that went out (a request the page's
    Content-Security-Policy refused never leaves the browser)."""
    sent: dict[str, str] = {}
    refused: set[str] = set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url.startswith(("http://", "https://")):
                sent[params["requestId"]] = urlsplit(url).netloc
        elif message["method"] == "Network.loadingFailed" and params.get("blockedReason") == "csp":
            refused.add(params["requestId"])
    return {host for request, host in sent.items() if request not in refused}


def _count(driver: Any, css: str) -> int:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    found: list[int] = []

    def enough(d: Any) -> bool:
        found[:] = [len(d.find_elements("css selector", css))]
        return found[0] >= MIN_OPERATIONS

    with contextlib.suppress(TimeoutException):  # the caller reports the count
        WebDriverWait(driver, PAGE_TIMEOUT).until(enough)
    return found[0] if found else 0


def test_offline_driver__cannot_reach_outside_hosts(offline_driver, browser_server):
    from selenium.common.exceptions import WebDriverException

    with pytest.raises(WebDriverException, match="net::ERR_"):
        offline_driver.get("https://cdn.jsdelivr.net/npm/swagger-ui-dist/swagger-ui.css")


@pytest.mark.parametrize(
    ("path", "operation_css"),
    [
        ("/api/docs/", ".swagger-ui .opblock .opblock-summary-path"),
        ("/api/redoc/", "[data-section-id^='operation/'], [id^='operation/']"),
    ],
)
def test_api_docs__render_their_operations_offline(
    offline_driver, browser_server, path, operation_css
):
    offline_driver.get_log("performance")  # drop what earlier pages logged
    offline_driver.get(f"{browser_server.url}{path}")
    operations = _count(offline_driver, operation_css)
    assert operations >= MIN_OPERATIONS, offline_driver.page_source[:2000]
    assert _requested_hosts(offline_driver) == {urlsplit(browser_server.url).netloc}
