"""A remote worker process for the black-box tests (not a test module):

    python remote_worker_proc.py URL TOKEN GROUP/QUEUE RECORD_FILE CONCURRENCY BATCH VISIBILITY

Runs ``queueclient.RemoteWorker`` until SIGTERM; its handler appends each
message's id to RECORD_FILE (one line, flushed) and sleeps 2 ms; a payload
``{"fail": true}`` raises instead (nacked)."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))

from queueclient import ClaimedMessage, Client, RemoteWorker


def main() -> None:
    url, token, queue, record, concurrency, batch, visibility = sys.argv[1:8]
    logging.basicConfig(level=logging.WARNING)
    fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def handle(message: ClaimedMessage) -> None:
        if isinstance(message.payload, dict) and message.payload.get("fail"):
            raise RuntimeError("asked to fail")
        os.write(fd, f"{message.id}\n".encode())
        time.sleep(0.002)

    with Client(url, token) as client:
        worker = RemoteWorker(client, queue, handle, concurrency=int(concurrency),
                              batch=int(batch), visibility_timeout=int(visibility),
                              wait_seconds=2)  # fmt: skip
        print("ready", flush=True)
        worker.run()
    print(f"handled {worker.handled} failed {worker.failed}", flush=True)


if __name__ == "__main__":
    main()
