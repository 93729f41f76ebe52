"""Raw SQL of the group queues: only the hot paths the ORM cannot say in one
statement (PostgreSQL). Named parameters; table and column names are Django's
defaults for ``groupqueues.Message`` (``groupqueues_message``). They run
through ``queueproject.rawsql.cursor()`` (server-side prepared statements)."""

import functools

from queueproject.rawsql import model_columns

# The PostgreSQL claim: ONE statement (one round trip, autocommit is enough).
# - ``lapsed``, ``ready_above`` and ``ready`` lock at most n candidates (all
#   three together) in claim order with FOR UPDATE SKIP LOCKED, from the
#   partial indexes gq_msg_lease and gq_msg_claimable; all are MATERIALIZED so
#   the planner cannot turn them into a semi-join that locks more rows than
#   the LIMIT (the known `IN (… LIMIT n FOR UPDATE SKIP LOCKED)` trap).
# - ``open`` reads the collection row's ``paused`` flag (a pause is seen by
#   the very next claim; paused or gone, the floors are NULL and no index scan
#   finds a row) and the newest version of its claim floor (``ClaimFloor``,
#   two probes of gq_claimfloor_version: the max, then its row) while
#   fresh: computed at most FLOOR_FRESH_SECONDS ago and at most
#   FLOOR_MARGIN_SECONDS in this claim's future (clocks apart, a refresh
#   racing the claim); otherwise floors that exclude nothing.
# - The floor is why claims stay fast behind a long-held transaction: acked
#   and claimed rows leave dead entries at the head of both indexes, which
#   vacuum cannot remove (nor index scans mark dead) while a transaction older
#   than them is open, and a scan from the head visits every one of them in the
#   heap (70 ms per claim after 100,000 claimed and acked). ``ready`` seeks to
#   the (priority, ready time, seq) floor in gq_msg_claimable and ``lapsed`` to the
#   lease floor in gq_msg_lease, so they walk only what died since the last
#   refresh (CLAIM_FLOOR_ADVANCE_POSTGRES, every QUEUE_CLAIM_FLOOR_INTERVAL).
#   ``ready_above`` takes the rows of priorities above the
#   floor's (enqueued since: the only ready rows below the floor in claim
#   order); its range holds no entry unless such priorities were used.
# - ``async_commit`` (QUEUE_ASYNC_COMMIT_CLAIMS, only in autocommit): ``open``
#   also turns synchronous_commit off for this statement's own transaction, so
#   its commit does not wait for the WAL flush (no extra round trip).
# - "claim order" is ``models.CLAIM_ORDER`` (priority DESC, deliver_after,
#   seq), spelled out in each ORDER BY below; tests/groupqueues/
#   test_claim_order.py pins every one of them to that tuple.
# - ``picked`` keeps the first n of the union in claim order; the rest of the
#   locked rows are released at commit untouched.
# - the UPDATE claims the picked rows with a fresh random token each
#   (gen_random_uuid: 122 random bits), except expired candidates (dead
#   ``expired``) and those out of attempts (dead ``exhausted``), which are
#   never handed out. RETURNING gives every row; the caller keeps the claimed
#   (the payload as text: decoded by the caller whatever the result format).
FLOOR_FRESH_SECONDS = 60
# How far claims start below the computed floor (covers clocks apart and
# enqueues committing up to this long after they read the time), and how far
# in a claim's future a floor may have been computed and still be used: a
# refresh that read its clock just after a claim did and committed before
# the claim's snapshot is in that claim's future by a few milliseconds (with
# no tolerance the claim walked the whole dead head: 27,000 buffers, about
# once per refresh, in bench/held_xact_bench.py).
FLOOR_MARGIN_SECONDS = 2
# A collection row that uses ordering keys, fairness or limits: the plain claim
# finds nothing in it (its caller then re-reads the collection and takes the
# featured claim below), so a worker holding an old copy of the row can never
# hand out a keyed message without the key rules.
USES_FEATURES = (
    "uses_ordering_keys OR fairness <> 'none' OR max_in_flight IS NOT NULL"
    " OR max_in_flight_per_key IS NOT NULL OR rate_limit_count IS NOT NULL"
)
_CLAIM_CTES = f"""
open AS (
    SELECT CASE WHEN fresh THEN f.priority ELSE 1000 END AS priority,
           CASE WHEN fresh THEN f.ready ELSE '-infinity' END AS ready,
           CASE WHEN fresh THEN f.seq ELSE 0 END AS seq,
           CASE WHEN fresh THEN f.lease ELSE '-infinity' END AS lease
    FROM (SELECT id FROM groupqueues_collection WHERE id = %(collection_id)s AND NOT paused
            AND NOT ({USES_FEATURES})
            AND CASE WHEN %(async_commit)s
                     THEN set_config('synchronous_commit', 'off', true) = 'off' ELSE true END
         ) AS c
         LEFT JOIN groupqueues_claimfloor AS f ON f.collection_id = c.id AND f.version = (
             SELECT max(version) FROM groupqueues_claimfloor WHERE collection_id = c.id),
         LATERAL (SELECT f.computed_at <= %(now)s + interval '{FLOOR_MARGIN_SECONDS} s'
                     AND f.computed_at > %(now)s - interval '{FLOOR_FRESH_SECONDS} s' AS fresh) s
), lapsed AS MATERIALIZED (
    SELECT seq, priority, deliver_after, expires_at, attempt, max_attempts
    FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND state = 'claimed'
      AND lease_expires_at >= (SELECT lease FROM open) AND lease_expires_at <= %(now)s
    ORDER BY priority DESC, deliver_after, seq
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), ready_above AS MATERIALIZED (
    SELECT seq, priority, deliver_after, expires_at, attempt, max_attempts
    FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND state = 'ready'
      AND priority > (SELECT priority FROM open) AND deliver_after <= %(now)s
    ORDER BY priority DESC, deliver_after, seq
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), ready AS MATERIALIZED (
    SELECT seq, priority, deliver_after, expires_at, attempt, max_attempts
    FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND state = 'ready'
      AND priority <= (SELECT priority FROM open)
      AND (deliver_after, seq) >= ((SELECT ready FROM open), (SELECT seq FROM open))
      AND deliver_after <= %(now)s
    ORDER BY priority DESC, deliver_after, seq
    LIMIT %(n)s - (SELECT count(*) FROM ready_above)
    FOR UPDATE SKIP LOCKED
), picked AS MATERIALIZED (
    SELECT seq,
           CASE WHEN expires_at <= %(now)s THEN 'expired'
                WHEN attempt >= max_attempts THEN 'exhausted' END AS death
    FROM (SELECT * FROM lapsed UNION ALL SELECT * FROM ready_above
          UNION ALL SELECT * FROM ready) AS candidates
    ORDER BY priority DESC, deliver_after, seq
    LIMIT %(n)s
)
"""
_CLAIM_UPDATE = """
UPDATE groupqueues_message AS m SET
    state = CASE WHEN p.death IS NULL THEN 'claimed' ELSE 'dead' END,
    dead_reason = p.death,
    died_at = CASE WHEN p.death IS NULL THEN NULL ELSE %(now)s END,
    claim_token = CASE WHEN p.death IS NULL THEN gen_random_uuid() END,
    claimed_by = CASE WHEN p.death IS NULL THEN %(worker_id)s ELSE '' END,
    claimed_at = CASE WHEN p.death IS NULL THEN %(now)s END,
    lease_expires_at = CASE WHEN p.death IS NULL THEN %(lease_expires_at)s END,
    attempt = CASE WHEN p.death IS NULL THEN m.attempt + 1 ELSE m.attempt END
FROM picked AS p
WHERE m.seq = p.seq
RETURNING m.state, m.seq, m.id, m.collection_id, m.payload::text AS payload, m.priority, m.attempt,
          m.max_attempts, m.claim_token, m.claimed_by, m.lease_expires_at, m.enqueued_at,
          m.deliver_after, m.expires_at, m.enqueued_by, m.last_error
"""
CLAIM_POSTGRES = "WITH" + _CLAIM_CTES + _CLAIM_UPDATE

# Ack one message: delete it only while claimed with that token and the lease
# has not lapsed (one statement; autocommit). "Claimed" is said by the token
# alone (only a claimed row has one: constraint gq_msg_token_only_while_claimed)
# so the planner finds the row by ``id``: with ``state = 'claimed'`` it may
# take gq_msg_lease instead (``collection_id = … AND lease_expires_at > now``),
# which looks cheap when the statistics saw few claimed rows but holds every
# in-flight claim of the collection, and, until vacuumed, every claim since
# (a batch ack slowed down batch after batch in the bench: bench/README.md).
ACK_POSTGRES = """
DELETE FROM groupqueues_message
WHERE id = %(id)s AND claim_token = %(token)s AND collection_id = %(collection_id)s
  AND lease_expires_at > %(now)s
"""

# Ack a batch: delete those of the (id, token) pairs still held (claimed with
# that token, lease not lapsed; found by id as in ACK_POSTGRES) in one
# statement; RETURNING says which pairs landed (id and token: the same id
# named with two tokens must not count the wrong one as acked).
# Pairs arrive as two parallel arrays (unnest keeps them aligned).
ACK_BATCH_POSTGRES = """
DELETE FROM groupqueues_message AS m
USING unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS a(id, token)
WHERE m.id = a.id AND m.claim_token = a.token AND m.collection_id = %(collection_id)s
  AND m.lease_expires_at > %(now)s
RETURNING m.id, m.claim_token
"""


# Ack held messages and claim the next ones in ONE statement (one round trip,
# one commit): a consumer otherwise spends a second round trip and a second
# commit per batch (per message at batch 1) on the ack. ``acked`` is the fenced
# DELETE of ACK_POSTGRES (one pair: cheaper to bind than arrays) or
# ACK_BATCH_POSTGRES; a held message is never a claim candidate (its lease
# runs; once it has lapsed the DELETE leaves it alone), so the two parts cannot
# meet. Rows: the claimed ones as CLAIM_POSTGRES returns them; one ``acked``
# row whose ``seq`` column counts the acks that landed; and, only when that is
# fewer than the ``pairs`` given, one ``landed`` row per landed pair (``id``
# and ``claim_token`` columns). Always synchronous commit (the acks).
def _acking(ack: str) -> str:
    return (
        f"WITH acked AS ({ack}),{_CLAIM_CTES}, claimed AS ({_CLAIM_UPDATE})\n"
        "SELECT * FROM claimed\n"
        f"UNION ALL SELECT 'acked', count(*){', NULL' * 14} FROM acked\n"
        f"UNION ALL SELECT 'landed', NULL, id{', NULL' * 5}, claim_token{', NULL' * 7}\n"
        "  FROM acked\n"
        "  WHERE (SELECT count(*) FROM acked) < %(pairs)s\n"
    )


ACK_AND_CLAIM_POSTGRES = _acking(ACK_POSTGRES + "RETURNING id, claim_token\n")
ACK_BATCH_AND_CLAIM_POSTGRES = _acking(ACK_BATCH_POSTGRES)

# ------------------------------------------------------------ claim floors
# The claim floor of a collection (``ClaimFloor``; read by the claim above)
# and the three ways it changes. Each adds version + 1 of the newest version
# (``prev``) with INSERT … ON CONFLICT DO NOTHING: of two writers that read
# the same newest version one adds nothing (RETURNING says which), so a
# floor computed from a snapshot that missed a release is never written over
# the release's (see CLAIM_FLOOR_LOWER_POSTGRES). Each also deletes the
# versions before the previous one (claims read the newest index entry and
# stop: the deleted ones below are never walked) and locks the collection
# row FOR KEY SHARE, as an enqueue does (a deleted collection gets no row).
_FLOOR_PREV = """prev AS (
    SELECT * FROM groupqueues_claimfloor WHERE collection_id = %(collection_id)s
    ORDER BY version DESC LIMIT 1
), queue AS (
    SELECT id FROM groupqueues_collection WHERE id = %(collection_id)s FOR KEY SHARE
)"""
_FLOOR_INSERT = """INSERT INTO groupqueues_claimfloor
    (collection_id, version, priority, ready, seq, lease, computed_at)
"""
_FLOOR_TAIL = """    ON CONFLICT (collection_id, version) DO NOTHING
    RETURNING version
), gone AS (
    DELETE FROM groupqueues_claimfloor
    WHERE collection_id = %(collection_id)s AND version < (SELECT version - 1 FROM added)
)
SELECT (SELECT count(*) FROM added), (SELECT count(*) FROM prev)
"""

# The full refresh (the maintenance pass, every QUEUE_MAINTENANCE_INTERVAL;
# also the first floor of a collection): the highest priority of its ready
# rows (0 if none); the first (ready time, seq) of its ready rows (the head of
# each priority: a loose index scan, one probe per priority used) and of
# ``now - margin``; and the lease floor as the incremental refresh below
# computes it (from the newest version's lease floor, or from the start).
# Claimed rows are not counted in the ready floor: a release or reclaim
# that puts one back below it lowers the floor itself, and a release that
# commits after this refresh's snapshot adds its own version first (this
# one then adds nothing, and the caller computes it again). A row made
# ready after this pass is not below the floor in claim order unless its
# ready time is more than ``margin`` before the pass and it commits after
# it (an enqueue in a long transaction, clocks further apart than the
# margin, an enqueue or replace with a ``deliver_after`` in the past, a
# replace that lowers the priority of a message released above the priority
# floor: a *straggler*): the next full refresh, whose probes start from the head,
# lowers the floor to it. Its probes walk every dead entry of
# ``gq_msg_claimable`` behind a held transaction, once per maintenance pass
# (lease stragglers are found by the pass's reclaim).
CLAIM_FLOOR_POSTGRES = (
    """WITH RECURSIVE heads AS (
    (SELECT priority, deliver_after, seq FROM groupqueues_message
     WHERE collection_id = %(collection_id)s AND state = 'ready'
     ORDER BY priority DESC, deliver_after, seq LIMIT 1)
    UNION ALL
    SELECT h.priority, h.deliver_after, h.seq FROM heads AS above, LATERAL (
        SELECT priority, deliver_after, seq FROM groupqueues_message
        WHERE collection_id = %(collection_id)s AND state = 'ready'
          AND priority < above.priority
        ORDER BY priority DESC, deliver_after, seq LIMIT 1
    ) AS h
), low AS (
    SELECT deliver_after, seq FROM (
        SELECT deliver_after, seq FROM heads
        UNION ALL SELECT %(now)s - %(margin)s, 0
    ) AS k ORDER BY deliver_after, seq LIMIT 1
), """
    + _FLOOR_PREV
    + """, lapsed AS (
    SELECT lease_expires_at FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND state = 'claimed'
      AND lease_expires_at >= COALESCE((SELECT lease FROM prev), '-infinity')
      AND lease_expires_at < %(now)s + %(lease_lead)s
    ORDER BY lease_expires_at LIMIT 1
), added AS (
    """
    + _FLOOR_INSERT
    + """    SELECT queue.id, COALESCE((SELECT version FROM prev), 0) + 1,
        COALESCE((SELECT max(priority) FROM heads), 0),
        (SELECT deliver_after FROM low), (SELECT seq FROM low),
        LEAST((SELECT lease_expires_at FROM lapsed), %(now)s + %(lease_lead)s), %(now)s
    FROM queue
"""
    + _FLOOR_TAIL
)

# The incremental refresh (``services.claim_floor``: by the claimers, at most
# once per QUEUE_CLAIM_FLOOR_INTERVAL per collection; ``due`` is the fence:
# nothing happens unless the newest version is fresh and older than the
# interval; nor while a release or reclaim of the collection is under way:
# CLAIM_FLOOR_LOCK_POSTGRES, so a claimer never waits for one). It starts
# every probe at the previous floor, not at the head,
# so it walks only what died since then (about one interval of claims):
# - priority: the previous one, or the highest of the ready rows above it
#   (``heads_above``: the rows the claim's ``ready_above`` reads; usually none);
# - (ready time, seq): the first ready row of each priority above the
#   previous one (``heads_above``, from the head: such a row may have waited
#   there while the floor rose, e.g. one released after the priority floor
#   fell below it), of each priority at or below it at or above the previous
#   floor (``heads``: the loose index scan of the full refresh, each probe
#   starting at the previous floor), and ``now - margin``. Every ready row of
#   those priorities lies at or above the previous floor (new ones at ``now``
#   or later, released and reclaimed ones lowered it), stragglers aside;
# - lease: the earliest lease at or above the previous lease floor and
#   before ``now + lease_lead`` (claimed rows whose leases lapsed or are about
#   to, and nobody claimed again), or that moment. Claims walk the dead lease
#   entries from this floor up to their ``now`` (the acked claims of one lease
#   period ago, as many a second as are claimed), so it lies ahead of ``now``:
#   ``lease_lead`` is the shortest lease (VISIBILITY_TIMEOUT_MIN, 1 s) less
#   a lease margin (services.claim_floor.LEASE_MARGIN, 0.5 s), as a claim or
#   extend gives a lease of at least 1 s from its own now. A claim that read
#   its clock more than the lease margin before this refresh (clocks apart,
#   a slow statement) and commits after it with a 1 s lease is a *lease
#   straggler*: its lapse is seen by the maintenance pass's reclaim, at most
#   one maintenance interval later, instead of by the next claim.
# Unlike the full refresh it does not keep the floor below the claimed rows
# (finding them walks every claim of a lease period): a release or a reclaim
# lowers the floor itself when it puts one back (CLAIM_FLOOR_LOWER_POSTGRES).
CLAIM_FLOOR_ADVANCE_POSTGRES = (
    "WITH RECURSIVE "
    + _FLOOR_PREV
    + """, due AS (
    SELECT * FROM prev
    WHERE computed_at <= %(now)s - %(interval)s
      AND computed_at > %(now)s - interval '{FLOOR_FRESH_SECONDS} s'
      AND pg_try_advisory_xact_lock(hashtextextended('claim-floor/' || %(collection_id)s::text, 0))
), heads_above AS (
    (SELECT priority, deliver_after, seq FROM groupqueues_message
     WHERE collection_id = %(collection_id)s AND state = 'ready'
       AND priority > (SELECT priority FROM due)
     ORDER BY priority DESC, deliver_after, seq LIMIT 1)
    UNION ALL
    SELECT h.priority, h.deliver_after, h.seq FROM heads_above AS above, LATERAL (
        SELECT priority, deliver_after, seq FROM groupqueues_message
        WHERE collection_id = %(collection_id)s AND state = 'ready'
          AND priority < above.priority AND priority > (SELECT priority FROM due)
        ORDER BY priority DESC, deliver_after, seq LIMIT 1
    ) AS h
), heads AS (
    (SELECT priority, deliver_after, seq FROM groupqueues_message
     WHERE collection_id = %(collection_id)s AND state = 'ready'
       AND priority <= (SELECT priority FROM due)
       AND (deliver_after, seq) >= ((SELECT ready FROM due), (SELECT seq FROM due))
     ORDER BY priority DESC, deliver_after, seq LIMIT 1)
    UNION ALL
    SELECT h.priority, h.deliver_after, h.seq FROM heads AS above, LATERAL (
        SELECT priority, deliver_after, seq FROM groupqueues_message
        WHERE collection_id = %(collection_id)s AND state = 'ready'
          AND priority <= above.priority - 1
          AND (deliver_after, seq) >= ((SELECT ready FROM due), (SELECT seq FROM due))
        ORDER BY priority DESC, deliver_after, seq LIMIT 1
    ) AS h
), low AS (
    SELECT deliver_after, seq FROM (
        SELECT deliver_after, seq FROM heads_above
        UNION ALL SELECT deliver_after, seq FROM heads
        UNION ALL SELECT %(now)s - %(margin)s, 0
    ) AS k ORDER BY deliver_after, seq LIMIT 1
), lapsed AS (
    SELECT lease_expires_at FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND state = 'claimed'
      AND lease_expires_at >= (SELECT lease FROM due)
      AND lease_expires_at < %(now)s + %(lease_lead)s
    ORDER BY lease_expires_at LIMIT 1
), added AS (
    """
    + _FLOOR_INSERT
    + """    SELECT queue.id, due.version + 1,
        GREATEST(due.priority, (SELECT max(priority) FROM heads_above)),
        (SELECT deliver_after FROM low), (SELECT seq FROM low),
        LEAST((SELECT lease_expires_at FROM lapsed), %(now)s + %(lease_lead)s),
        %(now)s
    FROM queue, due
"""
    + _FLOOR_TAIL
).replace("{FLOOR_FRESH_SECONDS}", str(FLOOR_FRESH_SECONDS))

# Lower the floor under rows put back in their old place (a release: ``put``
# is the released row, already ready in this transaction, as is a row whose
# priority an operator changed; a reclaim: the
# claimed rows whose lease lapsed, before the UPDATE that gives them back,
# in its transaction): the same floor, except (ready time, seq) lowered to
# the first of those rows at or below its priority (higher ones are read by
# ``ready_above``). Always adds a version, even an unchanged one, so that it
# races an incremental refresh through the unique constraint: if the refresh
# read the same newest version (its snapshot may not show the row put back),
# one of the two adds nothing; the caller then tries again from the newest
# version. ``{put}`` is a condition on groupqueues_message. The caller first
# takes CLAIM_FLOOR_LOCK_POSTGRES in the same transaction.
CLAIM_FLOOR_LOWER_POSTGRES = (
    "WITH "
    + _FLOOR_PREV
    + """, put AS (
    SELECT deliver_after, seq FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND {put}
      AND priority <= (SELECT priority FROM prev)
    ORDER BY deliver_after, seq LIMIT 1
), low AS (
    SELECT deliver_after, seq FROM (
        SELECT ready AS deliver_after, seq FROM prev
        UNION ALL SELECT deliver_after, seq FROM put
    ) AS k ORDER BY deliver_after, seq LIMIT 1
), added AS (
    """
    + _FLOOR_INSERT
    + """    SELECT queue.id, prev.version + 1, prev.priority,
        (SELECT deliver_after FROM low), (SELECT seq FROM low), prev.lease, prev.computed_at
    FROM queue, prev
"""
    + _FLOOR_TAIL
)
# Held by a release or reclaim until it commits: incremental refreshes of the
# collection skip their turn meanwhile instead of waiting for its version.
CLAIM_FLOOR_LOCK_POSTGRES = (
    "SELECT pg_advisory_xact_lock(hashtextextended('claim-floor/' || %(collection_id)s::text, 0))"
)
CLAIM_FLOOR_LOWER_TO_MESSAGE_POSTGRES = CLAIM_FLOOR_LOWER_POSTGRES.replace(
    "{put}", "id = %(id)s AND state = 'ready'"
)
CLAIM_FLOOR_LOWER_LAPSED_POSTGRES = CLAIM_FLOOR_LOWER_POSTGRES.replace(
    "{put}", "state = 'claimed' AND lease_expires_at <= %(now)s"
)

# Every enqueue statement locks the collection row FOR KEY SHARE (in place of
# a foreign key checked once per row; see Message.collection): if the
# collection is gone, nothing is inserted.
# It also reads how the collection partitions its messages (``fair_key``,
# see Message): from the locked row as it is now, not from the caller's copy,
# so no message of a partitioned collection goes in without its partition key
# (a change of partitioning locks the row FOR UPDATE: services.collections).
_LOCK_QUEUE = """WITH queue AS (
    SELECT id, fairness,
           fairness <> 'none' OR max_in_flight_per_key IS NOT NULL AS partitioned
    FROM groupqueues_collection WHERE id = %(collection_id)s FOR KEY SHARE
)"""


def _fair_key(ordering_key: str) -> str:
    """The partition key of a row whose ordering key is ``ordering_key``."""
    return (
        f"CASE WHEN queue.fairness = 'ordering_key' THEN COALESCE({ordering_key}::varchar, '')"
        " WHEN queue.partitioned THEN %(enqueued_by)s::varchar END"
    )


_INSERT_MESSAGE = """INSERT INTO groupqueues_message (id, group_id, collection_id, payload,
    priority, enqueued_at, deliver_after, expires_at, state, claimed_by, attempt, max_attempts,
    enqueued_by, idempotency_key, ordering_key, fair_key)
"""

# Enqueue 1..500 messages in ONE statement (autocommit is enough). The rows
# arrive as three parallel arrays zipped by ROWS FROM: ``ids`` (a uuid[]
# literal), ``payloads`` (one JSON array, serialised by the client in one call)
# and ``options`` (one JSON array of objects holding only the non-default
# options: "pr" priority, "da" deliver_after, "ea" expires_at, "ma"
# max_attempts, "k" idempotency key, "ok" ordering key). Text and JSON parameters are parsed by
# the server, much cheaper than psycopg binding arrays element by element.
# WITH ORDINALITY keeps the list order, so seq follows it. A row whose
# idempotency key is already taken in the collection is skipped by the unique
# partial index (concurrent duplicates too: the later INSERT waits for the
# earlier one, then skips). RETURNING names the rows inserted.
# The wake-up rides along as an InitPlan: evaluated once, only if a row was
# inserted and ``wake`` is true; PostgreSQL delivers it at commit.
ENQUEUE_POSTGRES = (
    _LOCK_QUEUE
    + ", ins AS (\n"
    + _INSERT_MESSAGE
    + """    SELECT e.id, %(group_id)s, queue.id, e.payload,
        COALESCE((e.opt->>'pr')::int, 0), %(now)s,
        COALESCE((e.opt->>'da')::timestamptz, %(now)s), (e.opt->>'ea')::timestamptz,
        'ready', '', 0, COALESCE((e.opt->>'ma')::int, %(max_attempts)s), %(enqueued_by)s,
        e.opt->>'k', e.opt->>'ok', """
    + _fair_key("e.opt->>'ok'")
    + """
    FROM queue, ROWS FROM (unnest(%(ids)s::uuid[]), jsonb_array_elements(%(payloads)s::jsonb),
                           jsonb_array_elements(%(options)s::jsonb))
         WITH ORDINALITY AS e(id, payload, opt, ord)
    ORDER BY e.ord
    ON CONFLICT (collection_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id
)
SELECT ins.id, (SELECT 1 FROM (SELECT pg_notify(%(channel)s, '')) AS n WHERE %(wake)s)
FROM ins
"""
)

# Enqueue a batch of plain messages (no option set, so no idempotency key):
# ENQUEUE_POSTGRES without the options array and without ON CONFLICT, whose
# speculative insertion costs every row an extra WAL record (measurably less
# server time per batch: bench/README.md); it answers one row, the count
# inserted (0: the collection is gone), instead of every id.
ENQUEUE_PLAIN_POSTGRES = (
    _LOCK_QUEUE
    + ", ins AS (\n"
    + _INSERT_MESSAGE
    + """    SELECT e.id, %(group_id)s, queue.id, e.payload, 0, %(now)s, %(now)s, NULL, 'ready',
        '', 0, %(max_attempts)s, %(enqueued_by)s, NULL, NULL, """
    + _fair_key("NULL")
    + """
    FROM queue, ROWS FROM (unnest(%(ids)s::uuid[]), jsonb_array_elements(%(payloads)s::jsonb))
         WITH ORDINALITY AS e(id, payload, ord)
    ORDER BY e.ord
    RETURNING 1
)
SELECT count(*), (SELECT 1 FROM (SELECT pg_notify(%(channel)s, '')) AS n
                  WHERE %(wake)s AND EXISTS (SELECT 1 FROM ins))
FROM ins
"""
)

# Enqueue one message: the single-row form of ENQUEUE_POSTGRES (cheaper to plan
# and run than unnest); same collection lock, idempotency and wake-up rules.
ENQUEUE_ONE_POSTGRES = (
    _LOCK_QUEUE
    + "\n"
    + _INSERT_MESSAGE
    + """SELECT %(id)s, %(group_id)s, queue.id, %(payload)s::jsonb, %(priority)s, %(now)s,
    %(deliver_after)s, %(expires_at)s, 'ready', '', 0, %(max_attempts)s, %(enqueued_by)s,
    %(key)s, %(ordering_key)s::varchar, """
    + _fair_key("%(ordering_key)s")
    + """
FROM queue
ON CONFLICT (collection_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id, (SELECT 1 FROM (SELECT pg_notify(%(channel)s, '')) AS n WHERE %(wake)s)
"""
)

# --- SQLite (raw only where the ORM's query building dominated the time) ---
# Django stores UUIDs there as 32 hex digits and datetimes as ISO text in UTC:
# the caller adapts parameters with connection.ops (see services).

# Claim one candidate inside the claim's IMMEDIATE transaction (executemany:
# one row per message, each with its own token); fenced by the live state.
CLAIM_ROW_SQLITE = """
UPDATE groupqueues_message
SET state = 'claimed', claim_token = %s, claimed_by = %s, claimed_at = %s,
    lease_expires_at = %s, attempt = attempt + 1
WHERE seq = %s AND state IN ('ready', 'claimed')
"""

# Ack a batch: one DELETE of the (id, token) pairs still held; RETURNING says
# which pairs landed (id and token). ``{ids}`` is "%s, " once per pair and
# ``{pairs}`` "(%s, %s), ": SQLite finds the rows through the ``id`` index
# only from a plain ``id IN`` list; with the row-value IN alone it scanned the
# whole table, other collections' rows included (bench/README.md).
ACK_BATCH_SQLITE = """
DELETE FROM groupqueues_message
WHERE id IN ({ids}) AND collection_id = %s AND lease_expires_at > %s
  AND (id, claim_token) IN (VALUES {pairs})
RETURNING id, claim_token
"""

# --- Database health (issue 16): REINDEX of the queue tables' indexes ---
# The valid indexes of the queue tables (PostgreSQL). A REINDEX CONCURRENTLY
# that failed leaves an invalid "<name>_ccnew" copy: skipped here (drop it).
QUEUE_INDEXES_POSTGRES = """
SELECT c.relname::text
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
WHERE t.relname::text = ANY(%(tables)s::text[]) AND i.indisvalid
  AND t.relnamespace = current_schema()::regnamespace
ORDER BY t.relname, c.relname
"""
# Rebuilds one index without blocking writes (not in a transaction block);
# ``{index}`` is a quoted identifier from QUEUE_INDEXES_POSTGRES.
REINDEX_CONCURRENTLY_POSTGRES = "REINDEX INDEX CONCURRENTLY {index}"
# SQLite has no CONCURRENTLY: rebuilds a table's indexes under its write lock.
REINDEX_TABLE_SQLITE = "REINDEX {table}"

# ------------------------------------------- ordering keys, fairness, limits
# The featured claim (docs/ordering-and-limits.md): collections that use
# ordering keys, fairness or limits claim through these instead of
# CLAIM_POSTGRES, which refuses them (USES_FEATURES). Parameters as
# CLAIM_POSTGRES plus ``per_key`` (max_in_flight_per_key or NULL); ``n`` is
# already cut to what max_in_flight and the rate limit allow (the caller holds
# the collection row's lock when the collection has limits, so the counts
# below are read after every earlier claim committed).

# ``m`` is the head of its ordering key (or has none): no live row of its key
# came before it, and no other row of its key is claimed (a redriven dead
# head must not run beside a later message of its key). Both probes read
# gq_msg_key / gq_msg_key_claimed and stop at the first entry.
_KEY_HEAD = """(m.ordering_key IS NULL OR (
    NOT EXISTS (SELECT 1 FROM groupqueues_message AS k
                WHERE k.collection_id = m.collection_id AND k.ordering_key = m.ordering_key
                  AND k.state IN ('ready', 'claimed') AND k.seq < m.seq)
    AND NOT EXISTS (SELECT 1 FROM groupqueues_message AS k
                    WHERE k.collection_id = m.collection_id AND k.ordering_key = m.ordering_key
                      AND k.state = 'claimed' AND k.seq <> m.seq)))"""
_CANDIDATE_COLUMNS = (
    "m.seq, m.priority, m.deliver_after, m.expires_at, m.attempt, m.max_attempts, m.fair_key"
)
# Due ready rows (claim order, through gq_msg_claimable) and claimed rows whose
# lease lapsed, both restricted to key heads.
_DUE = f"""m.collection_id = %(collection_id)s AND m.state = 'ready'
      AND m.deliver_after <= %(now)s AND {_KEY_HEAD}"""
_LAPSED = f"""SELECT {_CANDIDATE_COLUMNS} FROM groupqueues_message AS m
    WHERE m.collection_id = %(collection_id)s AND m.state = 'claimed'
      AND m.lease_expires_at <= %(now)s AND {_KEY_HEAD}
    ORDER BY m.lease_expires_at LIMIT %(n)s"""
# Without partitions: the first n heads in claim order.
_CANDIDATES_IN_ORDER = f"""cand AS MATERIALIZED (
    SELECT * FROM (SELECT {_CANDIDATE_COLUMNS} FROM groupqueues_message AS m WHERE {_DUE}
                   ORDER BY m.priority DESC, m.deliver_after, m.seq LIMIT %(n)s) AS due
    UNION ALL SELECT * FROM ({_LAPSED}) AS lapsed
)"""
# With partitions (fairness or max_in_flight_per_key), PostgreSQL: the
# partition keys with ready work by a loose index scan of gq_msg_fair (one
# probe per partition), then each partition's first heads in claim order
# (LATERAL, the same index), so a partition behind another's backlog is seen.
# Every ready row of a partitioned collection has a partition key (the enqueue
# statements take it from the locked collection row; a change of partitioning
# rewrites the live rows), so no scan of rows without one is needed: such a
# scan walked the whole backlog of gq_msg_claimable (0.7 s at 20,000 rows).
# With fairness, ``few`` takes each of the p partitions' first ceil(n/p) + 1
# heads (``rk``: the head's place in its partition; ``at_limit``: the last
# the LIMIT allowed), and ``cand`` is read only when the choice from ``few``
# may differ from the choice from ``cand`` (``_chosen_by_partition``).
_PARTS_POSTGRES = """parts AS (
    (SELECT fair_key AS k FROM groupqueues_message
     WHERE collection_id = %(collection_id)s AND state = 'ready' AND fair_key IS NOT NULL
     ORDER BY fair_key LIMIT 1)
    UNION ALL
    SELECT (SELECT fair_key FROM groupqueues_message
            WHERE collection_id = %(collection_id)s AND state = 'ready'
              AND fair_key IS NOT NULL AND fair_key > parts.k
            ORDER BY fair_key LIMIT 1)
    FROM parts WHERE parts.k IS NOT NULL
)"""


_RANK_IN_PARTITION = ", row_number() OVER (ORDER BY m.priority DESC, m.deliver_after, m.seq) AS rk"


def _partition_heads(limit: str, extra: str) -> str:
    """Each partition's first ``limit`` heads in claim order (plus ``extra``
    columns), then the lapsed leases."""
    return f"""SELECT c.* FROM parts, LATERAL (
        SELECT {_CANDIDATE_COLUMNS}{extra} FROM groupqueues_message AS m
        WHERE {_DUE} AND m.fair_key = parts.k
        ORDER BY m.priority DESC, m.deliver_after, m.seq LIMIT {limit}) AS c
    WHERE parts.k IS NOT NULL"""


_CANDIDATES_BY_PARTITION_POSTGRES = f"""{_PARTS_POSTGRES}, cand AS MATERIALIZED (
    {_partition_heads("%(n)s", "")}
    UNION ALL SELECT * FROM ({_LAPSED}) AS lapsed
)"""
_FEW_HEADS_POSTGRES = f"""few_limit AS (
    SELECT (%(n)s + p - 1) / p + 1 AS k FROM (
        SELECT GREATEST(count(*), 1) AS p FROM parts WHERE parts.k IS NOT NULL) AS counted
), few AS MATERIALIZED (
    SELECT h.*, h.rk = (SELECT k FROM few_limit) AS at_limit FROM (
        {_partition_heads("(SELECT k FROM few_limit)", _RANK_IN_PARTITION)}) AS h
    UNION ALL SELECT *, 0, false FROM ({_LAPSED}) AS lapsed
)"""
# SQLite (no LATERAL; one writer at a time and embedded-sized queues): every
# due head, ranked by the window below.
_CANDIDATES_BY_PARTITION_SQLITE = f"""cand AS (
    SELECT {_CANDIDATE_COLUMNS} FROM groupqueues_message AS m WHERE {_DUE}
    UNION ALL SELECT * FROM ({_LAPSED}) AS lapsed
)"""


# Rank each candidate within its partition (claim order); keep those its
# partition's max_in_flight_per_key still allows (claimed rows with a running
# lease count, through gq_msg_fair_claimed); order them in claim order, or with
# fairness round-robin (every partition's first, then every second, ...;
# priority still first); take n.
def _chosen(cand: str, name: str, *, fair: bool, carry: str = "") -> str:
    """CTEs ``<name>_ranked`` and ``<name>``: the seqs (and ``carry``
    columns) chosen from the candidates ``cand``."""
    round_ = "r.rn, " if fair else ""
    return f"""{name}_ranked AS (
    SELECT c.*, row_number() OVER (
        PARTITION BY c.fair_key ORDER BY c.priority DESC, c.deliver_after, c.seq) AS rn
    FROM {cand} AS c
), {name} AS (
    SELECT r.seq{carry} FROM {name}_ranked AS r
    WHERE CAST(%(per_key)s AS integer) IS NULL OR r.fair_key IS NULL OR r.rn + (
        SELECT count(*) FROM groupqueues_message AS f
        WHERE f.collection_id = %(collection_id)s AND f.state = 'claimed'
          AND f.fair_key = r.fair_key AND f.lease_expires_at > %(now)s)
        <= CAST(%(per_key)s AS integer)
    ORDER BY r.priority DESC, {round_}r.deliver_after, r.seq
    LIMIT %(n)s
)"""


# The choice with fairness (PostgreSQL), from ``few`` when that is the
# choice from ``cand``, which is then never read: with p partitions a claim
# of n reads about n + p heads instead of p * n (1,100 rows instead of 10,000
# at 10 tenants, n = 100). Exact: a partition's heads past its ``few`` sort
# after its last ``few`` head (lower priority, or the same with a later round
# ``rn``), so if no chosen row is a last head (``at_limit``), nothing ``few``
# left out would have been chosen; nor would a head that max_in_flight_per_key
# cut (it cuts a partition's rounds from some rn on). Otherwise (priorities
# that differ across partitions, a partition with fewer heads than its share)
# the choice is made from ``cand``, as before.
def _chosen_by_partition() -> str:
    few = _chosen("few", "few_chosen", fair=True, carry=", r.ctid, r.at_limit")
    every = _chosen("cand", "all_chosen", fair=True, carry=", r.ctid")
    return f"""{few}, {every}, chosen AS (
    SELECT seq, ctid FROM few_chosen
    WHERE NOT EXISTS (SELECT 1 FROM few_chosen WHERE at_limit)
    UNION ALL
    SELECT seq, ctid FROM all_chosen WHERE EXISTS (SELECT 1 FROM few_chosen WHERE at_limit)
)"""


# PostgreSQL candidates also carry the row's ctid, so ``locked`` finds the
# chosen rows by a TID scan instead of one descent of the primary key each
# (a third of the buffers of a fairness claim of 100). A row updated since
# the statement's snapshot is skipped: the lock re-checks its newer version,
# whose ctid differs.
def _with_ctid(candidates: str) -> str:
    return candidates.replace(_CANDIDATE_COLUMNS, "m.ctid, " + _CANDIDATE_COLUMNS)


# CLAIM_POSTGRES's UPDATE, recording a killed candidate's key headship.
_CLAIM_UPDATE_FEATURED = _CLAIM_UPDATE.replace(
    "FROM picked",
    "    , died_key_head = (p.death IS NOT NULL AND m.ordering_key IS NOT NULL)\nFROM picked",
)


# A collection row with limits (claimed only under its lock: the statement's
# ``limited`` parameter says it holds it; a caller whose copy of the row
# predates the limits finds nothing and re-reads it).
_LIMITED = (
    "max_in_flight IS NOT NULL OR max_in_flight_per_key IS NOT NULL OR rate_limit_count IS NOT NULL"
)


def _claim_featured_postgres(candidates: str, chosen: str) -> str:
    """The featured claim, ONE statement: choose (no locks), then lock the
    chosen rows by ctid (``= ANY (ARRAY(…))``: an InitPlan computed once; as
    ``IN (SELECT …)`` under FOR UPDATE the fairness statement took 1.5 s
    instead of 30 ms at a 20,000 backlog) with SKIP LOCKED (a row another
    claimer took meanwhile fails the re-checked state and is skipped: this
    claim then hands out fewer) and claim or kill them as CLAIM_POSTGRES
    does. A killed key head is recorded (``died_key_head``)."""
    return f"""WITH RECURSIVE open AS (
    SELECT 1 FROM groupqueues_collection WHERE id = %(collection_id)s AND NOT paused
      AND fairness = %(fairness)s
      AND (%(limited)s::boolean OR NOT ({_LIMITED}))
), {candidates}, {chosen}, locked AS MATERIALIZED (
    SELECT m.seq, m.expires_at, m.attempt, m.max_attempts FROM groupqueues_message AS m
    WHERE m.ctid = ANY (ARRAY(SELECT ctid FROM chosen)) AND m.collection_id = %(collection_id)s
      AND EXISTS (SELECT 1 FROM open)
      AND ((m.state = 'ready' AND m.deliver_after <= %(now)s)
           OR (m.state = 'claimed' AND m.lease_expires_at <= %(now)s))
    FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT seq,
           CASE WHEN expires_at <= %(now)s THEN 'expired'
                WHEN attempt >= max_attempts THEN 'exhausted' END AS death
    FROM locked
)
{_CLAIM_UPDATE_FEATURED}"""


def _claim_featured_sqlite(candidates: str, *, fair: bool) -> str:
    """The featured claim's choice on SQLite (its caller claims the rows in
    the same IMMEDIATE transaction): the chosen seqs with the candidate
    columns."""
    chosen = _chosen("cand", "chosen", fair=fair)
    return f"""WITH {candidates}, {chosen}
SELECT {_CANDIDATE_COLUMNS} FROM groupqueues_message AS m WHERE m.seq IN (SELECT seq FROM chosen)
"""


# (partitioned, fair) -> statement. Unpartitioned: keys and/or max_in_flight
# and the rate limit only.
CLAIM_FEATURED_POSTGRES = {
    (False, False): _claim_featured_postgres(
        _with_ctid(_CANDIDATES_IN_ORDER), _chosen("cand", "chosen", fair=False, carry=", r.ctid")
    ),
    (True, False): _claim_featured_postgres(
        _with_ctid(_CANDIDATES_BY_PARTITION_POSTGRES),
        _chosen("cand", "chosen", fair=False, carry=", r.ctid"),
    ),
    (True, True): _claim_featured_postgres(
        _with_ctid(f"{_CANDIDATES_BY_PARTITION_POSTGRES}, {_FEW_HEADS_POSTGRES}"),
        _chosen_by_partition(),
    ),
}
CLAIM_FEATURED_SQLITE = {
    (False, False): _claim_featured_sqlite(
        _CANDIDATES_IN_ORDER.replace(" AS MATERIALIZED", " AS"), fair=False
    ),
    (True, False): _claim_featured_sqlite(_CANDIDATES_BY_PARTITION_SQLITE, fair=False),
    (True, True): _claim_featured_sqlite(_CANDIDATES_BY_PARTITION_SQLITE, fair=True),
}

# The limits of a collection, its row locked (FOR NO KEY UPDATE: claimers of
# a limited collection take turns; enqueues, which lock it FOR KEY SHARE, do
# not wait): the settings as they are now and the rate limit's bucket (a
# locked row is read in its latest version). The claimed count is NOT read
# here: this statement's snapshot predates its wait for the lock, so a count
# in it would miss the claims of the holder it waited for; IN_FLIGHT_POSTGRES
# runs after it, with a snapshot of its own.
LIMITS_LOCK_POSTGRES = """
SELECT max_in_flight, max_in_flight_per_key, fairness, rate_limit_count, rate_limit_seconds,
       rate_tokens, rate_at
FROM groupqueues_collection WHERE id = %(collection_id)s
FOR NO KEY UPDATE
"""

# The collection's claimed rows with a running lease (gq_msg_lease).
IN_FLIGHT_POSTGRES = """
SELECT count(*) FROM groupqueues_message
WHERE collection_id = %(collection_id)s AND state = 'claimed' AND lease_expires_at > %(now)s
"""

# Serialise the enqueues of one ordering key (PostgreSQL, until commit): a
# message gets its seq only after every earlier enqueue of its key committed,
# so a claim never sees a key's later message without its earlier ones.
KEY_ENQUEUE_LOCK_POSTGRES = """
SELECT pg_advisory_xact_lock(hashtextextended(%(collection_id)s::text || '/' || k, 0))
FROM unnest(%(keys)s::text[]) AS k ORDER BY k
"""


# The queue collection of a request (``selectors.collection_at``): the
# collection named ``name`` of the group whose id (``by_id``) or slug is
# ``ref``, with its group, in one prepared statement; read with
# ``rawsql.ModelReader`` in this column order. The ORM's select_related query
# cost more CPU to compile than an enqueue's own statement (bench/README.md,
# issue 21). Built on first use from the models' columns.
@functools.cache
def collection_with_group(*, by_id: bool) -> str:
    from groupqueues.models import Collection, CollectionKind
    from principals.models import Group

    match = "g.id" if by_id else "g.slug"
    return f"""
SELECT {model_columns(Collection, "c")}, {model_columns(Group, "g")}
FROM {Collection._meta.db_table} c
JOIN {Group._meta.db_table} g ON g.id = c.group_id
WHERE c.name = %s AND c.kind = '{CollectionKind.QUEUE.value}' AND {match} = %s
"""


# The SPEC §4 stats of ONE collection (``selectors.collection_stats``, the
# API's stats endpoint): the three counts of ``selectors.collections_stats``
# in one prepared statement, each read from its state's partial index
# (gq_msg_claimable index-only with its INCLUDE, gq_msg_lease, gq_msg_dead).
# The ORM's three aggregates cost more CPU to compile than to run
# (bench/README.md, issue 21). "Pending" is due and not expired, as there.
STATS_ONE_POSTGRES = """
SELECT r.ready, r.depth_pending, r.delayed, r.oldest, c.n, d.n
FROM (
    SELECT count(*) AS ready,
           count(*) FILTER (WHERE deliver_after <= %(now)s
                            AND (expires_at IS NULL OR expires_at > %(now)s)) AS depth_pending,
           count(*) FILTER (WHERE deliver_after > %(now)s) AS delayed,
           min(deliver_after) FILTER (WHERE deliver_after <= %(now)s
                                      AND (expires_at IS NULL OR expires_at > %(now)s)) AS oldest
    FROM groupqueues_message WHERE collection_id = %(collection_id)s AND state = 'ready'
) r,
(SELECT count(*) AS n FROM groupqueues_message
 WHERE collection_id = %(collection_id)s AND state = 'claimed') c,
(SELECT count(*) AS n FROM groupqueues_message
 WHERE collection_id = %(collection_id)s AND state = 'dead') d
"""
