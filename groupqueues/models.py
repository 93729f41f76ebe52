"""Group queues: shared collections owned by groups and their messages (SPEC §2).

A message row lives while its work is live (``ready`` or ``claimed``) or dead;
an acked or cancelled message is deleted. ``seq`` (the primary key) is the
strict enqueue order; ``id`` is the public UUID. ``deliver_after`` is always
set (the enqueue time when there is no delay), so the claim order is
``priority DESC, deliver_after ASC, seq ASC`` and the partial index
``gq_msg_claimable`` serves it directly.
"""

from __future__ import annotations

import os
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any, ClassVar

from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Case, DateTimeField, Exists, F, OuterRef, Q, Value, When

from groupqueues.settings_ranges import RATE_LIMIT_COUNT, range_constraints
from principals.models import Group
from queueproject import notify

COLLECTION_NAME_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9._-]{1,64}$", "Use 1-64 letters, digits, dots, underscores and hyphens."
)

KIB = 1024
DEFAULT_MAX_PAYLOAD_BYTES = 256 * KIB
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_VISIBILITY_TIMEOUT = 30  # seconds
DEFAULT_RETRY_BACKOFF_BASE = 1.0  # seconds
DEFAULT_RETRY_BACKOFF_MAX = 3600.0  # seconds
DEFAULT_DEAD_RETENTION = 7 * 24 * 3600  # seconds


class CollectionKind(models.TextChoices):
    QUEUE = "queue"
    KV = "kv"
    DOCS = "docs"
    FILES = "files"


class MessageState(models.TextChoices):
    READY = "ready"
    CLAIMED = "claimed"
    DEAD = "dead"


class DeadReason(models.TextChoices):
    EXHAUSTED = "exhausted"
    EXPIRED = "expired"
    FAILED = "failed"


LIVE_STATES = (MessageState.READY, MessageState.CLAIMED)

# The intervals a rate limit may name ("100/s", "1000/min"), in seconds.
RATE_INTERVALS: dict[str, int] = {"s": 1, "min": 60, "h": 3600}

# THE claim order, as (field, descending) pairs: priority DESC, ready time
# ASC, enqueue order ASC. ``MessageQuerySet.in_claim_order`` and
# ``claim_order_key`` are built from it; the ORDER BYs of ``sql.CLAIM_POSTGRES``
# and the column order of the ``gq_msg_claimable`` index spell it out again,
# and ``tests/groupqueues/test_claim_order.py`` pins them to this tuple.
CLAIM_ORDER: tuple[tuple[str, bool], ...] = (
    ("priority", True),
    ("deliver_after", False),
    ("seq", False),
)


def claim_order_key(by: str = "attr") -> Callable[[Any], tuple[Any, ...]]:
    """A Python sort key putting objects (``by="attr"``) or dicts (``by="item"``)
    in ``CLAIM_ORDER``: the claim statements do not return rows in order.
    Descending fields must be numbers (they are negated)."""
    names = [name for name, _ in CLAIM_ORDER]
    get = (attrgetter if by == "attr" else itemgetter)(*names)
    descending = [desc for _, desc in CLAIM_ORDER]

    def key(row: Any) -> tuple[Any, ...]:
        return tuple([-v if desc else v for v, desc in zip(get(row), descending, strict=True)])

    return key


# The fields a claim sets, cleared: what a message given back or killed loses.
_NOT_HELD: dict[str, Any] = {
    "claim_token": None, "claimed_by": "", "claimed_at": None, "lease_expires_at": None,
}  # fmt: skip


def collection_channel(collection_id: object) -> str:
    """The notify channel of a collection's consumers, by the collection's id."""
    return notify.channel("gq", collection_id)


class Fairness(models.TextChoices):
    """How a claim shares out work (SPEC §7): strictly in claim order, or
    round-robin across the partition keys with ready work."""

    NONE = "none"
    ENQUEUER = "enqueuer"
    ORDERING_KEY = "ordering_key"


# What ``max_in_flight_per_key`` counts: claimed messages with a running lease
# per partition (``Message.fair_key``, set at enqueue). The serializer (so the
# OpenAPI schema) and ``create_queue`` say it in these words.
MAX_IN_FLIGHT_PER_KEY_HELP = (
    "Claimed at once (running leases) per enqueuer with fairness none or enqueuer; per "
    "ordering key with fairness ordering_key, where the messages without a key count "
    "together as one; null: no limit."
)


class CollectionQuerySet(models.QuerySet["Collection"]):
    def queues(self) -> CollectionQuerySet:
        return self.filter(kind=CollectionKind.QUEUE)

    def declared_in(self, groups: list[Group], name: str) -> CollectionQuerySet:
        """Queue collections called ``name`` declared by any of ``groups``."""
        return self.queues().filter(group__in=groups, name=name)


class Collection(models.Model):
    """A named shared collection of a group. Only kind ``queue`` holds messages;
    durations are whole seconds except the backoff, which may be fractional."""

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="collections")
    name = models.CharField(max_length=64, validators=[COLLECTION_NAME_VALIDATOR])
    kind = models.CharField(
        max_length=8, choices=CollectionKind.choices, default=CollectionKind.QUEUE
    )
    max_payload_bytes = models.PositiveIntegerField(default=DEFAULT_MAX_PAYLOAD_BYTES)
    default_max_attempts = models.PositiveIntegerField(default=DEFAULT_MAX_ATTEMPTS)
    visibility_timeout = models.PositiveIntegerField(default=DEFAULT_VISIBILITY_TIMEOUT)
    retry_backoff_base = models.FloatField(default=DEFAULT_RETRY_BACKOFF_BASE)
    retry_backoff_max = models.FloatField(default=DEFAULT_RETRY_BACKOFF_MAX)
    dead_retention = models.PositiveIntegerField(default=DEFAULT_DEAD_RETENTION)
    max_depth = models.PositiveIntegerField(null=True, blank=True)
    paused = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Ordering keys, fairness and limits (SPEC §7; docs/ordering-and-limits.md).
    # A collection that uses none of them claims through the plain statement;
    # ``uses_ordering_keys`` is set (never cleared) by the first enqueue with an
    # ordering key, in that enqueue's transaction.
    fairness = models.CharField(max_length=12, choices=Fairness.choices, default=Fairness.NONE)
    max_in_flight = models.PositiveIntegerField(null=True, blank=True)
    max_in_flight_per_key = models.PositiveIntegerField(null=True, blank=True)
    # ``rate_limit`` "n/s" or "n/min": n claims per interval (a token bucket,
    # ``rate_tokens`` left at ``rate_at``; written only by the claim).
    rate_limit_count = models.PositiveIntegerField(null=True, blank=True)
    rate_limit_seconds = models.PositiveIntegerField(null=True, blank=True)
    rate_tokens = models.FloatField(null=True, editable=False)
    rate_at = models.DateTimeField(null=True, editable=False)
    uses_ordering_keys = models.BooleanField(default=False, editable=False)

    objects = CollectionQuerySet.as_manager()

    class Meta:
        ordering = ["group_id", "name"]
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["group", "name"], name="gq_collection_unique_name"),
            models.CheckConstraint(
                condition=Q(kind__in=CollectionKind.values), name="gq_collection_kind_valid"
            ),
            *range_constraints(),
            models.CheckConstraint(
                condition=Q(fairness__in=Fairness.values), name="gq_collection_fairness_valid"
            ),
            models.CheckConstraint(
                condition=Q(rate_limit_count__isnull=True, rate_limit_seconds__isnull=True)
                | Q(
                    rate_limit_count__gte=RATE_LIMIT_COUNT.low,
                    rate_limit_count__lte=RATE_LIMIT_COUNT.high,
                    rate_limit_seconds__in=list(RATE_INTERVALS.values()),
                ),
                name="gq_collection_rate_limit_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.group.slug}/{self.name}"

    @property
    def uses_claim_features(self) -> bool:
        """Whether claims must honour ordering keys, fairness or limits (the
        plain claim statement refuses to run otherwise: ``sql.CLAIM_POSTGRES``)."""
        return (
            self.uses_ordering_keys or self.fairness != Fairness.NONE
            or self.max_in_flight is not None or self.max_in_flight_per_key is not None
            or self.rate_limit_count is not None
        )  # fmt: skip

    @property
    def uses_limits(self) -> bool:
        """Whether claims are counted against a limit (and so serialised on the
        collection row)."""
        return (
            self.max_in_flight is not None or self.max_in_flight_per_key is not None
            or self.rate_limit_count is not None
        )  # fmt: skip

    @property
    def uses_partition_key(self) -> bool:
        """Whether messages carry a partition key (``Message.fair_key``)."""
        return self.fairness != Fairness.NONE or self.max_in_flight_per_key is not None

    @property
    def rate_limit(self) -> str | None:
        """The rate limit as written ("100/s", "1000/min"), or None."""
        if self.rate_limit_count is None or self.rate_limit_seconds is None:
            return None
        unit = {v: k for k, v in RATE_INTERVALS.items()}[self.rate_limit_seconds]
        return f"{self.rate_limit_count}/{unit}"

    @property
    def wake_channel(self) -> str:
        """The notify channel consumers of this collection wait on (the one
        place its name is built)."""
        return collection_channel(self.pk)

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.visibility_timeout)


# UUID version 7 (RFC 9562): 48-bit Unix time in ms, version, 12 bits of
# rand_a, the variant, 62 random bits.
_UUID7_VERSION = 0x7 << 76
_UUID7_VARIANT = 0x2 << 62
_RAND_B = (1 << 62) - 1


def new_message_ids(n: int) -> list[uuid.UUID]:
    """n message ids: UUID version 7, time-ordered, so each insert lands at the
    right edge of the ``id`` index instead of on a random leaf page (random
    version 4 ids cost a batch insert server time in page reads and
    full-page WAL images; figures in bench/README.md). Within one call the ids
    rise with the list (rand_a holds the position); the 62 random bits come
    from one read of the OS random source for the whole batch. The ids are
    public and not secrets (the claim token fences a message's holder)."""
    head = (time.time_ns() // 1_000_000) << 80 | _UUID7_VERSION | _UUID7_VARIANT
    randoms = struct.unpack(f">{n}Q", os.urandom(8 * n))
    return [_uuid(head | (i & 0xFFF) << 64 | r & _RAND_B) for i, r in enumerate(randoms)]


_SAFE_UNKNOWN = uuid.SafeUUID.unknown


def _uuid(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for a value known to be a 128-bit int, without
    its argument checks, which cost more than the rest of the id (a batch
    enqueue makes 500; figures in bench/README.md).
    Sets the two slots ``UUID.__init__`` sets (pinned against it by a test)."""
    u = object.__new__(uuid.UUID)
    object.__setattr__(u, "int", value)
    object.__setattr__(u, "is_safe", _SAFE_UNKNOWN)
    return u


def new_message_id() -> uuid.UUID:
    return new_message_ids(1)[0]


def _is_key_head() -> Q:
    """The row is the head of its ordering key: it has one, and no live row of
    the key came before it (read through gq_msg_key)."""
    earlier = Message.objects.filter(
        collection_id=OuterRef("collection_id"), ordering_key=OuterRef("ordering_key"),
        state__in=LIVE_STATES, seq__lt=OuterRef("seq"),
    )  # fmt: skip
    return Q(Q(ordering_key__isnull=False), ~Exists(earlier))


class MessageQuerySet(models.QuerySet["Message"]):
    def of(self, collection: Collection) -> MessageQuerySet:
        return self.filter(collection_id=collection.pk)

    def live(self) -> MessageQuerySet:
        """Ready or claimed (the depth)."""
        return self.filter(state__in=LIVE_STATES)

    def ready(self) -> MessageQuerySet:
        return self.filter(state=MessageState.READY)

    def claimed(self) -> MessageQuerySet:
        return self.filter(state=MessageState.CLAIMED)

    def dead(self) -> MessageQuerySet:
        return self.filter(state=MessageState.DEAD)

    def due(self, now: datetime) -> MessageQuerySet:
        """Ready and due now (expired ones included: a claim kills them)."""
        return self.ready().filter(deliver_after__lte=now)

    def delayed(self, now: datetime) -> MessageQuerySet:
        return self.ready().filter(deliver_after__gt=now)

    def pending(self, now: datetime) -> MessageQuerySet:
        """Ready, due and not expired (depth_pending)."""
        return self.due(now).exclude(expires_at__lte=now)

    def lease_lapsed(self, now: datetime) -> MessageQuerySet:
        """Claimed with a lease that has run out (claimable again)."""
        return self.claimed().filter(lease_expires_at__lte=now)

    def held(self, *, id: uuid.UUID, claim_token: uuid.UUID, now: datetime) -> MessageQuerySet:
        """The message if the caller still holds it: claimed with that token and an
        unexpired lease (the fence of ack, nack, fail, extend and release).
        "Claimed" is said by the token alone (only a claimed row has one:
        constraint ``gq_msg_token_only_while_claimed``), so that the planner
        finds the row by ``id`` and never through gq_msg_lease, whose partial
        index looks cheap when the statistics saw few claimed rows but holds
        every in-flight claim of the collection."""
        return self.filter(id=id, claim_token=claim_token, lease_expires_at__gt=now)

    def in_claim_order(self) -> MessageQuerySet:
        """Ordered by ``CLAIM_ORDER``."""
        return self.order_by(*[("-" if desc else "") + name for name, desc in CLAIM_ORDER])

    def key_holders(self, keys: Sequence[str | None]) -> dict[str | None, uuid.UUID]:
        """idempotency key -> id of the message holding it (among these rows)."""
        return dict(self.filter(idempotency_key__in=keys).values_list("idempotency_key", "id"))

    # ---- state transitions: each one UPDATE of the rows the caller fenced

    def kill(self, *, reason: str, now: datetime, **also: Any) -> int:
        """These rows become dead for ``reason`` now, no longer held by anyone
        (plus the ``also`` changes). Returns how many."""
        return self.update(
            state=MessageState.DEAD, dead_reason=reason, died_at=now,
            died_key_head=Case(When(_is_key_head(), then=Value(True)), default=Value(False)),
            **_NOT_HELD, **also,
        )  # fmt: skip

    def unclaim(self, **also: Any) -> int:
        """These rows become ready, no longer held (token and lease cleared),
        plus the ``also`` changes. Returns how many."""
        return self.update(state=MessageState.READY, **_NOT_HELD, **also)

    def retry_or_die(self, *, now: datetime, **also: Any) -> int:
        """These rows are given back: ready again, or dead ``exhausted`` when
        they have used all their attempts (decided per row in the UPDATE
        itself); no longer held either way. Returns how many."""
        out = Q(attempt__gte=F("max_attempts"))
        return self.update(
            state=Case(When(out, then=Value(MessageState.DEAD)), default=Value(MessageState.READY)),
            dead_reason=Case(When(out, then=Value(DeadReason.EXHAUSTED)), default=None),
            died_at=Case(When(out, then=Value(now)), default=None, output_field=DateTimeField()),
            # a claimed message of an ordering key is its key's head
            died_key_head=Case(
                When(out & Q(ordering_key__isnull=False), then=Value(True)), default=Value(False)
            ),
            **_NOT_HELD,
            **also,
        )


class Message(models.Model):
    """A queue message. Every state change is one conditional UPDATE/DELETE in
    ``groupqueues.services`` fenced by the state (and token) it expects."""

    seq = models.BigAutoField(primary_key=True)
    id = models.UUIDField(unique=True, default=new_message_id, editable=False)
    # The owning group, denormalised from the collection for reads and filters.
    # Integrity and the CASCADE on group delete come through ``collection``
    # (group -> collections -> messages); a second constraint and index here
    # would cost every enqueue a share of its time for nothing (bench/README.md).
    group = models.ForeignKey(
        Group, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    # No index of its own on purpose: every hot query reads a partial index that
    # starts with collection_id (see Meta.indexes). A plain collection_id index
    # tempts the planner whenever a new collection's statistics are still empty
    # (estimate: 1 row), and a claim planned on it reads and sorts the whole
    # collection on every call. The price: deleting a collection (an admin
    # action) scans the message table.
    # No database constraint either: its check ran once per inserted row at
    # commit (a large share of a 500-message batch's server time, with the
    # random ids; bench/README.md). Instead the enqueue locks the collection row once (KEY SHARE, in
    # its statement or transaction) and inserts nothing if the row is gone, and
    # a collection delete locks the row FOR UPDATE before Django's CASCADE
    # deletes its messages (``lock_collection_before_delete``): an enqueue
    # either commits before that lock, and its messages are deleted with the
    # collection, or finds the collection gone.
    collection = models.ForeignKey(
        Collection,
        on_delete=models.CASCADE,
        related_name="messages",
        db_index=False,
        db_constraint=False,
    )
    payload = models.JSONField()
    priority = models.IntegerField(default=0)
    enqueued_at = models.DateTimeField()
    deliver_after = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=MessageState.choices, default=MessageState.READY)
    claim_token = models.UUIDField(null=True, blank=True)
    claimed_by = models.CharField(max_length=128, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempt = models.IntegerField(default=0)
    max_attempts = models.IntegerField(default=DEFAULT_MAX_ATTEMPTS)
    last_error = models.TextField(null=True, blank=True)
    dead_reason = models.CharField(max_length=9, choices=DeadReason.choices, null=True, blank=True)
    died_at = models.DateTimeField(null=True, blank=True)
    enqueued_by = models.CharField(max_length=200, blank=True, default="")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    # Messages of one ordering key in a collection are handed out one at a
    # time in enqueue order (SPEC §7): only a key's head (its live message of
    # lowest seq) is claimable, and only while no other of the key is claimed.
    ordering_key = models.CharField(max_length=200, null=True, blank=True)
    # The partition key of fairness and max_in_flight_per_key: the ordering key
    # ("" without one) when the collection's fairness is ``ordering_key``, else
    # the enqueuer. Set only while the collection uses one (NULL otherwise, so
    # plain messages stay out of the index gq_msg_fair).
    fair_key = models.CharField(max_length=200, null=True, blank=True, editable=False)
    # A dead message that was the head of its ordering key when it died (its
    # death unblocked the key).
    died_key_head = models.BooleanField(default=False, db_default=False)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        indexes: ClassVar = [
            # claim: ready rows of a collection in claim order. expires_at rides
            # along (INCLUDE) so the ready stats are an index-only scan.
            models.Index(
                "collection",
                models.F("priority").desc(),
                "deliver_after",
                "seq",
                name="gq_msg_claimable",
                condition=Q(state="ready"),
                include=["expires_at"],
            ),
            # claim and reclaim_expired: claimed rows whose lease ran out.
            models.Index(
                fields=["collection", "lease_expires_at"],
                name="gq_msg_lease",
                condition=Q(state="claimed"),
            ),
            # sweep_expired: live rows with an expiry.
            models.Index(
                fields=["expires_at"],
                name="gq_msg_expiry",
                condition=Q(expires_at__isnull=False) & Q(state__in=["ready", "claimed"]),
            ),
            # the head of an ordering key: its live rows in enqueue order.
            models.Index(
                fields=["collection", "ordering_key", "seq"],
                name="gq_msg_key",
                condition=Q(ordering_key__isnull=False) & Q(state__in=["ready", "claimed"]),
            ),
            # is any message of this key (or partition) claimed?
            models.Index(
                fields=["collection", "ordering_key"],
                name="gq_msg_key_claimed",
                condition=Q(ordering_key__isnull=False) & Q(state="claimed"),
            ),
            # fairness: the partitions with ready work (a loose index scan) and
            # each one's ready rows in claim order; claimed rows per partition.
            models.Index(
                "collection",
                "fair_key",
                models.F("priority").desc(),
                "deliver_after",
                "seq",
                name="gq_msg_fair",
                condition=Q(fair_key__isnull=False) & Q(state="ready"),
            ),
            models.Index(
                fields=["collection", "fair_key"],
                name="gq_msg_fair_claimed",
                condition=Q(fair_key__isnull=False) & Q(state="claimed"),
            ),
            # dead retention pruning and the dead list of a collection.
            models.Index(
                fields=["collection", "died_at"], name="gq_msg_dead", condition=Q(state="dead")
            ),
        ]
        constraints: ClassVar = [
            models.UniqueConstraint(
                fields=["collection", "idempotency_key"],
                name="gq_msg_idempotency_key",
                condition=Q(idempotency_key__isnull=False),
            ),
            models.CheckConstraint(
                condition=Q(state__in=MessageState.values), name="gq_msg_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(attempt__gte=0) & Q(max_attempts__gte=1), name="gq_msg_attempt_range"
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=-1000) & Q(priority__lte=1000),
                name="gq_msg_priority_range",
            ),
            models.CheckConstraint(
                condition=~Q(state="claimed")
                | (
                    Q(claim_token__isnull=False)
                    & Q(lease_expires_at__isnull=False)
                    & Q(attempt__gte=1)
                ),
                name="gq_msg_claimed_has_lease",
            ),
            models.CheckConstraint(
                condition=Q(state="claimed") | Q(claim_token__isnull=True),
                name="gq_msg_token_only_while_claimed",
            ),
            models.CheckConstraint(
                condition=~Q(state="dead")
                | (Q(dead_reason__isnull=False) & Q(died_at__isnull=False)),
                name="gq_msg_dead_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"


# ------------------------------------------------------- consumers and workers


class TriggerQuerySet(models.QuerySet["Trigger"]):
    def enabled(self) -> TriggerQuerySet:
        return self.filter(enabled=True)


class Trigger(models.Model):
    """A consumer template declared by a group (SPEC §2 "Consumers and
    workers"): run ``handler`` on the queue ``collection_name`` as seen from
    ``group`` (the nearest group up the chain declaring it). A ``shared``
    trigger is materialised as one Consumer per app in the group's subtree,
    otherwise as one Consumer for the group; ``trigger_services`` keeps the
    consumers in sync. ``visibility_timeout`` None = the collection's."""

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="queue_triggers")
    collection_name = models.CharField(max_length=64, validators=[COLLECTION_NAME_VALIDATOR])
    handler = models.CharField(max_length=100)
    batch_size = models.PositiveIntegerField(default=10)
    concurrency = models.PositiveIntegerField(default=1)
    visibility_timeout = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    shared = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TriggerQuerySet.as_manager()

    class Meta:
        ordering = ["group_id", "collection_name", "handler"]
        constraints: ClassVar = [
            models.UniqueConstraint(
                fields=["group", "collection_name", "handler"], name="gq_trigger_unique"
            ),
            models.CheckConstraint(
                condition=Q(batch_size__gte=1) & Q(batch_size__lte=100),
                name="gq_trigger_batch_range",
            ),
            models.CheckConstraint(
                condition=Q(concurrency__gte=1) & Q(concurrency__lte=64),
                name="gq_trigger_concurrency_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.group.slug}/{self.collection_name} → {self.handler}"


class ConsumerQuerySet(models.QuerySet["Consumer"]):
    def runnable(self) -> ConsumerQuerySet:
        """Consumers of enabled triggers, with what a worker needs joined."""
        return self.filter(trigger__enabled=True).select_related("trigger", "trigger__group", "app")


class Consumer(models.Model):
    """A materialised trigger: one per app of the subtree for a shared trigger
    (``app`` set), one per trigger otherwise (``app`` empty). Rows are written
    only by ``trigger_services.consumers_sync``."""

    trigger = models.ForeignKey(Trigger, on_delete=models.CASCADE, related_name="consumers")
    app = models.ForeignKey(
        "principals.App", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ConsumerQuerySet.as_manager()

    class Meta:
        ordering = ["trigger_id", "id"]
        constraints: ClassVar = [
            models.UniqueConstraint(
                fields=["trigger", "app"], name="gq_consumer_per_app",
                condition=Q(app__isnull=False),
            ),
            models.UniqueConstraint(
                fields=["trigger"], name="gq_consumer_per_group", condition=Q(app__isnull=True)
            ),
        ]  # fmt: skip

    def __str__(self) -> str:
        who = self.app.slug if self.app is not None else self.trigger.group.slug
        return f"{self.trigger} as {who}"


class TaskRunStatus(models.TextChoices):
    """The statuses of Django's Tasks API (``TaskResultStatus``)."""

    READY = "READY"
    RUNNING = "RUNNING"
    FAILED = "FAILED"
    SUCCESSFUL = "SUCCESSFUL"


class TaskRun(models.Model):
    """The durable result of one Django Tasks ``enqueue`` through
    ``groupqueues.tasks_backend``; the queue message carries only its id."""

    id = models.CharField(max_length=64, primary_key=True)
    backend = models.CharField(max_length=100)
    task_path = models.CharField(max_length=300)
    queue_name = models.CharField(max_length=64)
    priority = models.IntegerField(default=0)
    ordering_key = models.CharField(max_length=200, null=True, blank=True)  # the message's
    args = models.JSONField(default=list)
    kwargs = models.JSONField(default=dict)
    status = models.CharField(
        max_length=10, choices=TaskRunStatus.choices, default=TaskRunStatus.READY
    )
    message_id = models.UUIDField(null=True, blank=True)
    enqueued_at = models.DateTimeField()
    run_after = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    last_attempted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    return_value = models.JSONField(null=True, blank=True)
    errors = models.JSONField(default=list)  # [{"exception_class_path", "traceback"}]
    worker_ids = models.JSONField(default=list)

    class Meta:
        ordering = ["enqueued_at"]
        constraints: ClassVar = [
            models.CheckConstraint(
                condition=Q(status__in=TaskRunStatus.values), name="gq_taskrun_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_path} {self.id} ({self.status})"


# ------------------------------------------------------------ observability
class DeadCount(models.Model):
    """How many dead messages a collection held for one reason, as of
    ``counted_at``: a snapshot the maintenance leader refreshes
    (``services.dead_counts_refresh``) so that a ``/metrics`` scrape reads
    these few rows instead of counting dead history (which retention may keep
    at millions of rows). Reasons with no dead messages have no row."""

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="+", db_constraint=False
    )
    reason = models.CharField(max_length=9, choices=DeadReason.choices)
    count = models.BigIntegerField()
    counted_at = models.DateTimeField()

    class Meta:
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["collection", "reason"], name="gq_deadcount_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.collection_id} {self.reason}: {self.count}"


# ------------------------------------------------------- history (issue 16)


class CollectionTally(models.Model):
    """Running totals of a collection: messages enqueued and acked since it
    was created. Processes count in memory and add their counts here every few
    seconds (``groupqueues.tally``), so the hot paths never update this row;
    the counts of a process that dies between two flushes are lost."""

    collection = models.OneToOneField(
        Collection, on_delete=models.CASCADE, primary_key=True, related_name="tally"
    )
    enqueued = models.BigIntegerField(default=0)
    acked = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.collection_id}: +{self.enqueued} -{self.acked}"


class CollectionSample(models.Model):
    """One minute of a collection's history, written by the maintenance pass
    (``groupqueues.history``): depths by state at ``taken_at``, the oldest
    pending age, and the messages enqueued and acked since the previous
    sample (the tally's totals ride along to compute the next difference).
    Pruned after ``QUEUE_SAMPLE_RETENTION`` seconds."""

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="samples", db_index=False
    )
    taken_at = models.DateTimeField()
    ready = models.IntegerField(default=0)
    delayed = models.IntegerField(default=0)
    claimed = models.IntegerField(default=0)
    dead = models.IntegerField(default=0)
    oldest_pending_age = models.FloatField(null=True)
    enqueued = models.BigIntegerField(default=0)
    acked = models.BigIntegerField(default=0)
    enqueued_total = models.BigIntegerField(default=0)
    acked_total = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["collection_id", "taken_at"]
        indexes: ClassVar = [
            models.Index(fields=["collection", "taken_at"], name="gq_sample_collection_time"),
            models.Index(fields=["taken_at"], name="gq_sample_time"),
        ]

    def __str__(self) -> str:
        return f"{self.collection_id} @ {self.taken_at:%Y-%m-%d %H:%M}"


class ClaimFloor(models.Model):
    """One version of a collection's claim floor (PostgreSQL; the statements
    and their rules in ``groupqueues.sql``, section *claim floors*): at
    ``computed_at`` no ready message of priority <= ``priority`` came before
    (``ready``, ``seq``) in (ready time, enqueue order), and no claimed one
    had (nor will a later claim give) a lease before ``lease``, stragglers
    aside; a claimed message put back in its old place lowers it. Claims start
    their index scans there instead of walking the dead entries below, which
    vacuum cannot remove while any transaction older than them is open.
    Claims read the newest version (highest ``version``); a refresh, a
    release, a reclaim or a change of priority adds version + 1 (the unique
    constraint serialises them: the loser of a race adds nothing) and deletes
    those before the previous one. A new row per version, not an UPDATE of
    one row: behind a held transaction every version of an updated row stays
    in its chain, and each claim would walk them all (one a second); here a
    claim reads the newest index entry and stops. No version: claims scan
    from the start (SQLite always does)."""

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="+", db_index=False,
        db_constraint=False,
    )  # fmt: skip
    version = models.BigIntegerField()
    priority = models.IntegerField()
    ready = models.DateTimeField()
    seq = models.BigIntegerField()
    lease = models.DateTimeField()
    computed_at = models.DateTimeField()

    class Meta:
        constraints: ClassVar = [
            models.UniqueConstraint(fields=["collection", "version"], name="gq_claimfloor_version"),
        ]

    def __str__(self) -> str:
        return f"{self.collection_id} v{self.version}"
