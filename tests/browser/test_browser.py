"""The browser fixture itself: a real Chromium reaches the real server, logs
in through the admin form, and runs the page's JavaScript."""

from __future__ import annotations

from selenium.webdriver.common.by import By


def test_browser__logs_in_to_the_admin(browser):
    browser.login()
    assert "/admin/" in browser.driver.current_url
    assert browser.driver.find_element(By.ID, "user-tools").text
    # JavaScript runs (the tests of pages that draw with it rely on this).
    assert browser.driver.execute_script("return 1 + 1") == 2


def test_browser__each_test_starts_logged_out(browser):
    browser.get("/admin/")
    browser.wait_for("#login-form")
