"""Writes of the session queues (SPEC §3), one module per concern:

- ``common``: the session identity, the lock row, wake-ups, generations, the cap;
- ``sessions``: tasks and sessions and their policy (``task_*``, ``session_*``);
- ``entries``: one-entry writes (``entry_*``);
- ``folding``: the merge compatibility rule and the fold (helpers only);
- ``ordering``: ``entry_merge_up``, ``queue_reorder``, ``queue_delete_all``;
- ``reservations``: draining the head (``entry_take_head``, ``reservation_*``);
- ``recovery``: crash recovery of reservations whose holder is gone
  (``reservation_recover``);
- ``send_now``: ``queue_send_now_claim`` / ``_restore`` / ``_acknowledge``;
- ``transfer``: ``queue_transfer``, ``queue_replace``, ``queue_purge_task``;
- ``pending_moves``: the deferred workflow move (``pending_move_*``);
- ``blocked``: the dispatcher's record of failing deliveries
  (``delivery_failure_*``) and the operator's audited actions on blocked heads
  (``reservation_release_stuck``, ``queue_skip_head``, ``session_resume_auto_run``).

Vocabulary: a queued item is an *entry* (stored as ``QueuedMessage``);
``entry_*`` acts on one entry, ``queue_*`` on a whole queue, ``reservation_*``
on reserving and settling the head.

Every service is one transaction that first locks the session's lock row (the
Session row: ``select_for_update`` on PostgreSQL; SQLite's IMMEDIATE write
transactions serialise writers), so caps, positions and reservations hold under
concurrency. Identity-bound calls pass a :class:`SessionIdentity` and get
``SessionIdentityMismatch`` when it is stale. Errors are
``sessionqueues.exceptions``; time comes from ``queueproject.clock``.

Callers import this package (``from sessionqueues import services``); the
names below are its public surface.
"""

from sessionqueues.services.blocked import (
    Actor,
    delivery_failure_clear,
    delivery_failure_record,
    queue_skip_head,
    reservation_release_stuck,
    session_resume_auto_run,
)
from sessionqueues.services.common import (
    APPEND_SEPARATOR,
    MAX_ATTACHMENTS,
    MAX_REFERENCES,
    MERGE_SEPARATOR,
    REFERENCES_KEY,
    SENDER_TASK_KEY,
    Generations,
    SessionIdentity,
    snapshot,
)
from sessionqueues.services.entries import (
    Admission,
    LifecycleResult,
    NewEntry,
    apply_metadata_updates,
    entry_append_or_insert_tail,
    entry_delete,
    entry_edit,
    entry_insert,
    entry_lifecycle_upsert,
    entry_requeue,
    entry_restore,
    entry_take_head_with_generations,
    entry_upsert_by_coalesce_key,
)
from sessionqueues.services.ordering import (
    entry_auto_merge_up,
    entry_merge_up,
    queue_delete_all,
    queue_reorder,
)
from sessionqueues.services.pending_moves import (
    PENDING_FIELDS,
    pending_move_delete,
    pending_move_delete_if_match,
    pending_move_set,
    pending_move_take,
)
from sessionqueues.services.recovery import (
    DISPATCHER_KIND,
    Recovered,
    reservation_recover,
)
from sessionqueues.services.reservations import (
    entry_take_head,
    reservation_acknowledge,
    reservation_acknowledge_by_id,
    reservation_acknowledge_delivery,
    reservation_discard,
    reservation_mark_attempted,
    reservation_release,
    reservation_reserve_for_agent,
    reservation_reserve_for_delivery,
    reservation_reserve_head,
    reservation_reserve_head_if_auto_run,
)
from sessionqueues.services.send_now import (
    SendNowExpectation,
    queue_send_now_acknowledge,
    queue_send_now_claim,
    queue_send_now_restore,
)
from sessionqueues.services.sessions import (
    session_create,
    session_pause_auto_run_if_pending,
    session_reincarnate,
    session_set_agent_ready,
    session_set_auto_merge,
    session_set_auto_run,
    task_archive,
    task_create,
)
from sessionqueues.services.transfer import (
    queue_purge_session,
    queue_purge_task,
    queue_replace,
    queue_transfer,
)

__all__ = [
    "APPEND_SEPARATOR",
    "DISPATCHER_KIND",
    "MAX_ATTACHMENTS",
    "MAX_REFERENCES",
    "MERGE_SEPARATOR",
    "PENDING_FIELDS",
    "REFERENCES_KEY",
    "SENDER_TASK_KEY",
    "Actor",
    "Admission",
    "Generations",
    "LifecycleResult",
    "NewEntry",
    "Recovered",
    "SendNowExpectation",
    "SessionIdentity",
    "apply_metadata_updates",
    "delivery_failure_clear",
    "delivery_failure_record",
    "entry_append_or_insert_tail",
    "entry_auto_merge_up",
    "entry_delete",
    "entry_edit",
    "entry_insert",
    "entry_lifecycle_upsert",
    "entry_merge_up",
    "entry_requeue",
    "entry_restore",
    "entry_take_head",
    "entry_take_head_with_generations",
    "entry_upsert_by_coalesce_key",
    "pending_move_delete",
    "pending_move_delete_if_match",
    "pending_move_set",
    "pending_move_take",
    "queue_delete_all",
    "queue_purge_session",
    "queue_purge_task",
    "queue_reorder",
    "queue_replace",
    "queue_send_now_acknowledge",
    "queue_send_now_claim",
    "queue_send_now_restore",
    "queue_skip_head",
    "queue_transfer",
    "reservation_acknowledge",
    "reservation_acknowledge_by_id",
    "reservation_acknowledge_delivery",
    "reservation_discard",
    "reservation_mark_attempted",
    "reservation_recover",
    "reservation_release",
    "reservation_release_stuck",
    "reservation_reserve_for_agent",
    "reservation_reserve_for_delivery",
    "reservation_reserve_head",
    "reservation_reserve_head_if_auto_run",
    "session_create",
    "session_pause_auto_run_if_pending",
    "session_reincarnate",
    "session_resume_auto_run",
    "session_set_agent_ready",
    "session_set_auto_merge",
    "session_set_auto_run",
    "snapshot",
    "task_archive",
    "task_create",
]
