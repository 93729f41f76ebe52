"""Notify channels (SPEC §6): fan-out of notifications to every listener
attached before the publish, in publish order per channel, no replay for late
listeners, retention by age and by count.

Ordering. ``publish`` bumps the channel's ``last_seq`` with one UPDATE (the
row lock on PostgreSQL, the database write lock on SQLite), held until its
transaction commits, and stores the notification with that sequence number.
So sequence numbers are dense per channel and commit in order: a listener that
has read up to N never later finds a notification below N appear.

Attaching. A listener first subscribes to the channel's wake-up
(``queueproject.notify``: LISTEN on PostgreSQL, polling elsewhere), then reads
the channel's head (:func:`channel_head`): it receives every notification with
a higher sequence number, i.e. every one that committed after it attached.
A reconnecting listener passes the last sequence it saw (SSE ``Last-Event-ID``)
instead and resumes after it, without loss inside the retention window.

Retention. Count: ``publish`` deletes the channel's notifications older than
the newest ``NOTIFY_RETENTION_COUNT`` in its own transaction (one indexed
DELETE of about one row, so a channel never grows past the bound). Age:
:func:`notifications_prune` deletes those older than
``NOTIFY_RETENTION_SECONDS``; the store's scheduler loop (``store.schedule_tick``,
one leader, every worker runs it) calls it every ``NOTIFY_PRUNE_INTERVAL``
seconds. That loop, not queue maintenance, because channels are a store
primitive and the store already has its one-leader tick: no hook into the
queue app is needed.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as dj
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F

from groupqueues import validation as check
from groupqueues.models import COLLECTION_NAME_VALIDATOR
from principals.models import Group
from queueproject import clock, notify, sse
from queueproject.conf import product_settings
from queueproject.exceptions import PayloadTooLarge
from store.exceptions import ChannelExists, ChannelNotFound, InvalidChannelInput
from store.models import Channel, Notification, channel_wake_name

IDEMPOTENCY_KEY_MAX = 200
READ_LIMIT = 100  # notifications per fetch of a listener
DEFAULT_RETENTION_SECONDS = 3600.0
DEFAULT_RETENTION_COUNT = 1000
DEFAULT_MAX_PAYLOAD_BYTES = 65536
DEFAULT_PRUNE_INTERVAL = 10.0


@dataclass(frozen=True)
class Retention:
    seconds: float
    count: int


def retention() -> Retention:
    """The retention window (settings ``NOTIFY_RETENTION_SECONDS``, default an
    hour, and ``NOTIFY_RETENTION_COUNT``, default 1000 per channel)."""
    return Retention(
        seconds=float(getattr(dj, "NOTIFY_RETENTION_SECONDS", DEFAULT_RETENTION_SECONDS)),
        count=max(1, int(getattr(dj, "NOTIFY_RETENTION_COUNT", DEFAULT_RETENTION_COUNT))),
    )


def max_payload_bytes() -> int:
    return int(getattr(dj, "NOTIFY_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES))


def prune_interval() -> float:
    return float(getattr(dj, "NOTIFY_PRUNE_INTERVAL", DEFAULT_PRUNE_INTERVAL))


def wake_name(channel: Channel | int) -> str:
    """The wake-up channel of a notify channel (``queueproject.notify``)."""
    return channel_wake_name(channel.pk if isinstance(channel, Channel) else channel)


# ------------------------------------------------------------------ reads


def channel_get(*, group: Group, name: str) -> Channel:
    """The channel ``name`` of ``group``. Raises ChannelNotFound."""
    found = Channel.objects.filter(group=group, name=name).select_related("group").first()
    if found is None:
        raise ChannelNotFound(f"Group {group.slug!r} has no channel {name!r}.")
    return found


def channels_of(*, group: Group) -> list[Channel]:
    """The channels of a group, by name."""
    return list(Channel.objects.filter(group=group).select_related("group").order_by("name"))


def channel_head(*, channel: Channel | int) -> int:
    """The sequence number of the channel's latest committed notification (0:
    none yet). A listener attaching now receives everything above it."""
    pk = channel.pk if isinstance(channel, Channel) else channel
    head = Channel.objects.filter(pk=pk).values_list("last_seq", flat=True).first()
    if head is None:
        raise ChannelNotFound("The channel was deleted.")
    return head


def notifications_after(
    *, channel: Channel | int, after: int, limit: int = READ_LIMIT
) -> list[Notification]:
    """The retained notifications above ``after``, oldest first, at most ``limit``."""
    pk = channel.pk if isinstance(channel, Channel) else channel
    rows = Notification.objects.filter(channel_id=pk, seq__gt=after).order_by("seq")
    return list(rows[:limit])


def notifications_retained(*, channel: Channel) -> int:
    """How many notifications the channel keeps now (admin, detail)."""
    return Notification.objects.filter(channel=channel).count()


# ------------------------------------------------------------------ writes


def channel_create(*, group: Group, name: str) -> Channel:
    """Create the channel ``name`` of ``group``. Raises InvalidChannelInput for a
    bad name, ChannelExists (409) when the group has one of that name."""
    _check_name(name)
    try:
        with transaction.atomic():
            return Channel.objects.create(group=group, name=name)
    except IntegrityError:
        raise ChannelExists(f"Group {group.slug!r} already has a channel {name!r}.") from None


def channel_delete(*, channel: Channel) -> None:
    """Delete the channel and its notifications (listeners' streams end)."""
    with transaction.atomic():
        Channel.objects.filter(pk=channel.pk).delete()
        notify.notify(wake_name(channel))


def channel_purge(*, channel: Channel) -> int:
    """Delete every retained notification of the channel (a reconnecting
    listener then resumes at the head); the sequence keeps counting. Returns
    how many were deleted."""
    with transaction.atomic():
        deleted, _ = Notification.objects.filter(channel=channel).delete()
    return deleted


def publish(*, channel: Channel, payload: Any, idempotency_key: str | None = None) -> Notification:
    """Publish ``payload`` (JSON) on ``channel``; every listener attached
    before this commits receives it. Its own transaction (or the caller's, when
    inside one: then it is delivered when that commits).

    With ``idempotency_key`` a second publish with the same key while the first
    is retained returns the first notification and publishes nothing (the
    outbox relay delivers exactly once this way). Raises InvalidQueueInput
    (field ``payload``) for JSON PostgreSQL cannot store, PayloadTooLarge (413)
    past ``NOTIFY_MAX_PAYLOAD_BYTES``, InvalidChannelInput for a bad key,
    ChannelNotFound when the channel was deleted."""
    text = check.payload_json(payload, max_depth=_max_depth())
    if len(text.encode()) > max_payload_bytes():
        raise PayloadTooLarge(f"The payload exceeds {max_payload_bytes()} bytes.")
    _check_key(idempotency_key)
    with transaction.atomic():
        # The UPDATE takes the channel's lock until commit: publishes of one
        # channel serialise here, so seq order is commit order.
        if not Channel.objects.filter(pk=channel.pk).update(last_seq=F("last_seq") + 1):
            raise ChannelNotFound("The channel was deleted.")
        if idempotency_key is not None:
            earlier = Notification.objects.filter(
                channel=channel, idempotency_key=idempotency_key
            ).first()
            if earlier is not None:
                transaction.set_rollback(True)  # undo the bump: nothing published
                return earlier
        seq = channel_head(channel=channel)
        note = Notification.objects.create(
            channel=channel, seq=seq, payload=payload, idempotency_key=idempotency_key,
            published_at=clock.now(),
        )  # fmt: skip
        keep = retention().count
        Notification.objects.filter(channel=channel, seq__lte=seq - keep).delete()
        notify.notify(wake_name(channel))
        transaction.on_commit(functools.partial(sse.wake_local, wake_name(channel)))
    channel.last_seq = seq
    return note


def notifications_prune(*, now: datetime | None = None) -> int:
    """Delete notifications older than ``NOTIFY_RETENTION_SECONDS`` (every
    channel) and past ``NOTIFY_RETENTION_COUNT`` per channel; returns how many."""
    cutoff = (now or clock.now()) - timedelta(seconds=retention().seconds)
    keep = retention().count
    with transaction.atomic():
        old, _ = Notification.objects.filter(published_at__lt=cutoff).delete()
        over, _ = Notification.objects.filter(seq__lte=F("channel__last_seq") - keep).delete()
    return old + over


# ------------------------------------------------------------------ listening


class Listening:
    """An iterator of a channel's notifications, attached when created (see
    :func:`listen`). Close it (or use it as a context manager) when done."""

    def __init__(self, *, channel: Channel, after: int | None, timeout: float | None) -> None:
        self.channel = channel
        self.timeout = timeout
        self.sub = notify.subscribe(wake_name(channel))  # first: nothing is missed
        self.cursor = after if after is not None else channel_head(channel=channel)
        self.buffer: deque[Notification] = deque()

    def __iter__(self) -> Listening:
        return self

    def __next__(self) -> Notification:
        """The next notification; waits for it (StopIteration after
        ``timeout`` seconds without one)."""
        idle_since = time.monotonic()
        while not self.buffer:
            self.buffer.extend(notifications_after(channel=self.channel, after=self.cursor))
            if self.buffer:
                break
            waited = time.monotonic() - idle_since
            if self.timeout is not None and waited >= self.timeout:
                raise StopIteration
            left = notify.SAFETY_SLEEP if self.timeout is None else self.timeout - waited
            self.sub.wait(left)
        note = self.buffer.popleft()
        self.cursor = note.seq
        return note

    def close(self) -> None:
        self.sub.close()

    def __enter__(self) -> Listening:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def listen(
    *, channel: Channel, after: int | None = None, timeout: float | None = None
) -> Listening:
    """Attach to ``channel`` now and iterate its notifications in order: those
    published after this call (or, with ``after``, every retained one above
    that id: resume). Iteration stops after ``timeout`` seconds without a
    notification (never when None). Blocks its thread while it waits (async
    code uses ``queueproject.sse``)::

        with channels.listen(channel=ch, timeout=30) as notes:
            for note in notes:
                handle(note.seq, note.payload)
    """
    return Listening(channel=channel, after=after, timeout=timeout)


def _max_depth() -> int:
    return product_settings().json_max_depth


def _check_name(name: str) -> None:
    try:
        COLLECTION_NAME_VALIDATOR(name)
    except ValidationError:
        raise InvalidChannelInput.field("name", str(COLLECTION_NAME_VALIDATOR.message)) from None


def _check_key(key: str | None) -> None:
    if key is not None and not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX:
        raise InvalidChannelInput.field(
            "idempotency_key", f"Use 1-{IDEMPOTENCY_KEY_MAX} characters."
        )
