"""The lane pool: which collection a free slot claims from next (issue 19:
a fixed number of slots serves any number of collections; each gets its turn)."""

from __future__ import annotations

import threading
import time

import pytest

from groupqueues.models import Collection
from groupqueues.worker import Lane, LanePool
from groupqueues.worker import pool as pool_module


@pytest.fixture(autouse=True)
def _poll_mode(settings):
    settings.QUEUE_LISTEN_NOTIFY = False  # no listener connection: these tests use none
    settings.QUEUE_WORKER_POLL_INTERVAL = 0.5


def lanes(pk: int, *, concurrency: int = 1, apps: int = 1) -> list[Lane]:
    collection = Collection(id=pk, name=f"q{pk}")
    return [
        Lane(collection, f"g/q{pk}", "noop", batch=10, concurrency=concurrency,
             visibility_timeout=30, app_slug=f"a{i}", trigger_id=pk)
        for i in range(apps)
    ]  # fmt: skip


def test_pool__serves_collections_first_come_each_up_to_its_cap():
    pool = LanePool(slots=4)
    pool.update(lanes(1, concurrency=2) + lanes(2))
    stopping = threading.Event()
    taken = [pool.take(stopping) for _ in range(3)]
    turns = [t for t in taken if t is not None]
    assert [t.rotation.queue for t in turns] == ["g/q1", "g/q2", "g/q1"]
    assert pool.should_yield(turns[0]) is False  # nothing else waits
    for t in turns:
        pool.done(t, worked=True)


def test_pool__an_empty_collection_sleeps_until_its_recheck():
    pool = LanePool(slots=1)
    pool.update(lanes(1))
    stopping = threading.Event()
    turn = pool.take(stopping)
    assert turn is not None
    pool.done(turn, worked=False)
    assert pool.all_empty()
    started = time.monotonic()
    again = pool.take(stopping)
    assert again is not None and again.serving is turn.serving
    assert time.monotonic() - started >= pool.recheck * 0.9


def test_pool__a_notification_wakes_a_sleeping_collection_at_once():
    pool = LanePool(slots=1)
    pool.update(lanes(1))
    stopping = threading.Event()
    turn = pool.take(stopping)
    assert turn is not None
    pool.done(turn, worked=False)
    threading.Timer(0.05, pool.wake, args=(turn.serving,)).start()
    started = time.monotonic()
    assert pool.take(stopping) is not None
    assert time.monotonic() - started < pool.recheck / 2
    assert not pool.all_empty()


def test_pool__a_notification_during_an_empty_claim_keeps_it_due():
    pool = LanePool(slots=1)
    pool.update(lanes(1))
    stopping = threading.Event()
    turn = pool.take(stopping)
    assert turn is not None
    pool.wake(turn.serving)  # a message arrived while the claim ran
    pool.done(turn, worked=False)
    started = time.monotonic()
    assert pool.take(stopping) is not None
    assert time.monotonic() - started < pool.recheck / 2


def test_pool__a_chaining_slot_yields_to_a_collection_left_waiting():
    pool = LanePool(slots=1)
    pool.update(lanes(1) + lanes(2))
    stopping = threading.Event()
    first = pool.take(stopping)
    assert first is not None
    assert pool.should_yield(first)  # q2 is due and no slot is free
    pool.done(first, worked=True)
    second = pool.take(stopping)
    assert second is not None and second.rotation.queue == "g/q2"
    assert pool.should_yield(second)  # q1 worked last time: due again


def test_pool__many_busy_collections_on_few_slots_all_get_turns():
    pool = LanePool(slots=2)
    pool.update([lane for pk in range(1, 21) for lane in lanes(pk)])
    stopping = threading.Event()
    served: list[str] = []
    for _ in range(40):  # every collection always has work
        turn = pool.take(stopping)
        assert turn is not None
        served.append(turn.rotation.queue)
        pool.done(turn, worked=True)
    assert sorted(set(served)) == sorted(f"g/q{pk}" for pk in range(1, 21))
    assert all(served.count(q) == 2 for q in set(served))


def test_pool__a_reload_retires_collections_gone_and_adds_new_ones():
    pool = LanePool(slots=2)
    pool.update(lanes(1))
    stopping = threading.Event()
    turn = pool.take(stopping)
    assert turn is not None
    added, retired = pool.update(lanes(2, apps=3))
    assert [r.queue for r in added] == ["g/q2"] and [r.queue for r in retired] == ["g/q1"]
    assert pool.should_yield(turn)  # let the retired collection go after the batch in hand
    pool.done(turn, worked=True)
    nxt = pool.take(stopping)
    assert nxt is not None and nxt.rotation.queue == "g/q2"
    assert len(nxt.rotation.lanes) == 3


def test_pool__take_returns_none_once_stopping(monkeypatch):
    monkeypatch.setattr(pool_module, "MAX_WAIT", 0.05)
    pool = LanePool(slots=1)
    stopping = threading.Event()
    threading.Timer(0.1, stopping.set).start()
    assert pool.take(stopping) is None
