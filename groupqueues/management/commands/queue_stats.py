from typing import Any

from django.core.management.base import CommandError

from groupqueues import services
from groupqueues.models import Collection
from principals.services import group_get
from queueproject.commands import ServiceCommand

COLUMNS = ("queue", "depth", "pending", "delayed", "in_flight", "dead", "oldest_pending")


class Command(ServiceCommand):
    help = "Print a depth table of every queue collection, or of GROUP/NAME."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("queue", nargs="?", help="GROUP/NAME (group slug or id)")

    def run(self, *args: Any, **opts: Any) -> None:
        rows = [self._row(q) for q in self._queues(opts["queue"])]
        widths = [max(len(str(r[i])) for r in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
        for row in [COLUMNS, *rows]:
            cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in
                     enumerate(zip(row, widths, strict=True))]  # fmt: skip
            self.stdout.write("  ".join(cells).rstrip())

    def _queues(self, ref: str | None) -> list[Collection]:
        if ref is None:
            return list(
                Collection.objects.queues().select_related("group").order_by("group__slug", "name")
            )
        group_ref, slash, name = ref.rpartition("/")
        if not slash or not group_ref or not name:
            raise CommandError(f"Give the queue as GROUP/NAME, not {ref!r}.")
        return [services.collection_get(group=group_get(ref=group_ref), name=name)]

    def _row(self, queue: Collection) -> tuple[Any, ...]:
        stats = services.collection_stats(collection=queue)
        age = stats.oldest_pending_age_seconds
        return (
            f"{queue.group.slug}/{queue.name}" + (" (paused)" if queue.paused else ""),
            stats.depth, stats.depth_pending, stats.delayed, stats.in_flight, stats.dead,
            "-" if age is None else f"{age:.0f}s",
        )  # fmt: skip
