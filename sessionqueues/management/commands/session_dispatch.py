from typing import Any

from queueproject.commands import ServiceCommand, positive_int
from queueproject.session_limits import install_session_limits
from sessionqueues.dispatcher import Dispatcher


class Command(ServiceCommand):
    help = (
        "Deliver queued entries of sessions whose auto-run is on and whose agent is ready, "
        "one at a time, through a deliverer (default: the app's signed webhook)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--deliverer", default="webhook", help="registered deliverer name")
        parser.add_argument("--session", default=None, help="only this session id")
        parser.add_argument("--once", action="store_true", help="one pass, then exit")
        parser.add_argument(
            "--until-empty", action="store_true", help="exit once nothing is deliverable"
        )
        parser.add_argument("--max-deliveries", type=positive_int, default=None)

    def run(self, *args: Any, **opts: Any) -> None:
        install_session_limits()  # idle-in-transaction and statement timeouts (PostgreSQL)
        dispatcher = Dispatcher(
            deliverer_name=opts["deliverer"],
            session_id=self._session_id(opts["session"]),
            once=opts["once"],
            until_empty=opts["until_empty"],
            max_deliveries=opts["max_deliveries"],
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
