"""A contender for the lock contention tests, run as a real process:

    python -m tests.store.lock_contender GROUP_ID SEED GO_FILE SECONDS

With the test database from ``tests.conftest.subprocess_env()``. Prints
"ready", waits until GO_FILE exists (so all contenders start together), then
for SECONDS tries the group's lock ``contended`` (TTL 1 s); when it gets it,
holds it a random while, renewing it a few times, and releases it; now and then
it overstays the TTL so that another contender takes over.

Each holding goes into the recorder table ``lock_recorder`` as (token, owner,
started, ended) in wall-clock seconds, covering all the time the holder may
act on it: ``started`` is read after the acquisition returned, ``ended`` is
when it stopped (read before its release) or, if it overstayed, the expiry the
lock service last gave it, whichever came first.
Any exception exits non-zero with a traceback.
"""

from __future__ import annotations

import os
import random
import sys
import time
from typing import Any

TTL = 1.0


def hold(rng: random.Random, group: Any, owner: str) -> tuple[int, float, float] | None:
    """One attempt: (token, started, ended) when the lock was taken, else None."""
    from store.exceptions import LockHeld, LockLost
    from store.locks import lock_acquire, lock_release, lock_renew

    try:
        state = lock_acquire(group=group, name="contended", owner=owner, ttl=TTL)
    except LockHeld:
        return None
    started = stopped = time.time()
    expires = state.expires_at.timestamp()
    try:
        for _ in range(rng.randint(0, 3)):
            time.sleep(rng.uniform(0, 0.05) if rng.random() < 0.9 else TTL * 1.3)
            stopped = time.time()
            renewed = lock_renew(group=group, name="contended", owner=owner, ttl=TTL)
            expires = renewed.expires_at.timestamp()
        time.sleep(rng.uniform(0, 0.02))
        stopped = time.time()
        lock_release(group=group, name="contended", owner=owner)
    except LockLost:
        pass  # overstayed: someone may have taken it over once it expired
    # What this holder was entitled to: until it stopped or its lock expired.
    return state.fencing_token, started, min(stopped, expires)


def main() -> None:
    group_id, seed, go_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    seconds = float(sys.argv[4])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queueproject.settings_test")
    import django

    django.setup()
    from django.db import connection

    from principals.models import Group

    rng = random.Random(seed)
    group = Group.objects.get(pk=group_id)
    owner = f"c{seed}-{os.getpid()}"
    connection.ensure_connection()
    print("ready", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.005)
    deadline = time.time() + seconds
    while time.time() < deadline:
        held = hold(rng, group, owner)
        if held is None:
            time.sleep(rng.uniform(0, 0.01))
            continue
        with connection.cursor() as cur:
            cur.execute(
                "INSERT INTO lock_recorder (token, owner, started, ended) VALUES (%s, %s, %s, %s)",
                [held[0], owner, held[1], held[2]],
            )


if __name__ == "__main__":
    main()
