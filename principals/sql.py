"""Raw SQL of the principals app (only what the ORM cannot say, or says too
slowly for every request)."""

import functools

from queueproject.rawsql import model_columns

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


@functools.cache
def token_with_owner() -> str:
    """The token of a secret hash with its user, or its app and the app's
    group (``principals.authentication``: one statement per request, read
    with ``rawsql.model_reader`` in this column order)."""
    from django.contrib.auth import get_user_model

    from principals.models import ApiToken, App, Group

    user = get_user_model()
    return f"""
SELECT {model_columns(ApiToken, "t")}, {model_columns(user, "u")},
       {model_columns(App, "a")}, {model_columns(Group, "g")}
FROM {ApiToken._meta.db_table} t
LEFT JOIN {user._meta.db_table} u ON u.id = t.user_id
LEFT JOIN {App._meta.db_table} a ON a.id = t.app_id
LEFT JOIN {Group._meta.db_table} g ON g.id = a.group_id
WHERE t.secret_hash = %s
"""
