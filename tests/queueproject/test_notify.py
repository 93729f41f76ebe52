"""Wake-ups: a notification from another connection wakes a subscriber."""

import threading
import time

import pytest
from django.db import connection, connections

from queueproject import clock, notify


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_notify_from_another_connection_wakes_the_subscriber():
    name = notify.channel("test", "wake")
    with notify.subscribe(name) as sub:

        def send():
            time.sleep(0.2)
            conn = connections.create_connection("default")
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT pg_notify(%s, '')", [name])
            finally:
                conn.close()

        threading.Thread(target=send).start()
        started = time.monotonic()
        assert sub.wait(10.0) is True
        assert time.monotonic() - started < 2.0


@pytest.mark.django_db
def test_without_listen_wait_is_a_short_poll():
    if connection.vendor == "postgresql":
        pytest.skip("SQLite fallback")
    sub = notify.subscribe(notify.channel("test", "poll"))
    started = time.monotonic()
    assert sub.wait(10.0) is False
    assert time.monotonic() - started < 2.0


def test_clock_can_be_frozen_and_advanced():
    with clock.frozen():
        t0 = clock.now()
        clock.advance(30)
        assert (clock.now() - t0).total_seconds() == 30
    clock.advance(60)
    assert (clock.now() - t0).total_seconds() >= 60
