"""Raw SQL of the group queues: only the hot paths the ORM cannot say in one
statement. Named parameters; table and column names are Django's defaults for
``groupqueues.Message`` (``groupqueues_message``)."""

# The PostgreSQL claim: ONE statement (one round trip, autocommit is enough).
# - ``lapsed`` and ``ready`` lock at most n candidates each in claim order with
#   FOR UPDATE SKIP LOCKED, each from its own partial index (gq_msg_lease,
#   gq_msg_claimable); both are MATERIALIZED so the planner cannot turn them into
#   a semi-join that locks more rows than the LIMIT (the known `IN (… LIMIT n
#   FOR UPDATE SKIP LOCKED)` trap). The collection's ``paused`` flag is read
#   here too (an InitPlan), so a pause is seen by the very next claim.
# - ``picked`` keeps the first n of the union in claim order; the rest of the
#   locked rows are released at commit untouched.
# - the UPDATE claims the picked rows with a fresh random token each
#   (gen_random_uuid: 122 random bits), except expired candidates (dead
#   ``expired``) and those out of attempts (dead ``exhausted``), which are
#   never handed out. RETURNING gives every row; the caller keeps the claimed.
CLAIM_POSTGRES = """
WITH open AS (
    SELECT 1 FROM groupqueues_collection WHERE id = %(collection_id)s AND NOT paused
), lapsed AS MATERIALIZED (
    SELECT seq, priority, deliver_after, expires_at, attempt, max_attempts
    FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND state = 'claimed'
      AND lease_expires_at <= %(now)s AND EXISTS (SELECT 1 FROM open)
    ORDER BY priority DESC, deliver_after, seq
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), ready AS MATERIALIZED (
    SELECT seq, priority, deliver_after, expires_at, attempt, max_attempts
    FROM groupqueues_message
    WHERE collection_id = %(collection_id)s AND state = 'ready'
      AND deliver_after <= %(now)s AND EXISTS (SELECT 1 FROM open)
    ORDER BY priority DESC, deliver_after, seq
    LIMIT %(n)s
    FOR UPDATE SKIP LOCKED
), picked AS MATERIALIZED (
    SELECT seq,
           CASE WHEN expires_at <= %(now)s THEN 'expired'
                WHEN attempt >= max_attempts THEN 'exhausted' END AS death
    FROM (SELECT * FROM lapsed UNION ALL SELECT * FROM ready) AS candidates
    ORDER BY priority DESC, deliver_after, seq
    LIMIT %(n)s
)
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
RETURNING m.state, m.seq, m.id, m.collection_id, m.payload, m.priority, m.attempt,
          m.max_attempts, m.claim_token, m.claimed_by, m.lease_expires_at, m.enqueued_at,
          m.deliver_after, m.expires_at, m.enqueued_by, m.last_error
"""

# Ack a batch: delete those of the (id, token) pairs still held (claimed with
# that token, lease not lapsed) in one statement; RETURNING says which landed.
# Pairs arrive as two parallel arrays (unnest keeps them aligned).
ACK_BATCH_POSTGRES = """
DELETE FROM groupqueues_message AS m
USING unnest(%(ids)s::uuid[], %(tokens)s::uuid[]) AS a(id, token)
WHERE m.id = a.id AND m.claim_token = a.token AND m.collection_id = %(collection_id)s
  AND m.state = 'claimed' AND m.lease_expires_at > %(now)s
RETURNING m.id
"""
