"""Raw SQL of the principals app (only what the ORM cannot say)."""

# Count one request in a fixed window and return the new count: an atomic upsert,
# so concurrent requests (threads, processes, hosts) never lose an increment.
# Portable: PostgreSQL and SQLite >= 3.35 both support ON CONFLICT ... RETURNING.
RATE_COUNTER_HIT = """
INSERT INTO principals_ratecounter (key, window_start, count)
VALUES (%(key)s, %(window_start)s, 1)
ON CONFLICT (key, window_start) DO UPDATE SET count = principals_ratecounter.count + 1
RETURNING count
"""

# Forget windows that ended long ago.
RATE_COUNTER_PRUNE = """
DELETE FROM principals_ratecounter WHERE window_start < %(before)s
"""
