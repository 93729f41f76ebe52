"""Raw SQL of the principals app (only what the ORM cannot say)."""

# Add a process's batch of requests to a fixed window and return the window's
# total: an atomic upsert, so concurrent batches (threads, processes, hosts)
# never lose an increment (principals/throttling.py batches them).
# Portable: PostgreSQL and SQLite >= 3.35 both support ON CONFLICT ... RETURNING.
RATE_COUNTER_ADD = """
INSERT INTO principals_ratecounter (key, window_start, count)
VALUES (%(key)s, %(window_start)s, %(n)s)
ON CONFLICT (key, window_start) DO UPDATE SET count = principals_ratecounter.count + EXCLUDED.count
RETURNING count
"""

# Forget windows that ended long ago.
RATE_COUNTER_PRUNE = """
DELETE FROM principals_ratecounter WHERE window_start < %(before)s
"""
