"""``manage.py queue_workers``: the live worker processes (the registry)."""

from __future__ import annotations

import json
from typing import Any

from queueproject import clock
from queueproject.commands import ServiceCommand
from queueproject.workers_registry import workers_expire, workers_live

COUNT_KEYS = ("claimed", "acked", "retried", "dead", "lease_lost", "delivered", "failed")


class Command(ServiceCommand):
    help = "List the live queue_worker / session_dispatch processes (the worker registry)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="one JSON array")
        parser.add_argument(
            "--expire",
            action="store_true",
            help="first delete the rows of processes not seen for the expiry time",
        )

    def run(self, *args: Any, **opts: Any) -> None:
        if opts["expire"]:
            self.stderr.write(f"expired {workers_expire()} stale row(s)")
        rows = workers_live()
        now = clock.now()
        if opts["json"]:
            data = [
                {
                    "id": r.id,
                    "kind": r.kind,
                    "host": r.host,
                    "pid": r.pid,
                    "queues": r.queues,
                    "version": r.version,
                    "started_at": r.started_at.isoformat(),
                    "last_seen_at": r.last_seen_at.isoformat(),
                    "counts": r.counts,
                }
                for r in rows
            ]
            self.stdout.write(json.dumps(data, indent=2))
            return
        if not rows:
            self.stdout.write("No live workers.")
            return
        for r in rows:
            seen = (now - r.last_seen_at).total_seconds()
            counts = " ".join(f"{k}={r.counts[k]}" for k in COUNT_KEYS if k in r.counts)
            self.stdout.write(
                f"{r.id}  {r.kind}  pid={r.pid}  seen {seen:.0f}s ago  "
                f"queues={','.join(r.queues) or '-'}  {counts}"
            )
