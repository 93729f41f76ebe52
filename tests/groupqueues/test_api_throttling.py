"""Throttling of the group-queue API: 429 ``throttled`` with Retry-After, and a
count that is exact under concurrent requests (threads with their own
connections against PostgreSQL)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings

from groupqueues import services
from tests.groupqueues.api_helpers import EDITOR, assert_error, q_url, user_client

RATE_PER_HOUR = 10


def throttled_to(rate):
    return override_settings(
        REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"principal": rate}}
    )


def away_from_a_window_boundary(seconds=3600, margin=20):
    """Fixed windows reset at their boundary; keep the test inside one window."""
    left = seconds - time.time() % seconds
    if left < margin:
        time.sleep(left + 0.5)


@pytest.mark.django_db
def test_throttle__over_the_rate_is_429_with_retry_after(tree):
    services.collection_create(group=tree["child"], name="jobs")
    client = user_client(tree["child"], EDITOR)
    away_from_a_window_boundary()
    with throttled_to("3/hour"):
        statuses = [client.get(q_url(tree["child"], rest="stats/")).status_code for _ in range(3)]
        response = client.get(q_url(tree["child"], rest="stats/"))
    assert statuses == [200, 200, 200]
    error = assert_error(response, 429, "throttled")
    assert int(response["Retry-After"]) >= 1
    assert error["details"]["retry_after_seconds"] == int(response["Retry-After"])


@pytest.mark.django_db
def test_queue_full_is_429_queue_full_without_retry_after(tree):
    services.collection_create(group=tree["child"], name="jobs", max_depth=1)
    client = user_client(tree["child"], EDITOR)
    url = q_url(tree["child"], rest="messages/")
    assert client.post(url, {"payload": 1}, format="json").status_code == 201
    response = client.post(url, {"payload": 2}, format="json")
    assert_error(response, 429, "queue_full")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_throttle__exact_count_under_concurrent_requests(tree):
    services.collection_create(group=tree["child"], name="jobs")
    client = user_client(tree["child"], EDITOR)  # one token shared by every thread
    url = q_url(tree["child"], rest="stats/")
    threads, per_thread = 6, 5
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def hammer():
        try:
            start.wait()
            for _ in range(per_thread):
                code = client.get(url).status_code
                with lock:
                    statuses[code] += 1
        finally:
            connection.close()

    away_from_a_window_boundary()
    with throttled_to(f"{RATE_PER_HOUR}/hour"):
        workers = [threading.Thread(target=hammer) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
    assert statuses == {200: RATE_PER_HOUR, 429: threads * per_thread - RATE_PER_HOUR}
