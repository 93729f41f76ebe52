"""Raw SQL of the session queues (only what the ORM cannot say in one statement).

The statements run while the caller holds the session's lock row, so they
need no row locks of their own; they exist to save a round trip on the hot
path (read the row, then write it → one ``UPDATE``/``DELETE … RETURNING``).
Portable: PostgreSQL and SQLite ≥ 3.35. Parameters are prepared by the model
fields (``services/reservations.py``), so UUIDs and times are stored as the ORM stores them.
"""

# Reserve the session's visible head (lowest position) for delivery: stamp the
# reservation id, owner and time, and return the row; no row when nothing is visible.
RESERVE_HEAD = """
UPDATE sessionqueues_queuedmessage
SET reservation_id = %(reservation_id)s, reservation_owner = %(owner)s, reserved_at = %(now)s
WHERE id = (
    SELECT id FROM sessionqueues_queuedmessage
    WHERE session_id = %(session_id)s AND reservation_id IS NULL
    ORDER BY position
    LIMIT 1
)
RETURNING *
"""

# Delete exactly the entry reserved under ``reservation_id`` in this session and
# return it; no row when that reservation is not open here (any more).
ACKNOWLEDGE = """
DELETE FROM sessionqueues_queuedmessage
WHERE session_id = %(session_id)s AND reservation_id = %(reservation_id)s
RETURNING *
"""

# The dispatcher's reserve: as RESERVE_HEAD, also naming the holder (the
# dispatcher's worker id) and, for at-most-once delivery, crossing that
# boundary at once; nothing while a dispatcher reservation of the session is
# still open, so one session never has two deliveries in flight, whichever
# thread, process or host asks (the caller holds the session's lock row).
RESERVE_HEAD_FOR_AGENT = """
UPDATE sessionqueues_queuedmessage
SET reservation_id = %(reservation_id)s, reservation_owner = %(owner)s, reserved_at = %(now)s,
    reserved_by = %(holder)s, delivery_attempted = delivery_attempted OR %(attempted)s
WHERE id = (
    SELECT id FROM sessionqueues_queuedmessage
    WHERE session_id = %(session_id)s AND reservation_id IS NULL
    ORDER BY position
    LIMIT 1
) AND NOT EXISTS (
    SELECT 1 FROM sessionqueues_queuedmessage
    WHERE session_id = %(session_id)s AND reservation_id IS NOT NULL AND reserved_by <> ''
)
RETURNING *
"""

# The dispatcher's acknowledge: as ACKNOWLEDGE, only while ``holder`` holds it.
ACKNOWLEDGE_HELD = """
DELETE FROM sessionqueues_queuedmessage
WHERE session_id = %(session_id)s AND reservation_id = %(reservation_id)s
    AND reserved_by = %(holder)s
RETURNING *
"""
