from typing import Any

from queueproject.commands import ServiceCommand, positive_int
from queueproject.session_limits import install_session_limits
from sessionqueues.dispatcher import MAX_CONCURRENCY, Dispatcher


class Command(ServiceCommand):
    help = (
        "Deliver queued entries of sessions whose auto-run is on and whose agent is ready, "
        "one at a time per session, through a deliverer (default: the app's signed webhook). "
        "Recovers reservations of crashed dispatchers at start and every few seconds "
        "(docs/session-dispatch.md)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--deliverer", default="webhook", help="registered deliverer name")
        parser.add_argument("--session", default=None, help="only this session id")
        parser.add_argument("--once", action="store_true", help="one pass, then exit")
        parser.add_argument(
            "--until-empty", action="store_true", help="exit once nothing is deliverable"
        )
        parser.add_argument("--max-deliveries", type=positive_int, default=None)
        parser.add_argument(
            "--concurrency",
            type=positive_int,
            default=1,
            help=f"deliveries in flight at once, to different sessions (1…{MAX_CONCURRENCY}; "
            "database connections: N + 3)",
        )
        parser.add_argument(
            "--at-most-once",
            action="store_true",
            help="mark each delivery attempted when reserved: a failed or interrupted "
            "delivery is dropped, never repeated",
        )
        parser.add_argument(
            "--worker-id",
            default=None,
            help="this process's id (default host-pid); restarting under the id of a "
            "crashed dispatcher recovers its reservations at once",
        )

    def run(self, *args: Any, **opts: Any) -> None:
        install_session_limits()  # idle-in-transaction and statement timeouts (PostgreSQL)
        dispatcher = Dispatcher(
            deliverer_name=opts["deliverer"],
            session_id=self._session_id(opts["session"]),
            once=opts["once"],
            until_empty=opts["until_empty"],
            max_deliveries=opts["max_deliveries"],
            concurrency=opts["concurrency"],
            at_most_once=opts["at_most_once"],
            worker_id=opts["worker_id"],
        )
        dispatcher.install_signal_handlers()
        dispatcher.run()
        stats = dispatcher.stats
        self.stdout.write(
            f"delivered={stats.delivered} released={stats.released} dropped={stats.dropped}"
        )

    def _session_id(self, raw: str | None) -> Any:
        if raw is None:
            return None
        from sessionqueues.selectors import session_get

        return session_get(session_id=raw).pk
