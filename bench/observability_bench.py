"""Worker drain rate with the observability on and off, interleaved (a script,
not a test; issue 16: "within 5 %").

    .venv/bin/python bench/observability_bench.py [--db postgres|sqlite] [--messages 10000]
                                                  [--rounds 4]

"off": ``QUEUE_WORKER_REGISTRY=0`` (no registry row, no heartbeat thread, no
duration histogram). "on": the registry heartbeating every second (five times
the default rate) with the counters and the histogram, and a scraper thread
rendering ``/metrics`` (the whole text exposition, as the web process does)
every second while the worker drains. Rounds alternate the order (off, on,
on, off, …) so drift on a shared machine falls on both sides. Reported: the
worker's own drain rate (its summary line: first claim to exit) per run, the
median per mode and the ratio on/off.

PostgreSQL: ``BENCH_DATABASE_URL`` (default
postgresql://postgres@127.0.0.1:5432/bench; the database must exist, it is
migrated and the ``bench`` group emptied). SQLite: a scratch file in /tmp.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import worker_bench as wb  # the drain helpers of the worker bench

MODES = {
    "off": {"QUEUE_WORKER_REGISTRY": "0"},
    "on": {"QUEUE_WORKER_REGISTRY": "1", "QUEUE_WORKER_HEARTBEAT_SECONDS": "1"},
}


def run_once(url: str, n: int, mode: str) -> float:
    """Enqueue ``n``, drain with one worker process in ``mode``: msgs/s."""
    from queueproject import metrics

    queue = wb.fresh_queue()
    wb.enqueue_n(queue, n)
    saved = dict(os.environ)
    os.environ.update(MODES[mode])  # wb.drain copies os.environ into the worker's
    stop = threading.Event()
    scraper = threading.Thread(target=_scrape_until, args=(stop, metrics.render), daemon=True)
    if mode == "on":
        scraper.start()
    try:
        _, _, outs = wb.drain(url, 1, 1)
    finally:
        stop.set()
        os.environ.clear()
        os.environ.update(saved)
    if scraper.is_alive():
        scraper.join()
    return n / wb._seconds_reported(outs[0])


def _scrape_until(stop: threading.Event, render: object) -> None:
    from django.db import connections

    try:
        while not stop.wait(1.0):
            render()  # type: ignore[operator]
    finally:
        connections.close_all()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4, help="pairs of runs (off+on)")
    args = parser.parse_args()
    url = wb.PG_URL if args.db == "postgres" else wb.SQLITE_URL
    wb.setup_django(url)
    rates: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(args.rounds):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        for mode in order:
            rate = run_once(url, args.messages, mode)
            rates[mode].append(rate)
            print(f"  round {r + 1} {mode:>3}: {rate:,.0f} msg/s", flush=True)
    off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
    print(f"== {args.db}, {args.messages} msgs, {args.rounds} interleaved rounds: "
          f"median off {off:,.0f} msg/s, on {on:,.0f} msg/s, on/off {on / off:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
