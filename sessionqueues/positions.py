"""Queue positions of one session: the caller holds the session's lock row.

Positions are positive and unique per session (a unique constraint checked row
by row on both databases), so every move first parks the affected rows far
above the live range and then brings them down: no statement ever makes two
rows collide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, F, Max, Q

from sessionqueues.models import QueuedMessage, QueuedMessageQuerySet, Session

# Far above any live position (a PositiveIntegerField tops out near 2.1e9).
PARK_OFFSET = 1_000_000_000


def rows(session: Session) -> QueuedMessageQuerySet:
    """All stored rows of the session, reserved ones included."""
    return QueuedMessage.objects.filter(session=session)


def tail_position(session: Session) -> int:
    """The highest position in use (0 for an empty queue)."""
    return rows(session).aggregate(top=Max("position"))["top"] or 0


@dataclass(frozen=True)
class Tail:
    """What an insert at the tail needs: the highest position in use (0 for an
    empty queue) and how many rows are visible (the cap counts those)."""

    position: int
    visible: int


def tail(session: Session) -> Tail:
    """Both numbers in one aggregate query."""
    found = rows(session).aggregate(
        top=Max("position"), visible=Count("pk", filter=Q(reservation_id__isnull=True))
    )
    return Tail(position=found["top"] or 0, visible=found["visible"])


def last_row(session: Session) -> QueuedMessage | None:
    """The last stored row (reserved included: a reserved tail is no merge target)."""
    return rows(session).order_by("-position").first()


def open_slot(session: Session, position: int) -> None:
    """Make ``position`` free: when taken, shift that row and every row behind it
    one step back. Two statements: park, then bring down."""
    if not rows(session).filter(position=position).exists():
        return
    moving = rows(session).filter(position__gte=position)
    moving.update(position=F("position") + PARK_OFFSET + 1)
    rows(session).filter(position__gt=PARK_OFFSET).update(position=F("position") - PARK_OFFSET)


def free_slot_before(session: Session, head: QueuedMessage) -> int:
    """A position directly before ``head``: ``head - 1`` when free and positive,
    otherwise ``head``'s own after shifting it and everything behind it back."""
    wanted = head.position - 1
    if wanted > 0 and not rows(session).filter(position=wanted).exists():
        return wanted
    open_slot(session, head.position)
    return head.position


def renumber(session: Session, ordered: Sequence[QueuedMessage]) -> None:
    """Give ``ordered`` (every row of the session) the positions 1..N in that order."""
    if not ordered:
        return
    rows(session).update(position=F("position") + PARK_OFFSET)
    for index, row in enumerate(ordered, start=1):
        row.position = index
    QueuedMessage.objects.bulk_update(list(ordered), ["position"])


def swap(session: Session, first: QueuedMessage, second: QueuedMessage) -> None:
    """Exchange the positions of two rows of the session (three statements:
    park one, move the other, bring the first down)."""
    a, b = first.position, second.position
    rows(session).filter(pk=first.pk).update(position=a + PARK_OFFSET)
    rows(session).filter(pk=second.pk).update(position=a)
    rows(session).filter(pk=first.pk).update(position=b)
    first.position, second.position = b, a
