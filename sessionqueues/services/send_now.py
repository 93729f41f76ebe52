"""Send now: claim an exact snapshot of selected entries as one dispatch, then
restore or acknowledge the claim (SPEC §3)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from queueproject import clock
from sessionqueues import exceptions as err
from sessionqueues import positions
from sessionqueues.models import QueuedMessage, SendNowClaim, Session
from sessionqueues.services.common import (
    MERGE_SEPARATOR,
    SessionIdentity,
    as_uuids,
    from_snapshot,
    lock_session,
    restore_row,
    snapshot,
    wake,
)


@dataclass(frozen=True)
class SendNowExpectation:
    """A source the client selected and the content it saw."""

    id: Any
    content: str


def _claim_sources(session: Session, expected: Sequence[SendNowExpectation]) -> list[QueuedMessage]:
    """The selected rows in queue order, or ReservationConflict / ClaimChanged."""
    ids = as_uuids([e.id for e in expected])
    if ids is None or len(set(ids)) != len(ids):
        raise err.ClaimChanged()
    rows = {row.pk: row for row in positions.rows(session).filter(pk__in=ids)}
    if any(row.reserved for row in rows.values()):
        raise err.ReservationConflict()
    for pk, want in zip(ids, expected, strict=True):
        if pk not in rows or rows[pk].content != want.content:
            raise err.ClaimChanged()
    return sorted(rows.values(), key=lambda row: row.position)


def _dispatch(claim: SendNowClaim, sources: list[QueuedMessage]) -> dict[str, Any]:
    return {
        "content": MERGE_SEPARATOR.join(row.content for row in sources),
        "model": sources[0].model,
        "plan_mode": sources[0].plan_mode,
        "attachments": [a for row in sources for a in row.attachments],
        "sources": [str(row.pk) for row in sources],
    }


@transaction.atomic
def queue_send_now_claim(
    *,
    session_id: Any,
    expected: Sequence[SendNowExpectation],
    identity: SessionIdentity | None = None,
) -> tuple[SendNowClaim, dict[str, Any]]:
    """Claim the exact selected entries (content must match what the client
    saw), turn auto-run ON and return (claim, dispatch) whose content joins the
    sources in queue order by blank lines. Ordinary sources are removed, durable
    ones reserved under the claim id. Raises InvalidSessionInput (empty),
    ReservationConflict, ClaimChanged."""
    if not expected:
        raise err.InvalidSessionInput(details={"entries": ["Select at least one entry."]})
    session = lock_session(session_id, identity)
    sources = _claim_sources(session, expected)
    claim = SendNowClaim.objects.create(
        session=session,
        generation=session.generation,
        sources=[snapshot(row) for row in sources],
        created_at=clock.now(),
    )
    QueuedMessage.objects.filter(pk__in=[r.pk for r in sources if not r.durable]).delete()
    QueuedMessage.objects.filter(pk__in=[r.pk for r in sources if r.durable]).update(
        reservation_id=claim.pk, reservation_owner=session.incarnation_id, reserved_at=clock.now()
    )
    if not session.auto_run:
        session.save(update_fields=session.set_auto_run(True, clock.now()))
    return claim, _dispatch(claim, sources)


def _open_claim(session: Session, claim_id: Any) -> SendNowClaim:
    try:
        claim = SendNowClaim.objects.filter(pk=claim_id, session=session).first()
    except ValidationError:
        claim = None
    if claim is None:
        raise err.SessionQueueNotFound("No such send-now claim.")
    return claim


def _durable_sources_intact(session: Session, claim: SendNowClaim) -> bool:
    durable = {uuid.UUID(s["id"]) for s in claim.sources if s["durable"]}
    held = set(positions.rows(session).filter(reservation_id=claim.pk).values_list("pk", flat=True))
    return held == durable


@transaction.atomic
def queue_send_now_restore(
    *, session_id: Any, claim_id: Any, identity: SessionIdentity | None = None
) -> list[QueuedMessage]:
    """Put every source of the claim back at its position (durable ones: clear
    the reservation) or change nothing: a destructive change since the claim
    (session generation moved) or any drift raises ClaimChanged."""
    session = lock_session(session_id, identity)
    claim = _open_claim(session, claim_id)
    ordinary = [s for s in claim.sources if not s["durable"]]
    back_again = positions.rows(session).filter(pk__in=[s["id"] for s in ordinary]).exists()
    if claim.generation != session.generation or back_again:
        raise err.ClaimChanged()
    if not _durable_sources_intact(session, claim):
        raise err.ClaimChanged()
    for data in ordinary:
        restore_row(session, from_snapshot(session, data))
    positions.rows(session).filter(reservation_id=claim.pk).update(
        reservation_id=None, reservation_owner=None, reserved_at=None
    )
    claim.delete()
    wake(session)
    return list(positions.rows(session).filter(pk__in=[s["id"] for s in claim.sources]))


@transaction.atomic
def queue_send_now_acknowledge(
    *, session_id: Any, claim_id: Any, identity: SessionIdentity | None = None
) -> int:
    """Close the claim after the dispatch was accepted: delete its durable
    sources (all of them, or raise ClaimChanged and change nothing)."""
    session = lock_session(session_id, identity)
    claim = _open_claim(session, claim_id)
    if not _durable_sources_intact(session, claim):
        raise err.ClaimChanged()
    removed, _ = positions.rows(session).filter(reservation_id=claim.pk).delete()
    claim.delete()
    return removed
