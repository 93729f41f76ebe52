"""The per-principal throttle (principals/throttling.py): no database write per
request, exact in one process (threads), approximate across real processes,
fixed windows."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from principals import throttling
from principals.throttling import SHARE_EVERY, PrincipalRateThrottle
from queueproject import rawsql
from tests.conftest import ROOT, subprocess_env

HOUR = 3600


def ask(key: str, limit: int, *, duration: int = HOUR) -> bool:
    """One request of ``key`` through a fresh throttle (DRF makes one per request)."""
    throttle = PrincipalRateThrottle()
    throttle.num_requests, throttle.duration = limit, duration
    request = Request(APIRequestFactory().get("/"))
    request.auth = type("Token", (), {"pk": key})()
    return throttle.allow_request(request, None)


def counted(key: str) -> int:
    row = rawsql.fetch_one(
        "SELECT coalesce(sum(count), 0) FROM principals_ratecounter WHERE key = %(k)s",
        {"k": f"token:{key}"},
    )
    return int(row[0])


@pytest.fixture
def mid_window(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The throttle's clock, frozen in the middle of an hour window (a list:
    a test moves it with ``clock[0] = …``)."""
    clock = [(time.time() // HOUR) * HOUR + HOUR / 2]
    monkeypatch.setattr(throttling.time, "time", lambda: clock[0])
    throttling.reset()  # its prune timer starts on this clock, not the real one
    return clock


@pytest.mark.django_db
def test_throttle__requests_write_nothing_until_a_tenth_of_the_rate(mid_window):
    with CaptureQueriesContext(connection) as queries:
        assert all(ask("a", 600) for _ in range(59))
    assert len(queries) == 0
    with CaptureQueriesContext(connection) as queries:
        assert ask("a", 600)  # the 60th: one upsert shares the sixty
    assert len(queries) == 1
    assert counted("a") == 60


@pytest.mark.django_db
def test_throttle__refuses_exactly_above_the_rate_and_refusals_write_nothing(mid_window):
    assert [ask("b", 30) for _ in range(30)] == [True] * 30
    with CaptureQueriesContext(connection) as queries:
        assert [ask("b", 30) for _ in range(20)] == [False] * 20
    assert len(queries) == 0
    assert counted("b") == 30


@pytest.mark.django_db
def test_throttle__a_new_window_starts_from_zero(mid_window):
    assert [ask("c", 2) for _ in range(3)] == [True, True, False]
    mid_window[0] += HOUR
    assert [ask("c", 2) for _ in range(3)] == [True, True, False]


@pytest.mark.django_db
def test_throttle__learns_what_other_processes_counted_when_it_shares(mid_window):
    window = int(mid_window[0] // HOUR) * HOUR
    rawsql.execute(
        "INSERT INTO principals_ratecounter (key, window_start, count) VALUES (%(k)s, %(w)s, 95)",
        {"k": "token:d", "w": window},
    )  # what other processes counted already
    assert all(ask("d", 100) for _ in range(10))  # the 10th shares and reads 105 back
    assert not ask("d", 100)


@pytest.mark.django_db
def test_throttle__forgets_windows_long_ended(mid_window):
    assert ask("g", 2)  # a row in this window
    mid_window[0] += 3 * HOUR  # past the process's pruning interval too
    assert ask("g", 2)
    rows = rawsql.fetch_all("SELECT count FROM principals_ratecounter WHERE key = 'token:g'")
    assert rows == [(1,)]  # the new window's; the old one is gone


@pytest.mark.django_db(transaction=True)
def test_throttle__exact_among_threads_of_one_process():
    limit, threads, each = 100, 6, 30
    admitted: Counter[bool] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def hammer() -> None:
        try:
            start.wait()
            for _ in range(each):
                ok = ask("e", limit)
                with lock:
                    admitted[ok] += 1
        finally:
            connection.close()

    away_from_an_hour_boundary()
    workers = [threading.Thread(target=hammer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert admitted == {True: limit, False: threads * each - limit}
    assert counted("e") == limit


@pytest.mark.django_db(transaction=True)
def test_throttle__processes_together_stay_within_a_tenth_of_the_rate_each(
    tmp_path: Path,
) -> None:
    """Three real processes share one key's window: none refuses below the
    rate, and together they admit at most rate * (1 + processes / 10)."""
    limit, processes = 200, 3
    go = tmp_path / "go"
    away_from_an_hour_boundary()
    command = [sys.executable, "-m", "tests.principals.throttle_proc", "f", str(limit),
               str(limit), str(go)]  # fmt: skip
    procs = [
        subprocess.Popen(command, cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    admitted = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        admitted.append(int(out.strip()))
    assert limit <= sum(admitted) <= limit * (1 + processes * SHARE_EVERY)
    assert sum(admitted) < limit * processes  # they saw each other's counts
    assert counted("f") == sum(admitted)


def away_from_an_hour_boundary(margin: float = 60) -> None:
    left = HOUR - time.time() % HOUR
    if left < margin:
        time.sleep(left + 0.5)
