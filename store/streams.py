"""Streams (SPEC §6): a group's append-only topics with offsets, named
consumers that keep an offset which only moves forward, and retention.

**Offsets increase in commit order.** A reader that has seen offset N never
later finds an entry below N appear. How: an append locks its topic's row
(``SELECT … FOR UPDATE`` on PostgreSQL; on SQLite the ``IMMEDIATE``
transaction holds the database's one write lock), reads ``head_offset``,
inserts its entries at ``head + 1 …``, writes the new head and commits, all
in one transaction. A second appender of the topic blocks on that row lock
until the first has committed and then reads the committed head (PostgreSQL
re-reads the newest row version after the wait). So appends to one topic are
serialised: the offset order is the commit order, there is never a gap
(a rolled-back append rolls its head back too), and PostgreSQL makes a
transaction visible before it releases its locks, so any snapshot that
contains offset N contains every offset below it. Reads take no lock.
The price: one topic takes one append transaction at a time (batch appends,
up to APPEND_MAX entries, amortise it); different topics do not contend.

**Retention** deletes a prefix only: the entries at or below a new
``pruned_through``, raised in the same transaction as the delete (under the
same row lock). A read checks ``pruned_through`` after fetching its entries,
so a read whose range lost entries to a concurrent prune answers
``offset_out_of_range`` rather than a page with a hole.

``append`` (this module's ``stream_append``) is the Python API the outbox
delivers through: each entry may carry an ``idempotency_key``, unique per
topic while its entry is retained; a repeat answers the existing offset.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from django.conf import settings
from django.db import IntegrityError, transaction

from groupqueues import validation as check
from groupqueues.exceptions import InvalidQueueInput
from groupqueues.models import COLLECTION_NAME_VALIDATOR
from groupqueues.settings_ranges import MAX_PAYLOAD_BYTES_MAX
from principals.models import Group
from queueproject import clock, notify
from queueproject.conf import product_settings
from store.exceptions import (
    ConsumerNotFound,
    InvalidStreamInput,
    OffsetOutOfRange,
    OffsetRegressed,
    StreamPayloadTooLarge,
    TopicExists,
    TopicNotFound,
)
from store.models import STREAM_KEY_MAX, StreamConsumer, StreamEntry, Topic, topic_wake_name

APPEND_MAX = 500  # entries per append
READ_MAX = 1000  # entries per read
READ_DEFAULT = 100
WAIT_MAX = 20.0  # seconds of a long-poll read
MAX_ENTRIES_MAX = 1_000_000_000
PRUNE_BATCH = 10_000  # entries deleted per topic per prune call
FIELDS = ("retention_seconds", "max_entries", "max_payload_bytes")


def retention_defaults() -> dict[str, Any]:
    """A new topic's retention when the creator gives none: the settings
    ``STREAMS_RETENTION_SECONDS`` (default 7 days) and ``STREAMS_MAX_ENTRIES``
    (default 1,000,000); None in a setting means no limit of that kind."""
    return {
        "retention_seconds": getattr(settings, "STREAMS_RETENTION_SECONDS", 7 * 86400.0),
        "max_entries": getattr(settings, "STREAMS_MAX_ENTRIES", 1_000_000),
    }


@dataclass(frozen=True)
class StreamEntryIn:
    """One entry to append: a JSON payload and an optional idempotency key."""

    payload: Any
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Appended:
    """Where an entry went; ``created`` is False for an idempotent repeat."""

    offset: int
    created: bool


@dataclass(frozen=True)
class StreamPage:
    """A read: the entries after ``since`` in offset order (at most the limit),
    and the topic's head and first available offset as read after them.
    ``next_since`` is what to pass as ``since`` next time."""

    since: int
    entries: list[StreamEntry]
    head_offset: int
    first_offset: int

    @property
    def next_since(self) -> int:
        return self.entries[-1].offset if self.entries else self.since


def wake_channel(topic: Topic) -> str:
    """The wake-up channel of a topic's appends (``queueproject.notify``)."""
    return topic_wake_name(topic.pk)


# ------------------------------------------------------------------ topics


def topic_get(*, group: Group, name: str) -> Topic:
    """The topic ``name`` of ``group``. Raises TopicNotFound."""
    found = Topic.objects.filter(group=group, name=name).select_related("group").first()
    if found is None:
        raise TopicNotFound(f"Group {group.slug!r} has no topic {name!r}.")
    return found


def topics_of(*, group: Group) -> list[Topic]:
    """The topics of a group, by name."""
    return list(Topic.objects.filter(group=group).select_related("group").order_by("name"))


def topic_create(*, group: Group, name: str, **fields: Any) -> Topic:
    """Create the topic ``name`` (``fields`` as FIELDS; retention defaults from
    ``retention_defaults()``). Raises InvalidStreamInput (400), TopicExists (409)."""
    _check_name(name, "name")
    topic = Topic(group=group, name=name)
    _assign(topic, {**retention_defaults(), **fields})
    try:
        with transaction.atomic():
            topic.save()
    except IntegrityError:
        raise TopicExists(f"Group {group.slug!r} already has a topic {name!r}.") from None
    return topic


def topic_update(*, topic: Topic, **fields: Any) -> Topic:
    """Change retention or the payload limit (FIELDS). Only those columns are
    written: the offsets an appender moves meanwhile are not overwritten."""
    _assign(topic, fields)
    topic.save(update_fields=sorted(fields))
    topic.refresh_from_db(fields=["head_offset", "pruned_through"])
    return topic


def topic_delete(*, topic: Topic) -> None:
    """Delete the topic with its entries and consumers."""
    topic.delete()


def topic_purge(*, topic: Topic) -> int:
    """Delete every entry; offsets are never reused (the next append goes on
    from the head), consumers keep their offsets. Answers the entries deleted."""
    with transaction.atomic():
        head = _lock(topic).head_offset
        Topic.objects.filter(pk=topic.pk).update(pruned_through=head)
        deleted, _ = StreamEntry.objects.filter(topic=topic).delete()
    topic.refresh_from_db(fields=["head_offset", "pruned_through"])
    return deleted


def _lock(topic: Topic) -> Topic:
    """The topic's row, locked until the transaction ends (the caller is in
    one). Raises TopicNotFound when it was deleted meanwhile."""
    locked = Topic.objects.select_for_update().filter(pk=topic.pk).first()
    if locked is None:
        raise TopicNotFound(f"Topic {topic.name!r} no longer exists.")
    return locked


# ------------------------------------------------------------------ append


def stream_append(
    *, topic: Topic, entries: Sequence[StreamEntryIn], appended_by: str = ""
) -> list[int]:
    """Append ``entries`` (1 to APPEND_MAX) to ``topic`` in one transaction;
    answers their offsets in order (an entry whose ``idempotency_key`` the
    topic already holds answers the existing entry's offset and appends
    nothing). Offsets increase in commit order (module docstring). Raises
    InvalidStreamInput (400), StreamPayloadTooLarge (413), TopicNotFound."""
    return [a.offset for a in stream_append_results(topic=topic, entries=entries,
                                                    appended_by=appended_by)]  # fmt: skip


append = stream_append  # the short public name (docs/streams.md, the README)


def stream_append_results(
    *, topic: Topic, entries: Sequence[StreamEntryIn], appended_by: str = ""
) -> list[Appended]:
    """``stream_append`` telling which entries were repeats (the API's 200/201)."""
    if not 1 <= len(entries) <= APPEND_MAX:
        raise InvalidStreamInput.field("entries", f"Give 1 to {APPEND_MAX} entries.")
    payloads = [_payload(e.payload, topic, i if len(entries) > 1 else None)
                for i, e in enumerate(entries)]  # fmt: skip
    keys = [_key(e.idempotency_key, i if len(entries) > 1 else None) for i, e in enumerate(entries)]
    with transaction.atomic():
        locked = _lock(topic)
        existing = _existing_keys(topic, keys)
        head, results, rows = locked.head_offset, [], []
        now = clock.now()  # under the lock: appended_at grows with the offset
        for payload, key in zip(payloads, keys, strict=True):
            if key is not None and key in existing:
                results.append(Appended(existing[key], False))
                continue
            head += 1
            if key is not None:
                existing[key] = head
            rows.append(StreamEntry(topic_id=topic.pk, offset=head, payload=payload,
                                    idempotency_key=key, appended_by=appended_by,
                                    appended_at=now))  # fmt: skip
            results.append(Appended(head, True))
        if rows:
            StreamEntry.objects.bulk_create(rows)
            Topic.objects.filter(pk=topic.pk).update(head_offset=head)
            notify.notify(wake_channel(topic))
    topic.head_offset = head
    return results


def _existing_keys(topic: Topic, keys: list[str | None]) -> dict[str, int]:
    wanted = {k for k in keys if k is not None}
    if not wanted:
        return {}
    found = StreamEntry.objects.filter(topic=topic, idempotency_key__in=wanted)
    return {key: offset for key, offset in found.values_list("idempotency_key", "offset") if key}


def _payload(payload: Any, topic: Topic, index: int | None) -> Any:
    """The payload, checked: storable JSON within the topic's size limit."""
    try:
        text = check.payload_json(payload, max_depth=product_settings().json_max_depth)
    except InvalidQueueInput as exc:
        raise InvalidStreamInput.field("payload", exc.message, index=index) from None
    size = len(text.encode("utf-8"))
    if size > topic.max_payload_bytes:
        where = "" if index is None else f"Entry {index}: "
        raise StreamPayloadTooLarge(
            f"{where}payload is {size} bytes; the topic allows {topic.max_payload_bytes}.",
            details={"index": index, "size": size, "max_payload_bytes": topic.max_payload_bytes},
        )
    return payload


def _key(key: Any, index: int | None) -> str | None:
    if key is None:
        return None
    if not isinstance(key, str) or not 1 <= len(key) <= STREAM_KEY_MAX or "\x00" in key:
        problem = f"Must be a string of 1 to {STREAM_KEY_MAX} characters (no NUL)."
        raise InvalidStreamInput.field("idempotency_key", problem, index=index)
    return key


# ------------------------------------------------------------------ read


def stream_read(*, topic: Topic, since: int, limit: int = READ_DEFAULT) -> StreamPage:
    """The entries after offset ``since`` (at most ``limit``, offset order).
    Raises OffsetOutOfRange (409, with the first available offset and the
    head) when entries after ``since`` are gone or ``since`` is beyond the
    head, InvalidStreamInput for a negative ``since`` or a limit outside
    1…READ_MAX."""
    check_offset(since, "since")
    _int(limit, "limit", low=1, high=READ_MAX)
    rows = list(StreamEntry.objects.filter(topic=topic, offset__gt=since)
                .order_by("offset")[:limit])  # fmt: skip
    # After the entries: a prune that took any of them is visible here.
    fresh = Topic.objects.filter(pk=topic.pk).values("head_offset", "pruned_through").first()
    if fresh is None:
        raise TopicNotFound(f"Topic {topic.name!r} no longer exists.")
    head, pruned = fresh["head_offset"], fresh["pruned_through"]
    topic.head_offset, topic.pruned_through = head, pruned
    if since < pruned:
        raise OffsetOutOfRange.below(since, pruned + 1, head)
    if since > head:
        raise OffsetOutOfRange.beyond("since", since, pruned + 1, head)
    return StreamPage(since=since, entries=rows, head_offset=head, first_offset=pruned + 1)


def stream_wait(*, topic: Topic, since: int, limit: int = READ_DEFAULT,
                wait_seconds: float = 0.0) -> StreamPage:  # fmt: skip
    """``stream_read``, waiting up to ``wait_seconds`` (≤ WAIT_MAX) for a first
    entry when none is there yet (a long poll: woken by the appends'
    notifications on PostgreSQL, polling on SQLite)."""
    wait = _seconds(wait_seconds, "wait_seconds")
    if wait > WAIT_MAX:
        raise InvalidStreamInput.field("wait_seconds", f"At most {WAIT_MAX:g}.")
    page = stream_read(topic=topic, since=since, limit=limit)
    if page.entries or wait <= 0:
        return page
    deadline = time.monotonic() + wait
    with notify.subscribe(wake_channel(topic)) as sub:
        while True:
            page = stream_read(topic=topic, since=since, limit=limit)
            left = deadline - time.monotonic()
            if page.entries or left <= 0:
                return page
            sub.wait(left)


def check_offset(value: Any, field: str) -> int:
    _int(value, field, low=0, high=2**63 - 1)
    return int(value)


# ------------------------------------------------------------------ consumers


def consumer_get(*, topic: Topic, name: str) -> StreamConsumer:
    """The consumer ``name`` of ``topic``. Raises ConsumerNotFound."""
    found = StreamConsumer.objects.filter(topic=topic, name=name).first()
    if found is None:
        raise ConsumerNotFound(f"Topic {topic.name!r} has no consumer {name!r}.")
    found.topic = topic
    return found


def consumers_of(*, topic: Topic) -> list[StreamConsumer]:
    """The consumers of a topic, by name (each with ``topic`` set, for the lag)."""
    found = list(StreamConsumer.objects.filter(topic=topic).order_by("name"))
    for consumer in found:
        consumer.topic = topic
    return found


def consumer_lag(consumer: StreamConsumer) -> int:
    """Head offset - committed offset (entries appended and not yet committed)."""
    return max(0, consumer.topic.head_offset - consumer.committed_offset)


def consumer_position(*, topic: Topic, name: str) -> int:
    """Where the consumer reads from: its committed offset, or for one that
    never committed the first available entry (``pruned_through``)."""
    committed = (StreamConsumer.objects.filter(topic=topic, name=name)
                 .values_list("committed_offset", flat=True).first())  # fmt: skip
    if committed is not None:
        return committed
    topic.refresh_from_db(fields=["head_offset", "pruned_through"])
    return topic.pruned_through


def consumer_read(*, topic: Topic, name: str, limit: int = READ_DEFAULT,
                  wait_seconds: float = 0.0) -> StreamPage:  # fmt: skip
    """The entries after the consumer's saved offset (``consumer_position``);
    reading does not commit. Raises as ``stream_wait`` (409
    ``offset_out_of_range`` when retention passed the consumer)."""
    _check_consumer_name(name)
    since = consumer_position(topic=topic, name=name)
    return stream_wait(topic=topic, since=since, limit=limit, wait_seconds=wait_seconds)


def consumer_commit(*, topic: Topic, name: str, offset: int) -> StreamConsumer:
    """Save ``offset`` (the last offset processed) for consumer ``name``,
    creating it on its first commit. Forward only: an offset below the saved
    one raises OffsetRegressed (409); the same offset again is a no-op. An
    offset beyond the head raises OffsetOutOfRange (409)."""
    _check_consumer_name(name)
    check_offset(offset, "offset")
    _check_not_beyond_head(topic, offset)
    with transaction.atomic():
        consumer = _consumer_ensure(topic, name, start=offset)
        moved = StreamConsumer.objects.filter(pk=consumer.pk, committed_offset__lte=offset)
        if not moved.update(committed_offset=offset, committed_at=clock.now()):
            consumer.refresh_from_db()
            raise OffsetRegressed.at(name, consumer.committed_offset, offset)
    consumer.refresh_from_db()
    consumer.topic = topic
    return consumer


def consumer_reset(*, topic: Topic, name: str, offset: int | None = None,
                   to: Literal["earliest", "latest"] | None = None) -> StreamConsumer:  # fmt: skip
    """Move consumer ``name`` to ``offset`` (backwards too), or to the
    ``earliest`` retained entry or the ``latest`` (the head): the manage
    capability's way back. Creates the consumer if needed."""
    _check_consumer_name(name)
    if (offset is None) == (to is None):
        raise InvalidStreamInput.field("offset", "Give exactly one of offset and to.")
    if to is not None and to not in ("earliest", "latest"):
        raise InvalidStreamInput.field("to", "Must be 'earliest' or 'latest'.")
    with transaction.atomic():
        locked = _lock(topic)  # a stable head and pruned_through for the target
        if offset is None:
            offset = locked.pruned_through if to == "earliest" else locked.head_offset
        check_offset(offset, "offset")
        _check_not_beyond_head(locked, offset)
        consumer = _consumer_ensure(topic, name, start=offset)
        StreamConsumer.objects.filter(pk=consumer.pk).update(committed_offset=offset,
                                                             committed_at=clock.now())  # fmt: skip
    topic.head_offset, topic.pruned_through = locked.head_offset, locked.pruned_through
    consumer.refresh_from_db()
    consumer.topic = topic
    return consumer


def consumer_delete(*, consumer: StreamConsumer) -> None:
    consumer.delete()


def _consumer_ensure(topic: Topic, name: str, *, start: int) -> StreamConsumer:
    """The consumer row, created at ``start`` if missing (in a savepoint, so
    a concurrent creation is read back rather than failing)."""
    found = StreamConsumer.objects.filter(topic=topic, name=name).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return StreamConsumer.objects.create(topic=topic, name=name, committed_offset=start)
    except IntegrityError:
        return StreamConsumer.objects.get(topic=topic, name=name)


def _check_not_beyond_head(topic: Topic, offset: int) -> None:
    topic.refresh_from_db(fields=["head_offset", "pruned_through"])
    if offset > topic.head_offset:
        raise OffsetOutOfRange.beyond("offset", offset, topic.first_offset, topic.head_offset)


def _check_consumer_name(name: Any) -> None:
    _check_name(name, "consumer")


def _check_name(name: Any, field: str) -> None:
    """Topic and consumer names follow the collection names' rule."""
    if not isinstance(name, str) or not re.match(COLLECTION_NAME_VALIDATOR.regex, name):
        raise InvalidStreamInput.field(field, str(COLLECTION_NAME_VALIDATOR.message))


# ------------------------------------------------------------------ retention


def topic_prune(*, topic: Topic, now: Any = None) -> int:
    """Delete the entries past the topic's retention (older than
    ``retention_seconds``, beyond the newest ``max_entries``), at most
    PRUNE_BATCH per call, as one prefix: ``pruned_through`` moves up in the
    same transaction. Answers the entries deleted."""
    now = now or clock.now()
    through = _prune_target(topic, now)
    if through <= topic.pruned_through:
        return 0
    with transaction.atomic():
        locked = _lock(topic)
        through = min(through, locked.pruned_through + PRUNE_BATCH, locked.head_offset)
        if through <= locked.pruned_through:
            return 0
        Topic.objects.filter(pk=topic.pk).update(pruned_through=through)
        deleted, _ = StreamEntry.objects.filter(topic=topic, offset__lte=through).delete()
    topic.pruned_through = through
    return deleted


def streams_prune(*, now: Any = None) -> int:
    """One retention pass over every topic with a limit (the maintenance
    hook); answers the entries deleted."""
    now = now or clock.now()
    limited = Topic.objects.exclude(retention_seconds=None, max_entries=None)
    return sum(topic_prune(topic=t, now=now) for t in limited.order_by("pk"))


def _prune_target(topic: Topic, now: Any) -> int:
    """The highest offset retention lets go (0 when none)."""
    through = 0
    if topic.max_entries is not None:
        through = topic.head_offset - topic.max_entries
    if topic.retention_seconds is not None:
        cutoff = now - timedelta(seconds=topic.retention_seconds)
        # The newest old entry (st_entry_age, one row): everything up to it is
        # old too, as appended_at grows with the offset.
        newest_old = (StreamEntry.objects.filter(topic=topic, appended_at__lt=cutoff)
                      .order_by("-appended_at", "-offset").values_list("offset", flat=True)
                      .first())  # fmt: skip
        through = max(through, newest_old or 0)
    return through


# ------------------------------------------------------------------ validation


def _assign(topic: Topic, fields: dict[str, Any]) -> None:
    unknown = set(fields) - set(FIELDS)
    if unknown:
        raise InvalidStreamInput.field(sorted(unknown)[0], "Unknown field.")
    for name, value in fields.items():
        if name == "retention_seconds" and value is not None:
            value = _seconds(value, name)
            if value < 1:
                raise InvalidStreamInput.field(name, "Must be at least 1 second.")
        elif name == "max_entries" and value is not None:
            _int(value, name, low=1, high=MAX_ENTRIES_MAX)
        elif name == "max_payload_bytes":
            _int(value, name, low=1, high=MAX_PAYLOAD_BYTES_MAX)
        setattr(topic, name, value)


def _int(value: Any, field: str, *, low: int, high: int) -> int:
    """``value`` as an int within [low, high] (raises InvalidStreamInput)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidStreamInput.field(field, "Must be an integer.")
    if not low <= value <= high:
        raise InvalidStreamInput.field(field, f"Must be between {low} and {high}.")
    return value


def _seconds(value: Any, field: str) -> float:
    """A number of seconds within [0, DURATION_MAX] (raises InvalidStreamInput)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidStreamInput.field(field, "Must be a number of seconds.")
    if not 0 <= value <= check.DURATION_MAX:
        raise InvalidStreamInput.field(field, f"Must be between 0 and {check.DURATION_MAX}.")
    return float(value)
