"""The admin dashboard and database-health page (issue 16) in a real headless
Chromium against a real server: the charts are drawn (SVG, no network), the
maintenance pass's samples appear as series, the top tables list the queues,
and the reindex button rebuilds the indexes."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.browser.conftest import Browser

DASHBOARD = "/admin/groupqueues/collection/dashboard/"
HEALTH = "/admin/groupqueues/collection/health/"

# 30 samples over the last half hour (ready rising, some dead), then 5 live
# messages and one maintenance pass that writes the current sample.
SEED = """
from datetime import timedelta
from groupqueues import services
from groupqueues.models import Collection, CollectionSample
from queueproject import clock
q = Collection.objects.get(group__slug="dash", name="jobs")
now = clock.now()
CollectionSample.objects.bulk_create([
    CollectionSample(collection=q, taken_at=now - timedelta(minutes=30 - i), ready=i, dead=i // 10,
                     enqueued=3, acked=2, enqueued_total=3 * i, acked_total=2 * i)
    for i in range(30)
])
for n in range(5):
    services.message_enqueue(collection=q, payload={"n": n}, enqueued_by="seed")
"""


@pytest.fixture(scope="module")
def seeded(browser_server):
    browser_server.create_group("dash")
    browser_server.manage("create_queue", "dash", "jobs")
    browser_server.manage("create_queue", "dash", "idle")
    browser_server.manage("shell", "-c", SEED)
    out = browser_server.manage("queue_maintenance", "--once")
    assert "samples=+2/" in out, out  # both queues sampled now
    return browser_server


def polyline(browser: Browser, title: str, series: str) -> Any:
    chart = browser.driver.find_element(By.CSS_SELECTOR, f'svg.chart[data-title="{title}"]')
    return chart.find_element(By.CSS_SELECTOR, f'polyline.series[data-series="{series}"]')


def test_dashboard__draws_the_sampled_series(browser, seeded):
    browser.login()
    browser.get(DASHBOARD)
    browser.wait_for("#gq-collections svg.chart")
    ready = polyline(browser, "dash/jobs: depth", "ready")
    assert int(ready.get_attribute("data-points")) >= 30
    assert ready.get_attribute("data-last") == "5"  # the maintenance pass's live sample
    # The browser laid the line out: it has a drawn extent.
    box = browser.driver.execute_script("return arguments[0].getBBox()", ready)
    assert box["width"] > 200 and box["height"] > 10, box
    assert polyline(browser, "dash/jobs: depth", "dead")
    assert polyline(browser, "dash/jobs: throughput (per minute)", "enqueued")
    assert polyline(browser, "group dash: depth", "ready")
    backlog = browser.driver.find_element(By.ID, "gq-top-backlog").text
    assert "dash/jobs" in backlog and "dash/idle" not in backlog
    # Nothing is fetched from elsewhere: every resource is the server's own.
    urls = browser.driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert all(u.startswith(browser.server.url) for u in urls), urls


def test_dashboard__windows_and_group_filter(browser, seeded):
    browser.login()
    browser.get(DASHBOARD)
    browser.driver.find_element(By.CSS_SELECTOR, '#gq-windows a[data-window="week"]').click()
    browser.wait_for('#gq-windows a.selected[data-window="week"]')
    ready = polyline(browser, "dash/jobs: depth", "ready")
    assert 1 <= int(ready.get_attribute("data-points")) <= 2  # hourly points in a week
    browser.get(f"{DASHBOARD}?window=hour&group=nobody")
    assert browser.driver.find_elements(By.CSS_SELECTOR, "svg.chart") == []


def test_dashboard__a_queue_with_one_sample_draws_one_point(browser, seeded):
    browser.login()
    browser.get(f"{DASHBOARD}?window=hour")
    idle = browser.driver.find_element(By.CSS_SELECTOR, 'svg.chart[data-title="dash/idle: depth"]')
    line = idle.find_element(By.CSS_SELECTOR, 'polyline[data-series="ready"]')
    assert line.get_attribute("data-points") == "1"  # the maintenance pass's sample


def test_health_page__reports_and_rebuilds_the_indexes(browser, seeded):
    browser.login()
    browser.get(HEALTH)
    body = browser.wait_for("#content").text
    if "postgresql" in body:
        tables = browser.driver.find_element(By.ID, "gq-health-tables").text
        assert "groupqueues_message" in tables and "sessionqueues_queuedmessage" in tables
        assert browser.driver.find_element(By.ID, "gq-health-transactions")
    else:
        assert "freelist_count" in browser.driver.find_element(By.ID, "gq-health-sqlite").text
    browser.driver.find_element(By.ID, "gq-reindex").click()
    message = browser.wait_for(".messagelist .success").text
    assert message.startswith("Rebuilt ") and "indexes" in message
