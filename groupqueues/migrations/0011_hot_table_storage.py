"""Per-table storage parameters of the hot group-queue tables (PostgreSQL
only; a no-op elsewhere). Measured in bench/README.md ("Hot table storage").

- ``groupqueues_message``: every claim, nack, reclaim and ack leaves a dead
  tuple, so autovacuum should visit after 1 % of the table changed (plus
  1000 rows), not the default 20 %, and without the cost-based sleeps that let
  a busy queue outrun it; analyze at 2 % keeps the partial indexes' estimates
  fresh. No fillfactor: claims and nacks change ``state`` (in every partial
  index's predicate) and lease times (indexed), so they are never HOT updates
  and free room on the page buys nothing (measured).
- ``groupqueues_collection`` and ``groupqueues_collectiontally``: a few rows
  rewritten over and over (claim floors each maintenance pass, tallies every
  few seconds) and no indexed column changes: fillfactor 50 keeps room on
  each page for HOT updates, and autovacuum visits after a fixed number of
  dead rows.
"""

from typing import Any

from django.db import migrations

HOT_TABLES: dict[str, dict[str, Any]] = {
    "groupqueues_message": {
        "autovacuum_vacuum_scale_factor": 0.01,
        "autovacuum_vacuum_threshold": 1000,
        "autovacuum_vacuum_insert_scale_factor": 0.05,
        "autovacuum_analyze_scale_factor": 0.02,
        "autovacuum_vacuum_cost_delay": 0,
    },
    "groupqueues_collection": {
        "fillfactor": 50,
        "autovacuum_vacuum_scale_factor": 0.0,
        "autovacuum_vacuum_threshold": 500,
    },
    "groupqueues_collectiontally": {
        "fillfactor": 50,
        "autovacuum_vacuum_scale_factor": 0.0,
        "autovacuum_vacuum_threshold": 500,
    },
}


def _apply(schema_editor: Any, reset: bool) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for table, params in HOT_TABLES.items():
        if reset:
            schema_editor.execute(f"ALTER TABLE {quote(table)} RESET ({', '.join(params)})")
        else:
            pairs = ", ".join(f"{name} = {value}" for name, value in params.items())
            schema_editor.execute(f"ALTER TABLE {quote(table)} SET ({pairs})")


def forwards(apps: Any, schema_editor: Any) -> None:
    _apply(schema_editor, reset=False)


def backwards(apps: Any, schema_editor: Any) -> None:
    _apply(schema_editor, reset=True)


class Migration(migrations.Migration):
    dependencies = [
        ("groupqueues", "0010_collection_samples"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
