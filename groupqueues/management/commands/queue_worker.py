"""``manage.py queue_worker``: run group queue consumers (see groupqueues.worker)."""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.core.management.base import CommandError

from groupqueues import services
from groupqueues.handlers import handlers
from groupqueues.models import Collection, Consumer
from groupqueues.validation import check_worker_id
from groupqueues.worker import (
    Lane,
    Worker,
    WorkerOptions,
    connections_needed,
    lanes_for_handler,
    lanes_of_consumers,
    poll_mode,
)
from groupqueues.worker.supervisor import AUX_CONNECTIONS
from principals.services import app_get, group_get
from queueproject import notify
from queueproject.commands import ServiceCommand, positive_int
from queueproject.conf import product_settings
from queueproject.logging_json import json_logs
from queueproject.runner import default_worker_id
from queueproject.session_limits import install_session_limits, name_connections

logger = logging.getLogger("groupqueues.worker")


class Command(ServiceCommand):
    help = (
        "Run queue consumers: every enabled trigger's consumers, those of --queue, "
        "or --handler on the --queue queues without a trigger."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            default=[],
            metavar="GROUP/NAME",
            help="a queue to consume (repeatable); default: all consumers",
        )
        parser.add_argument(
            "--app",
            action="append",
            default=[],
            metavar="SLUG",
            help="only the consumers of this app (repeatable)",
        )
        parser.add_argument("--handler", help="run this registered handler on the --queue queues")
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            help="slot threads of this worker, however many consumers it serves (default "
            "QUEUE_WORKER_CONCURRENCY); also the most one queue may take at once (default: "
            "its triggers' concurrency)",
        )
        parser.add_argument("--batch", type=positive_int, help="messages per claim (max 100)")
        parser.add_argument("--max-messages", type=positive_int, help="stop after N messages")
        parser.add_argument(
            "--until-empty",
            action="store_true",
            help="stop once nothing is claimable and nothing is in flight",
        )
        parser.add_argument("--worker-id", default=None, help="claimed_by (default host-pid)")
        parser.add_argument(
            "--grace",
            type=float,
            default=None,
            help="seconds to let running handlers finish after a signal",
        )
        parser.add_argument("--no-maintenance", action="store_true",
                            help="do not take part in maintenance leadership")  # fmt: skip

    def run(self, *args: Any, **opts: Any) -> None:
        concurrency = opts["concurrency"] or product_settings().worker_concurrency
        connections = self._check_connection_budget(concurrency)
        if opts["batch"] and opts["batch"] > services.MAX_CLAIM:
            raise CommandError(f"--batch is at most {services.MAX_CLAIM}.")
        if opts["worker_id"] is not None:
            check_worker_id(opts["worker_id"])
        worker_id = opts["worker_id"] or default_worker_id()
        name_connections(f"queue_worker {worker_id}")  # pg_stat_activity.application_name
        install_session_limits()  # idle-in-transaction and statement timeouts (PostgreSQL)
        queues = [self._collection(ref) for ref in opts["queue"]]
        lanes, source = self._lanes(queues, opts)
        grace = opts["grace"] if opts["grace"] is not None else (
            product_settings().worker_grace_seconds)  # fmt: skip
        options = WorkerOptions(
            worker_id=worker_id, concurrency=concurrency, max_messages=opts["max_messages"],
            until_empty=opts["until_empty"], grace=grace,
            maintenance=not opts["no_maintenance"], reload=source is not None,
            progress=sys.stderr if opts["until_empty"] and not json_logs() else None,
        )  # fmt: skip
        if not lanes and source is None:
            raise CommandError("Nothing to run: no consumers for the given queues.")
        worker = Worker(lanes, options, lane_source=source)
        logger.info("worker %s: %d consumer(s) on %d slot(s), at most %d database connections, "
                    "waking by %s", worker_id, len(lanes), concurrency, connections,
                    poll_mode())  # fmt: skip
        worker.install_signal_handlers()
        worker.run()
        if opts["until_empty"] or opts["max_messages"]:
            self.stdout.write(worker.summary())
        if worker.timed_out:
            raise CommandError("Stopped with handlers still running after the grace period.")

    @staticmethod
    def _check_connection_budget(concurrency: int) -> int:
        """The connections this worker may open (``connections_needed``); a
        CommandError when that is over QUEUE_WORKER_MAX_CONNECTIONS."""
        listen = notify.listen_available()
        needed = connections_needed(concurrency=concurrency, listen=listen)
        budget = product_settings().worker_max_connections
        if 0 < budget < needed:
            raise CommandError(
                f"This worker needs up to {needed} database connections ({concurrency} slots + "
                f"{AUX_CONNECTIONS}{' + 1 for LISTEN' if listen else ''}), over "
                f"QUEUE_WORKER_MAX_CONNECTIONS={budget}: lower --concurrency or raise the budget."
            )
        return needed

    @staticmethod
    def _collection(ref: str) -> Collection:
        group_slug, sep, name = ref.partition("/")
        if not sep or not group_slug or not name:
            raise CommandError(f"--queue {ref!r}: use GROUP/NAME.")
        return services.collection_get(group=group_get(ref=group_slug), name=name)

    def _lanes(self, queues: list[Collection], opts: dict[str, Any]) -> tuple[list[Lane], Any]:
        """The lanes, and a source to reload them from (None when fixed)."""
        if opts["handler"]:
            if not queues:
                raise CommandError("--handler needs at least one --queue GROUP/NAME.")
            if opts["app"]:
                raise CommandError(
                    "--app selects trigger consumers; it does not go with --handler."
                )
            if opts["handler"] not in handlers.names():
                raise CommandError(
                    f"Unknown handler {opts['handler']!r}; known: {', '.join(handlers.names())}."
                )
            lanes = lanes_for_handler(queues, opts["handler"], batch=opts["batch"] or 10,
                                      concurrency=opts["concurrency"] or 1)  # fmt: skip
            return lanes, None
        wanted = {f"{c.group.slug}/{c.name}" for c in queues} if queues else None
        consumers = Consumer.objects.runnable()
        if opts["app"]:
            apps = [app_get(ref=slug) for slug in opts["app"]]
            consumers = consumers.filter(app__in=apps)

        def source() -> list[Lane]:
            return lanes_of_consumers(
                consumers.all(), queues=wanted, batch=opts["batch"],
                concurrency=opts["concurrency"],
            )  # fmt: skip

        lanes = source()
        if (queues or opts["app"]) and not lanes:
            raise CommandError("No enabled trigger consumes the given queues or apps.")
        return lanes, source
