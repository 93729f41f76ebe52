"""``manage.py session_recover``: settle reservations whose holder or owner
incarnation is gone (docs/session-dispatch.md). ``session_dispatch`` runs the
same pass at start and every few seconds; this command is for an operator
(after a host died, or to see what a pass would do with ``--dry-run``)."""

from __future__ import annotations

import json
from typing import Any

from queueproject.commands import ServiceCommand
from sessionqueues import services
from sessionqueues.services.recovery import Action


class Command(ServiceCommand):
    help = (
        "Release or drop the session-queue reservations whose holder (a crashed "
        "session_dispatch) or owner incarnation (a re-created session) is gone, and "
        "remove lifecycle entries of purged generations."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--holder",
            action="append",
            default=[],
            metavar="WORKER_ID",
            help="take this dispatcher for gone even if the worker registry still lists it "
            "(its host is known dead); repeatable",
        )
        parser.add_argument("--dry-run", action="store_true", help="show, change nothing")
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")

    def run(self, *args: Any, **opts: Any) -> None:
        recovered = services.reservation_recover(gone=opts["holder"], dry_run=opts["dry_run"])
        counts = {action.value: 0 for action in Action}
        for item in recovered:
            counts[item.action.value] += 1
        if opts["json"]:
            data = {
                "dry_run": opts["dry_run"],
                "counts": counts,
                "entries": [item.as_dict() for item in recovered],
            }
            self.stdout.write(json.dumps(data, indent=2))
            return
        verb = "would be" if opts["dry_run"] else "was"
        for item in recovered:
            self.stdout.write(
                f"entry {item.entry_id} of session {item.session_id} (position "
                f"{item.position}) {verb} {item.action.value}: {item.reason.value}"
                + (f", holder {item.holder}" if item.holder else "")
            )
        summary = " ".join(f"{name}={n}" for name, n in counts.items())
        self.stdout.write(summary + (" (dry run)" if opts["dry_run"] else ""))
