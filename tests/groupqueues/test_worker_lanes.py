"""Rotations: which consumer (lane) of a collection each claim is made as
(issue 19: round robin, a turn spent only by a claim that brought messages)."""

from __future__ import annotations

import threading
from collections import Counter

from groupqueues.models import Collection
from groupqueues.worker import Lane, Rotation
from groupqueues.worker.lanes import lanes_by_claim

JOBS = Collection(id=1, name="jobs")


def lane(app: str | None, *, handler: str = "noop", trigger: int | None = 1,
         concurrency: int = 1, batch: int = 10, collection: Collection = JOBS) -> Lane:  # fmt: skip
    return Lane(collection, "g/jobs", handler, batch=batch, concurrency=concurrency,
                visibility_timeout=30, app_slug=app, trigger_id=trigger)  # fmt: skip


def test_rotation__claims_go_round_the_lanes_in_a_fixed_order():
    rotation = Rotation([lane("c"), lane("a"), lane("b")], slots=4, start=0)
    assert [rotation.next().app_slug for _ in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]


def test_rotation__every_lane_is_served_once_per_round_across_threads():
    """Four slots at once: over 1,000 non-empty claims each of 500 lanes gets
    exactly two."""
    apps = [f"app-{i:03d}" for i in range(500)]
    rotation = Rotation([lane(a) for a in apps], slots=4)
    served: Counter[str] = Counter()
    lock = threading.Lock()

    def slot() -> None:
        for _ in range(250):
            picked = rotation.next()  # a claim brought messages: its turn
            with lock:
                served[picked.app_slug or ""] += 1

    threads = [threading.Thread(target=slot) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert served == dict.fromkeys(apps, 2)


def test_rotation__a_reload_keeps_the_place_and_drops_lanes_gone():
    a, b, c, d = lane("a"), lane("b"), lane("c"), lane("d")
    rotation = Rotation([a, b, c], slots=4, start=0)
    assert [rotation.next(), rotation.next()] == [a, b]
    rotation.set_lanes([a, c, d])  # app b went, d came
    assert [rotation.next().app_slug for _ in range(4)] == ["c", "d", "a", "c"]
    rotation.set_lanes([a, b])  # c and d went: after c comes a again
    assert [rotation.next().app_slug for _ in range(3)] == ["a", "b", "a"]


def test_rotation__consumers_of_different_triggers_take_turns_with_their_own_handler():
    lanes = [lane("a", handler="email", trigger=1), lane(None, handler="audit", trigger=2)]
    rotation = Rotation(lanes, slots=8, start=0)
    assert [rotation.next().handler_name for _ in range(4)] == ["audit", "email"] * 2


def test_rotation__cap_is_the_sum_of_its_triggers_concurrency_within_the_slots():
    many = [lane(f"a{i}", concurrency=3, trigger=1) for i in range(50)]
    assert Rotation(many, slots=8).cap == 3  # one trigger's consumers count once
    other = [lane(None, handler="audit", concurrency=2, trigger=2)]
    assert Rotation(many + other, slots=8).cap == 5
    assert Rotation(many + other, slots=4).cap == 4


def test_lanes_by_claim__lanes_that_claim_alike_share_a_rotation():
    one = [lane("a"), lane("b"), lane(None, handler="audit", trigger=2)]
    other = [lane(None, handler="bulk", trigger=3, batch=100)]
    elsewhere = [lane("a", collection=Collection(id=2, name="mail"))]
    groups = lanes_by_claim(one + other + elsewhere)
    assert sorted(len(g) for g in groups.values()) == [1, 1, 3]
