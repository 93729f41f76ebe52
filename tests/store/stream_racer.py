"""An appender or a reader for the stream concurrency tests, run as a real
process (with the test database from ``tests.conftest.subprocess_env()``):

    python -m tests.store.stream_racer append TOPIC_ID SEED GO_FILE BATCHES
    python -m tests.store.stream_racer read TOPIC_ID SEED GO_FILE EXPECTED

Each prints "ready" once connected and starts when GO_FILE exists.
An appender appends BATCHES batches of 1-8 entries (payload ``[seed, n]``),
now and then with an idempotency key it repeats, and prints the offsets it
was given as one JSON line. The reader polls ``stream_read`` from the last
offset it saw until it has seen EXPECTED entries (or 60 s pass) and prints
every page's offsets as one JSON line: the test checks that each page starts
right after the previous one (no gap that a later commit fills) and that no
offset comes twice. Any exception exits non-zero with a traceback.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time


def wait_for(go_file: str) -> None:
    print("ready", flush=True)
    while not os.path.exists(go_file):
        time.sleep(0.002)


def append(topic: object, seed: int, go_file: str, batches: int) -> None:
    from store.streams import StreamEntryIn, stream_append

    rng = random.Random(seed)
    given: list[int] = []
    wait_for(go_file)
    for n in range(batches):
        entries = [StreamEntryIn([seed, n, i]) for i in range(rng.randint(1, 8))]
        key = f"{seed}-{n}"
        entries.append(StreamEntryIn([seed, n, "keyed"], idempotency_key=key))
        given += stream_append(topic=topic, entries=entries)  # type: ignore[arg-type]
        if rng.random() < 0.2:  # a repeat (an outbox retry): the same offset, nothing new
            again = stream_append(topic=topic, entries=[StreamEntryIn("x", key)])  # type: ignore[arg-type]
            assert again == [given[-1]], (again, given[-1])
        time.sleep(rng.uniform(0, 0.003))
    print(json.dumps(given), flush=True)


def read(topic: object, go_file: str, expected: int) -> None:
    from store.streams import stream_read

    pages: list[list[int]] = []
    seen, since = 0, 0
    wait_for(go_file)
    deadline = time.time() + 60
    while seen < expected and time.time() < deadline:
        page = stream_read(topic=topic, since=since, limit=50)  # type: ignore[arg-type]
        if page.entries:
            pages.append([since] + [e.offset for e in page.entries])
            seen += len(page.entries)
            since = page.next_since
    print(json.dumps(pages), flush=True)


def main() -> None:
    mode, topic_id, seed, go_file, count = sys.argv[1:6]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queueproject.settings_test")
    import django

    django.setup()
    from django.db import connection

    from store.models import Topic

    topic = Topic.objects.get(pk=topic_id)
    connection.ensure_connection()
    if mode == "append":
        append(topic, int(seed), go_file, int(count))
    else:
        read(topic, go_file, int(count))


if __name__ == "__main__":
    main()
