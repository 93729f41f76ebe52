"""A competing consumer of a queue with ordering keys, run as a real process:

    python -m tests.groupqueues.key_worker COLLECTION_ID SEED GO_FILE RECORDER

With the test database from ``tests.conftest.subprocess_env()``. Prints
"ready", waits until GO_FILE exists, then claims random batches of 1-10; for
each batch it writes one ``start`` row per message into the RECORDER table
(after the claim committed), "handles" them, writes one ``end`` row per
message (``acked`` true or false: a random tenth are nacked for an immediate
retry) and only then acks / nacks them. It stops once the queue is empty.
The recorder's rows, in insertion order, are what the test checks.
"""

from __future__ import annotations

import os
import random
import sys
import time


def main() -> None:
    collection_id, seed, go_file, recorder = (
        int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4],
    )  # fmt: skip
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
    worker = f"k{seed}-{os.getpid()}"
    insert = (
        f"INSERT INTO {recorder} (worker, msg, okey, idx, event, acked)"
        " VALUES (%s, %s, %s, %s, %s, %s)"
    )
    while True:
        batch = services.message_claim(collection=queue, worker_id=worker, n=rng.randint(1, 10))
        if not batch:
            if services.collection_depth(collection=queue) == 0:
                return
            time.sleep(0.002)
            continue
        with connection.cursor() as cur:
            cur.executemany(insert, [
                (worker, str(m.id), m.payload["k"], m.payload["i"], "start", None) for m in batch
            ])  # fmt: skip
        nacked = {m.id for m in batch if rng.random() < 0.1}
        with connection.cursor() as cur:
            cur.executemany(insert, [
                (worker, str(m.id), m.payload["k"], m.payload["i"], "end", m.id not in nacked)
                for m in batch
            ])  # fmt: skip
        for m in batch:
            if m.id in nacked:
                services.message_nack(
                    collection=queue, id=m.id, claim_token=m.claim_token, delay_seconds=0
                )
        acks = [(m.id, m.claim_token) for m in batch if m.id not in nacked]
        if acks:
            result = services.message_ack_batch(collection=queue, acks=acks)
            assert result.acked == len(acks), result


if __name__ == "__main__":
    main()
