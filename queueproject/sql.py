"""Raw SQL of the project-wide primitives (only what the ORM cannot say)."""

# Take the lease if it is free or expired; the current owner re-acquiring keeps
# it without extending it. One atomic upsert, so two processes racing for a free
# lease cannot both win. Returns the row (owner, expires_at) when the caller holds
# the lease afterwards, nothing otherwise. Portable (PostgreSQL, SQLite >= 3.35).
LEASE_TRY = """
INSERT INTO queueproject_lease (name, owner, acquired_at, expires_at)
VALUES (%(name)s, %(owner)s, %(now)s, %(expires_at)s)
ON CONFLICT (name) DO UPDATE SET
    owner = excluded.owner,
    acquired_at = CASE WHEN queueproject_lease.owner = excluded.owner
                        AND queueproject_lease.expires_at > %(now)s
                       THEN queueproject_lease.acquired_at ELSE excluded.acquired_at END,
    expires_at = CASE WHEN queueproject_lease.owner = excluded.owner
                       AND queueproject_lease.expires_at > %(now)s
                      THEN queueproject_lease.expires_at ELSE excluded.expires_at END
WHERE queueproject_lease.expires_at <= %(now)s OR queueproject_lease.owner = excluded.owner
RETURNING owner
"""
