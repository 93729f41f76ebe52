"""Writes of the group queues (SPEC §2): the contract the API, the admin,
the workers and maintenance call, one import: ``from groupqueues import
services`` then ``services.<name>``.

One module per concern: ``collections`` (declare, change; the helpers every
section asks about a collection), ``enqueue``, ``claim`` (claim, ack-and-claim,
long poll), ``holder`` (ack, nack and its backoff, fail, extend, release,
cancel), ``maintenance`` (reclaim, sweep, prune, drop, redrive, purge), ``waiting``
(operator changes to ready messages: retry now, change priority),
``postgres`` (the PostgreSQL-only statements) and ``types`` (what they take
and answer). State transitions are ``MessageQuerySet`` methods (``kill``,
``unclaim``, ``retry_or_die``), the claim order is ``models.CLAIM_ORDER`` and
the setting ranges ``settings_ranges.SETTING_RANGES``.

Rules every function keeps:
- keyword-only, typed arguments; the time is ``queueproject.clock.now()``,
  passed into SQL as a parameter (never the database's clock);
- each call is one short transaction (a single statement runs in autocommit,
  which is one transaction); every state change is ONE conditional
  UPDATE/DELETE fenced by the state (and claim token and unexpired lease) it
  expects, and the row count decides the outcome, so a maintenance pass never
  overwrites what a worker just acked, nacked or extended;
- the caller passes the collection (resolved with ``collection_get`` or
  ``collection_resolve``) and, for enqueue, ``enqueued_by`` from the
  authenticated principal (``principal.label``), never from a request body.

Errors are ``groupqueues.exceptions``. Reads (get, stats, depth) live in
``groupqueues.selectors`` and are re-exported here so the whole contract is one
import.
"""

from __future__ import annotations

from groupqueues.selectors import (  # re-exported: reads belong to the contract too
    QueueStats,
    collection_depth,
    collection_depth_pending,
    collection_get,
    collection_resolve,
    collection_resolve_from,
    collection_stats,
    collections_of,
    message_get,
    messages_dead,
)
from groupqueues.services.claim import (
    CLAIM_ROUNDS,
    message_ack_and_claim,
    message_ack_batch_and_claim,
    message_claim,
    message_claim_waiting,
)
from groupqueues.services.claim_floor import (
    CLAIM_FLOOR_MARGIN,
    collection_advance_claim_floor,
    collections_refresh_claim_floors,
)
from groupqueues.services.collections import collection_create, collection_update
from groupqueues.services.dead_counts import dead_counts_refresh, dead_counts_refresh_if_due
from groupqueues.services.enqueue import message_enqueue, message_enqueue_batch
from groupqueues.services.holder import (
    message_ack,
    message_ack_batch,
    message_cancel,
    message_extend,
    message_fail,
    message_nack,
    message_release,
)
from groupqueues.services.maintenance import (
    PRUNE_CHUNK,
    collection_purge,
    messages_drop_exhausted,
    messages_prune_dead,
    messages_purge_dead,
    messages_reclaim_expired,
    messages_redrive,
    messages_sweep_expired,
)
from groupqueues.services.types import (
    MAX_ACK_BATCH,
    MAX_BATCH,
    MAX_CLAIM,
    AckAndClaimResult,
    AckBatchAndClaimResult,
    AckBatchResult,
    AckResult,
    ClaimedMessage,
    EnqueueResult,
    NewMessage,
    SweepResult,
)
from groupqueues.services.waiting import message_retry_now, message_set_priority

__all__ = [
    "CLAIM_FLOOR_MARGIN",
    "CLAIM_ROUNDS",
    "MAX_ACK_BATCH",
    "MAX_BATCH",
    "MAX_CLAIM",
    "PRUNE_CHUNK",
    "AckAndClaimResult",
    "AckBatchAndClaimResult",
    "AckBatchResult",
    "AckResult",
    "ClaimedMessage",
    "EnqueueResult",
    "NewMessage",
    "QueueStats",
    "SweepResult",
    "collection_advance_claim_floor",
    "collection_create",
    "collection_depth",
    "collection_depth_pending",
    "collection_get",
    "collection_purge",
    "collection_resolve",
    "collection_resolve_from",
    "collection_stats",
    "collection_update",
    "collections_of",
    "collections_refresh_claim_floors",
    "dead_counts_refresh",
    "dead_counts_refresh_if_due",
    "message_ack",
    "message_ack_and_claim",
    "message_ack_batch",
    "message_ack_batch_and_claim",
    "message_cancel",
    "message_claim",
    "message_claim_waiting",
    "message_enqueue",
    "message_enqueue_batch",
    "message_extend",
    "message_fail",
    "message_get",
    "message_nack",
    "message_release",
    "message_retry_now",
    "message_set_priority",
    "messages_dead",
    "messages_drop_exhausted",
    "messages_prune_dead",
    "messages_purge_dead",
    "messages_reclaim_expired",
    "messages_redrive",
    "messages_sweep_expired",
]
