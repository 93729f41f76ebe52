"""Raw SQL of the project-wide primitives (only what the ORM cannot say)."""

# Take the lease if it is free (released: owner null) or expired; the current
# owner re-acquiring an unexpired lease keeps it without extending it and keeps
# its fencing token, any other take is a new acquisition with the next token
# (the row outlives releases, so tokens never repeat). One atomic upsert, so two
# processes racing for a free lease cannot both win. Returns (expires_at,
# fencing_token) when the caller holds the lease afterwards, nothing otherwise.
# Every SET reads the row as it was. Portable (PostgreSQL, SQLite >= 3.35).
LEASE_TRY = """
INSERT INTO queueproject_lease (name, owner, acquired_at, expires_at, fencing_token)
VALUES (%(name)s, %(owner)s, %(now)s, %(expires_at)s, 1)
ON CONFLICT (name) DO UPDATE SET
    owner = excluded.owner,
    acquired_at = CASE WHEN queueproject_lease.owner = excluded.owner
                        AND queueproject_lease.expires_at > %(now)s
                       THEN queueproject_lease.acquired_at ELSE excluded.acquired_at END,
    expires_at = CASE WHEN queueproject_lease.owner = excluded.owner
                       AND queueproject_lease.expires_at > %(now)s
                      THEN queueproject_lease.expires_at ELSE excluded.expires_at END,
    fencing_token = CASE WHEN queueproject_lease.owner = excluded.owner
                          AND queueproject_lease.expires_at > %(now)s
                         THEN queueproject_lease.fencing_token
                         ELSE queueproject_lease.fencing_token + 1 END
WHERE queueproject_lease.owner IS NULL OR queueproject_lease.expires_at <= %(now)s
   OR queueproject_lease.owner = excluded.owner
RETURNING expires_at, fencing_token
"""

# Extend the lease to a new expiry, only while ``owner`` holds it unexpired;
# returns its fencing token (unchanged: a renewal is not a new acquisition).
LEASE_RENEW = """
UPDATE queueproject_lease SET expires_at = %(expires_at)s
WHERE name = %(name)s AND owner = %(owner)s AND expires_at > %(now)s
RETURNING fencing_token
"""

# A worker's own session limits (PostgreSQL; ``queueproject.session_limits``):
# set_config because SET takes no bind parameters. false: for the session.
SESSION_LIMITS = """
SELECT set_config('idle_in_transaction_session_timeout', %(idle)s, false),
       set_config('statement_timeout', %(statement)s, false)
"""

# A worker names its open connections (pg_stat_activity.application_name;
# ``queueproject.session_limits.name_connections``).
APPLICATION_NAME = "SELECT set_config('application_name', %(name)s, false)"
