"""A competing consumer for the concurrency tests, run as a real process:

    python -m tests.groupqueues.claim_worker COLLECTION_ID SEED GO_FILE

With the test database from ``tests.conftest.subprocess_env()``. Prints
"ready", waits until GO_FILE exists (so all workers start together), then claims
random batches of 1-10 and acks them (single acks, a batch ack, or single acks
and the last one acked together with the next claim) until a claim comes back
empty. Prints one line per claimed message: ``<id> <acked 0|1>``.
Any exception (e.g. "database is locked") exits non-zero with a traceback.
"""

from __future__ import annotations

import os
import random
import sys
import time


def main() -> None:
    collection_id, seed, go_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queueproject.settings_test")
    import django

    django.setup()
    from django.db import connection

    from groupqueues import services
    from groupqueues.models import Collection

    rng = random.Random(seed)
    queue = Collection.objects.get(pk=collection_id)
    connection.ensure_connection()
    print("ready", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.005)
    out = []
    worker = f"w{seed}-{os.getpid()}"
    empty = 0
    batch = None
    while empty < 2:  # a second empty answer: nothing left (claims are not lost)
        if batch is None:
            batch = services.message_claim(collection=queue, worker_id=worker, n=rng.randint(1, 10))
        if not batch:
            empty += 1
            batch = None
            continue
        empty = 0
        way = rng.random()
        if way < 1 / 4:
            for m in batch:
                services.message_ack(collection=queue, id=m.id, claim_token=m.claim_token)
                out.append(f"{m.id} 1")
            batch = None
        elif way < 2 / 4:
            result = services.message_ack_batch(
                collection=queue, acks=[(m.id, m.claim_token) for m in batch]
            )
            out += [f"{r.id} {int(r.acked)}" for r in result.results]
            batch = None
        elif way < 3 / 4:  # ack the last one and claim the next batch in the same statement
            for m in batch[:-1]:
                services.message_ack(collection=queue, id=m.id, claim_token=m.claim_token)
                out.append(f"{m.id} 1")
            last = batch[-1]
            both = services.message_ack_and_claim(
                collection=queue, id=last.id, claim_token=last.claim_token, worker_id=worker,
                n=rng.randint(1, 10),
            )  # fmt: skip
            out.append(f"{last.id} {int(both.acked)}")
            batch = both.messages
        else:  # ack the whole batch and claim the next in the same statement
            together = services.message_ack_batch_and_claim(
                collection=queue, acks=[(m.id, m.claim_token) for m in batch], worker_id=worker,
                n=rng.randint(1, 10),
            )  # fmt: skip
            out += [f"{r.id} {int(r.acked)}" for r in together.acks.results]
            batch = together.messages
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))


if __name__ == "__main__":
    main()
