"""Store primitives of SPEC §6 owned by groups. Schedules: a named cron or
``@every`` expression of a group that enqueues one message per boundary into a
queue collection (``store.schedules`` holds the writes, ``store.schedule_tick``
the one-leader loop)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from groupqueues.models import COLLECTION_NAME_VALIDATOR
from principals.models import Group
from queueproject import notify

CATCH_UP_MAX = 1000


class ScheduleQuerySet(models.QuerySet["Schedule"]):
    def due(self, now: object) -> ScheduleQuerySet:
        """Active schedules whose next boundary has come (served by st_sched_due)."""
        return self.filter(paused=False, next_at__lte=now)


class Schedule(models.Model):
    """A group's named schedule. ``next_at`` is the next boundary to fire and
    ``last_fired_at`` the last one fired: the cursor, moved only by a
    conditional update fenced on its old value, in the transaction that
    enqueues the boundary's message (so each boundary fires exactly once).
    ``collection`` is a name, resolved at each fire from the group's chain."""

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="schedules")
    name = models.CharField(max_length=64, validators=[COLLECTION_NAME_VALIDATOR])
    collection = models.CharField(max_length=64, validators=[COLLECTION_NAME_VALIDATOR])
    expression = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    payload = models.JSONField(null=True, blank=True)
    priority = models.IntegerField(default=0)
    max_attempts = models.PositiveIntegerField(null=True, blank=True)
    expires_in_seconds = models.FloatField(null=True, blank=True)
    catch_up = models.PositiveIntegerField(default=1)
    paused = models.BooleanField(default=False)
    declared_in_code = models.BooleanField(default=False)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    next_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScheduleQuerySet.as_manager()

    class Meta:
        ordering = ["group_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["group", "name"], name="st_sched_unique_name"),
            models.CheckConstraint(
                condition=Q(catch_up__gte=1, catch_up__lte=CATCH_UP_MAX),
                name="st_sched_catch_up_range",
            ),
        ]
        indexes = [
            models.Index(fields=["next_at"], name="st_sched_due", condition=Q(paused=False)),
        ]

    def __str__(self) -> str:
        return f"{self.group.slug}/{self.name}"


def channel_wake_name(channel_id: int) -> str:
    """The wake-up channel (``queueproject.notify``) of notify channel
    ``channel_id``: what a publish NOTIFYs and its listeners wait on."""
    return notify.channel("chan", channel_id)


def topic_wake_name(topic_id: int) -> str:
    """The wake-up channel (``queueproject.notify``) of stream topic
    ``topic_id``: what an append NOTIFYs and its readers wait on."""
    return notify.channel("stream", topic_id)


class Channel(models.Model):
    """A group's notify channel (SPEC §6): fan-out to every listener attached
    before a publish. ``last_seq`` is the sequence number of its latest
    notification: ``store.channels.publish`` moves it under the channel row's
    lock, held until commit, so sequence order is commit order per channel and
    a listener that has seen ``seq`` N never later finds one below N appear."""

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="channels")
    name = models.CharField(max_length=64, validators=[COLLECTION_NAME_VALIDATOR])
    last_seq = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["group", "name"], name="st_chan_unique_name"),
            models.CheckConstraint(condition=Q(last_seq__gte=0), name="st_chan_seq_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.group.slug}/{self.name}"


class Notification(models.Model):
    """One published notification, kept for the retention window (by age and
    by count, ``NOTIFY_RETENTION_SECONDS`` / ``NOTIFY_RETENTION_COUNT``) so that
    a reconnecting listener resumes by ``Last-Event-ID`` without loss."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    seq = models.BigIntegerField()
    payload = models.JSONField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    published_at = models.DateTimeField()

    class Meta:
        ordering = ["channel_id", "seq"]
        constraints = [
            # Also the index of the listeners' hot query (channel, seq > cursor).
            models.UniqueConstraint(fields=["channel", "seq"], name="st_notif_unique_seq"),
            models.UniqueConstraint(
                fields=["channel", "idempotency_key"],
                name="st_notif_unique_key",
                condition=Q(idempotency_key__isnull=False),
            ),
        ]
        indexes = [models.Index(fields=["published_at"], name="st_notif_published")]

    def __str__(self) -> str:
        return f"{self.channel_id}#{self.seq}"


# ------------------------------------------------------------------ streams

STREAM_KEY_MAX = 200  # characters of an entry's idempotency key


class Topic(models.Model):
    """A group's append-only log. ``head_offset`` is the last offset handed out
    (0 while nothing was ever appended); offsets are dense, 1, 2, 3, … in
    commit order, because an append bumps ``head_offset`` by one UPDATE of
    this row and so holds its row lock until it commits (``store.streams``).
    ``pruned_through``: every entry at or below it is gone (retention, purge);
    the first available offset is ``pruned_through + 1``. Retention: entries
    older than ``retention_seconds`` and beyond the newest ``max_entries`` are
    pruned (null: no limit of that kind)."""

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="topics")
    name = models.CharField(max_length=64, validators=[COLLECTION_NAME_VALIDATOR])
    head_offset = models.BigIntegerField(default=0)
    pruned_through = models.BigIntegerField(default=0)
    retention_seconds = models.FloatField(null=True, blank=True)
    max_entries = models.PositiveIntegerField(null=True, blank=True)
    max_payload_bytes = models.PositiveIntegerField(default=256 * 1024)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["group", "name"], name="st_topic_unique_name"),
            models.CheckConstraint(
                condition=Q(pruned_through__gte=0, head_offset__gte=models.F("pruned_through")),
                name="st_topic_offsets",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.group.slug}/{self.name}"

    @property
    def first_offset(self) -> int:
        """The first offset a reader can still get (``head_offset + 1`` when
        every entry is gone or none was appended)."""
        return self.pruned_through + 1


class StreamEntry(models.Model):
    """One entry of a topic at ``offset`` (unique per topic, never reused).
    ``idempotency_key``: unique per topic while the entry is retained."""

    id = models.BigAutoField(primary_key=True)
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="entries")
    offset = models.BigIntegerField()
    payload = models.JSONField(null=True, blank=True)
    idempotency_key = models.CharField(max_length=STREAM_KEY_MAX, null=True, blank=True)
    appended_by = models.CharField(max_length=200, blank=True, default="")
    appended_at = models.DateTimeField()

    class Meta:
        ordering = ["topic_id", "offset"]
        constraints = [
            # Also the read path's index: WHERE topic = … AND offset > … ORDER BY offset.
            models.UniqueConstraint(fields=["topic", "offset"], name="st_entry_offset"),
            models.UniqueConstraint(
                fields=["topic", "idempotency_key"],
                name="st_entry_key",
                condition=Q(idempotency_key__isnull=False),
            ),
            models.CheckConstraint(condition=Q(offset__gte=1), name="st_entry_offset_positive"),
        ]
        indexes = [models.Index(fields=["topic", "appended_at"], name="st_entry_age")]

    def __str__(self) -> str:
        return f"{self.topic_id}@{self.offset}"


class StreamConsumer(models.Model):
    """A named reader of a topic and the last offset it has processed
    (``committed_offset``, 0 = none). It only moves forward through a commit;
    a reset (manage) is the only way back."""

    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="consumers")
    name = models.CharField(max_length=64, validators=[COLLECTION_NAME_VALIDATOR])
    committed_offset = models.BigIntegerField(default=0)
    committed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["topic_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["topic", "name"], name="st_consumer_unique_name"),
            models.CheckConstraint(condition=Q(committed_offset__gte=0), name="st_consumer_offset"),
        ]

    def __str__(self) -> str:
        return f"{self.topic}:{self.name}"


# --- the transactional outbox -------------------------------------------------

OUTBOX_KEY_MAX = 200
OUTBOX_MAX_ATTEMPTS_MAX = 1000


class OutboxState(models.TextChoices):
    PENDING = "pending"  # waiting for its (next) attempt
    CLAIMED = "claimed"  # a relay holds it under a lease
    DONE = "done"  # delivered
    DEAD = "dead"  # out of attempts; redrive makes it pending again


class OutboxTargetKind(models.TextChoices):
    QUEUE = "queue"  # enqueue into a group queue (name resolved from the group's chain)
    STREAM = "stream"  # append to a group's stream topic
    CHANNEL = "channel"  # publish on a group's notify channel
    WEBHOOK = "webhook"  # a signed POST to an app's webhook_url


class OutboxQuerySet(models.QuerySet["OutboxMessage"]):
    def claimable(self, now: object) -> OutboxQuerySet:
        """Pending and due, or claimed under a lapsed lease (its relay died):
        served by st_outbox_due and st_outbox_lease."""
        return self.filter(
            Q(state=OutboxState.PENDING, deliver_after__lte=now)
            | Q(state=OutboxState.CLAIMED, lease_expires_at__lte=now)
        )


class OutboxMessage(models.Model):
    """One message written by ``store.outbox.publish`` in the caller's own
    transaction (so it exists if and only if that transaction committed), then
    delivered to its target by a relay (``store.outbox_relay``). A relay's claim
    stamps ``claim_token``, ``claimed_by`` and ``lease_expires_at`` and counts
    the attempt; every later change is conditional on that token (a relay whose
    lease was taken over cannot mark the row). ``group`` owns the row for
    authorisation: the target's group (an app's group for webhooks)."""

    id = models.UUIDField(primary_key=True)
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="outbox_messages")
    target_kind = models.CharField(max_length=16, choices=OutboxTargetKind.choices)
    target_name = models.CharField(max_length=64)
    app = models.ForeignKey(
        "principals.App", null=True, blank=True, on_delete=models.CASCADE,
        related_name="outbox_messages",
    )  # fmt: skip
    payload = models.JSONField(null=True, blank=True)
    key = models.CharField(max_length=OUTBOX_KEY_MAX, null=True, blank=True)
    state = models.CharField(max_length=16, choices=OutboxState.choices,
                             default=OutboxState.PENDING)  # fmt: skip
    attempt = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField()
    deliver_after = models.DateTimeField()
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_by = models.CharField(max_length=128, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    done_at = models.DateTimeField(null=True, blank=True)
    dead_at = models.DateTimeField(null=True, blank=True)

    objects = OutboxQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["group", "key"], name="st_outbox_unique_key", condition=Q(key__isnull=False)
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1, max_attempts__lte=OUTBOX_MAX_ATTEMPTS_MAX),
                name="st_outbox_max_attempts_range",
            ),
            models.CheckConstraint(
                condition=Q(state="claimed", claim_token__isnull=False)
                | ~Q(state="claimed") & Q(claim_token__isnull=True),
                name="st_outbox_token_only_while_claimed",
            ),
        ]
        indexes = [
            models.Index(
                fields=["deliver_after", "created_at"],
                name="st_outbox_due",
                condition=Q(state="pending"),
            ),
            models.Index(
                fields=["lease_expires_at"], name="st_outbox_lease", condition=Q(state="claimed")
            ),
            models.Index(fields=["group", "state", "created_at"], name="st_outbox_group_state"),
            models.Index(fields=["done_at"], name="st_outbox_done", condition=Q(state="done")),
        ]

    def __str__(self) -> str:
        return f"outbox {self.id} → {self.target_kind}:{self.target_name}"
