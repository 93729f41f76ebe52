"""Browser fixtures: a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed by ``scripts/browser.sh``) driven by selenium
against a real server process (``tests.blackbox.server.Server``: DEBUG off,
its own database, set up through management commands).

The fixture every browser test uses is ``browser`` (a ``Browser``):

    def test_docs(browser):
        browser.get("/api/docs/")                       # server URL + path
        browser.login()                                 # the superuser below
        browser.driver.find_element(By.CSS_SELECTOR, "svg")   # the raw WebDriver
        browser.server.manage("create_queue", "acme", "jobs")  # the server's commands

One server and one Chromium per test session (per xdist worker); each test
starts logged out (cookies cleared). Without chromium the tests skip, except
under CI=true where the missing browser is an error (``scripts/test.sh`` runs
``scripts/browser.sh`` first, so CI has it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.blackbox.server import (
    ROOT,
    Server,
    postgres_create,
    postgres_drop,
    postgres_url,
    production_env,
)

ADMIN_USERNAME = "browser-admin"
ADMIN_PASSWORD = "br-Passw0rd-not-secret"
PAGE_TIMEOUT = 60.0  # seconds; the machine is shared and may be slow
WINDOW_SIZE = "1280,1024"
CHROMIUM_ARGS = (
    "--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
    f"--window-size={WINDOW_SIZE}", "--no-first-run", "--disable-extensions",
)  # fmt: skip


def browser_database_name(url: str) -> str:
    """``<run's database>_br`` (``_<xdist worker>`` appended under xdist): never
    the black-box server's ``_bb`` database, so both servers can run at once."""
    name = urlsplit(url).path.lstrip("/") or "postgres"
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return f"{name}_br_{worker}" if worker else f"{name}_br"


def chromium_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are installed."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
    )
    return (chromium, driver) if chromium and driver else None


def _require_chromium() -> tuple[str, str]:
    paths = chromium_paths()
    if paths is None and os.environ.get("CI") == "true":
        # CI must run the browser tests: try the project's installer once.
        subprocess.run([str(ROOT / "scripts" / "browser.sh")], check=False, timeout=900)
        paths = chromium_paths()
    if paths is None:
        message = "chromium/chromedriver missing: run scripts/browser.sh"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return paths


@pytest.fixture(scope="session")
def browser_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A running server for the browser tests, with the superuser
    ADMIN_USERNAME / ADMIN_PASSWORD (its own database, migrated)."""
    base = tmp_path_factory.mktemp("browser")
    pg = postgres_url()
    name = browser_database_name(pg) if pg else ""
    database_url = postgres_create(pg, name) if pg else f"sqlite:///{base / 'db.sqlite3'}"
    srv = Server(env=production_env(database_url), log_path=base / "server.log")
    try:
        srv.manage("migrate", "--noinput")
        code = (
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_superuser({ADMIN_USERNAME!r}, "
            f"password={ADMIN_PASSWORD!r})"
        )
        srv.manage("shell", "-c", code)
        srv.start()
        yield srv
    finally:
        srv.stop()
        if pg:
            postgres_drop(pg, name)


@pytest.fixture(scope="session")
def chromium_driver() -> Iterator[Any]:
    """One headless Chromium WebDriver for the session."""
    chromium, driver_path = _require_chromium()
    os.environ.setdefault("SE_AVOID_STATS", "true")  # selenium: no telemetry
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT)
    try:
        yield driver
    finally:
        driver.quit()


@dataclass
class Browser:
    """A headless Chromium on ``server``: ``get(path)``, ``login()``, ``wait_for(css)``;
    ``driver`` is the selenium WebDriver."""

    driver: Any
    server: Server

    def url(self, path: str) -> str:
        return f"{self.server.url}{path}"

    def get(self, path: str) -> None:
        self.driver.get(self.url(path))

    def login(self, username: str = ADMIN_USERNAME, password: str = ADMIN_PASSWORD) -> None:
        """Log in through the admin login form (then on the admin index)."""
        from selenium.webdriver.common.by import By

        self.get("/admin/login/?next=/admin/")
        self.driver.find_element(By.NAME, "username").send_keys(username)
        self.driver.find_element(By.NAME, "password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "[type=submit]").click()
        self.wait_for("#user-tools")

    def wait_for(self, css: str, timeout: float = PAGE_TIMEOUT) -> Any:
        """The first element matching ``css`` once present (TimeoutException if never)."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, css))
        )


@pytest.fixture
def browser(chromium_driver: Any, browser_server: Server) -> Iterator[Browser]:
    """A headless Chromium on the browser server, logged out at the start."""
    chromium_driver.delete_all_cookies()
    yield Browser(driver=chromium_driver, server=browser_server)
    chromium_driver.delete_all_cookies()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed browser test shows what the server logged."""
    outcome: Any = yield
    report = outcome.get_result()
    found = getattr(item, "funcargs", {}).get("browser")
    if report.failed and isinstance(found, Browser):
        report.sections.append(("server output", found.server.output()))
