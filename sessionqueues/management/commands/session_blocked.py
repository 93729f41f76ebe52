import getpass
import os
from typing import Any

from django.core.management.base import CommandError

from groupqueues.cli import OpsCommand
from principals.services import app_get
from queueproject import clock
from queueproject.commands import positive_int
from sessionqueues import selectors, services
from sessionqueues.models import AuditRecord, AuditVia, Session
from sessionqueues.serializers import AuditRecordSerializer, BlockedHeadSerializer

DEFAULT_LIMIT = 100


def operator() -> str:
    """``cli:<login>``: who ran the command, for the audit record."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no login name (a container's bare uid)
        return f"cli:uid-{os.getuid()}"


class Command(OpsCommand):
    help = (
        "Sessions whose head cannot move (auto-run paused with entries waiting, agent not ready "
        "too long, deliveries failing, a reservation held past the deadline), longest blocked "
        "first, with each reason and its age; or, with --session, one audited action: "
        "--release-reservation, --skip-head or --resume-auto-run."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--app", help="only this app's sessions (slug or id)")
        parser.add_argument(
            "--reason", choices=[r.value for r in selectors.BlockedReason], help="only this reason"
        )
        parser.add_argument(
            "--min-age", type=int, help="seconds each reason must have lasted (default: settings)"
        )
        parser.add_argument("--limit", type=positive_int, default=DEFAULT_LIMIT)
        parser.add_argument("--session", help="act on this session")
        acts = parser.add_mutually_exclusive_group()
        acts.add_argument("--release-reservation", metavar="RESERVATION_ID")
        acts.add_argument("--skip-head", action="store_true")
        acts.add_argument("--resume-auto-run", action="store_true")
        parser.add_argument("--head", help="with --skip-head: the head you saw")
        parser.add_argument("--note", default="", help="recorded with the action")

    def run(self, *args: Any, **opts: Any) -> None:
        acting = opts["release_reservation"] or opts["skip_head"] or opts["resume_auto_run"]
        if acting:
            if not opts["session"]:
                raise CommandError("An action needs --session.")
            self.act(opts)
        elif opts["session"] or opts["head"] or opts["note"]:
            raise CommandError(
                "--session, --head and --note go with --release-reservation, --skip-head "
                "or --resume-auto-run."
            )
        else:
            self.show(opts)

    def show(self, opts: dict[str, Any]) -> None:
        if opts["min_age"] is not None and not 0 <= opts["min_age"] <= selectors.MAX_MIN_AGE:
            raise CommandError(f"--min-age must be 0 to {selectors.MAX_MIN_AGE} seconds.")
        sessions = Session.objects.all()
        if opts["app"]:
            sessions = sessions.filter(task__app=app_get(ref=opts["app"]))
        ages = selectors.BlockedAges.configured(opts["min_age"])
        reason = selectors.BlockedReason(opts["reason"]) if opts["reason"] else None
        now = clock.now()
        rows = selectors.blocked_sessions(sessions=sessions, reason=reason, ages=ages, now=now)
        heads = selectors.blocked_heads(page=list(rows[: opts["limit"]]), ages=ages, now=now)
        data = BlockedHeadSerializer(heads, many=True).data
        lines = [_line(head) for head in heads] or ["No blocked session heads."]
        self.emit(opts, data, "\n".join(lines))

    def act(self, opts: dict[str, Any]) -> None:
        session = selectors.session_get(session_id=opts["session"])
        actor = services.Actor(label=operator(), via=AuditVia.COMMAND)
        record = self.perform(session, opts, actor)
        text = f"{record.get_action_display().capitalize()} of {session.pk}: {record.details}"
        self.emit(opts, AuditRecordSerializer(record).data, text)

    def perform(self, session: Session, opts: dict[str, Any], actor: Any) -> AuditRecord:
        note = opts["note"]
        if opts["release_reservation"]:
            return services.reservation_release_stuck(
                session_id=session.pk,
                reservation_id=opts["release_reservation"],
                actor=actor,
                note=note,
            )
        if opts["skip_head"]:
            return services.queue_skip_head(
                session_id=session.pk, head_id=opts["head"], actor=actor, note=note
            )
        return services.session_resume_auto_run(session_id=session.pk, actor=actor, note=note)


def _line(head: selectors.BlockedHead) -> str:
    session = head.session
    reasons = ", ".join(f"{b.reason} {b.age_seconds:.0f}s{_extra(b)}" for b in head.blockers)
    return (
        f"{session.pk} app={session.task.app.slug} task={session.task_id} "
        f"waiting={head.waiting}: {reasons}"
    )


def _extra(blocker: selectors.Blocker) -> str:
    if blocker.reason is selectors.BlockedReason.DELIVERY_FAILING:
        return f" ({blocker.details['failures']} failures: {blocker.details['last_error'][:80]})"
    if blocker.reason is selectors.BlockedReason.RESERVATION_STUCK:
        ids = " ".join(str(r["reservation_id"]) for r in blocker.details["reservations"])
        return f" (reservation {ids})"
    return ""
