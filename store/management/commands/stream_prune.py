"""``manage.py stream_prune``: apply every topic's retention once (age and
count); prints the entries deleted. The maintenance pass calls the same
``store.streams.streams_prune``."""

from __future__ import annotations

from typing import Any

from queueproject.commands import ServiceCommand
from store import streams


class Command(ServiceCommand):
    help = "Delete the stream entries past their topic's retention (one pass)."

    def run(self, *args: Any, **opts: Any) -> None:
        total = 0
        while pruned := streams.streams_prune():  # PRUNE_BATCH per topic per pass
            total += pruned
        self.stdout.write(f"Pruned {total} entries.")
