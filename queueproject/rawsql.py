"""The one way raw SQL runs in this project (group and session queues, leases,
the throttle, wake-ups): :func:`cursor`, or :func:`execute`, :func:`fetch_one`
and :func:`fetch_all` for a single statement. The statements themselves live in
each app's ``sql.py``.

On PostgreSQL with ``QUEUE_PREPARED_STATEMENTS`` (the default) statements are
bound server-side, prepared once per connection and keep their generic plan
(:func:`enable_prepared_statements`, a ``connection_created`` hook wired in
``queueproject/apps.py``); results are read in binary. Elsewhere (SQLite, or
the setting off, e.g. behind PgBouncer in transaction mode) they run through
Django's ordinary cursor. Either way Django logs and counts them as usual.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, JSONField, Model

from queueproject.conf import ProductSettings, product_settings


def cursor(
    settings: ProductSettings | None = None, *, using: str = DEFAULT_DB_ALIAS
) -> CursorWrapper:
    """A Django cursor (use it as a context manager) on connection ``using``;
    on PostgreSQL with prepared statements on, every statement it runs is bound
    server-side and prepared on first use, so PostgreSQL plans each statement
    once per connection instead of on every call.

    One psycopg cursor per connection is kept and reused (closing the wrapper
    leaves it open): creating one costs as much Python as binding a
    statement's parameters. Callers read their results inside the ``with``.
    ``settings`` saves a hot caller that already holds them a lookup."""
    # One lookup of this thread's connection: each attribute read through the
    # ``django.db.connection`` proxy looks it up again (several per statement).
    db = connections[using]
    if db.vendor != "postgresql" or not (settings or product_settings()).queue_prepared_statements:
        return db.cursor()
    db.ensure_connection()
    raw = db.connection
    kept = getattr(db, "_queue_prepared_cursor", None)
    if kept is None or kept.connection is not raw:
        with db.wrap_database_errors:
            kept = _prepared_cursor_class()(raw)
        db._queue_prepared_cursor = kept  # type: ignore[attr-defined]  # a per-connection cache
    # The same wrapping Django's own connection.cursor() applies.
    cur: CursorWrapper = db._prepare_cursor(kept)  # type: ignore[attr-defined]  # absent from the stubs
    return cur


def execute(query: str, params: Any = None, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """Run one statement through :func:`cursor`; the number of rows it affected."""
    with cursor(using=using) as cur:
        cur.execute(query, params)
        rowcount: int = cur.rowcount
        return rowcount


def fetch_one(query: str, params: Any = None, *, using: str = DEFAULT_DB_ALIAS) -> Any:
    """Run one statement through :func:`cursor`; its first row (a tuple) or None."""
    with cursor(using=using) as cur:
        cur.execute(query, params)
        return cur.fetchone()


def fetch_all(query: str, params: Any = None, *, using: str = DEFAULT_DB_ALIAS) -> list[Any]:
    """Run one statement through :func:`cursor`; all its rows (tuples)."""
    with cursor(using=using) as cur:
        cur.execute(query, params)
        rows: list[Any] = cur.fetchall()
        return rows


# psycopg prepares only what it is asked to, once a connection allows it at
# all: Django opens every connection with ``prepare_threshold=None``
# (prepared statements off, for poolers), which silently turns ``prepare=True``
# into a plain execute. This threshold re-allows them without ever preparing
# on its own: only the cursor above asks (Django's own cursors bind
# client-side and cannot prepare).
NEVER_AUTOMATICALLY = 2**31 - 1


def enable_prepared_statements(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` hook (PostgreSQL, ``QUEUE_PREPARED_STATEMENTS``):
    let this connection prepare the statements :func:`cursor` runs, keep
    their generic plans (``plan_cache_mode``), without JIT compilation.

    Left to itself, PostgreSQL plans a prepared statement afresh for its first
    five runs and then keeps the generic plan only if its estimated cost is
    close to theirs. The group-queue claim's generic plan never is (``LIMIT
    $n`` and ``deliver_after <= $now`` are estimated blind), so the claim would
    be planned on every call, a large share of a claim+ack at batch 1 (see
    bench/README.md). The generic plan is the same plan (index scans on the
    partial indexes, LockRows, LIMIT; pinned by
    ``tests/groupqueues/test_queries.py``). Only statements bound server-side
    are affected: Django's own are not prepared.

    JIT is off for the same reason: PostgreSQL compiles a plan whose
    *estimated* cost passes ``jit_above_cost``, and a generic plan's estimate
    is blind. The fairness claim's is over a million (it prices the per-key
    count for every candidate it cannot see skipped), so each claim spent
    0.1-2.5 s compiling a plan that runs in 8 ms (bench/README.md, issue 18).
    The queue's statements are short index walks; none gains from JIT."""
    if connection.vendor != "postgresql" or not product_settings().queue_prepared_statements:
        return
    if connection.connection.prepare_threshold == NEVER_AUTOMATICALLY:
        return  # a pooled connection set up at an earlier checkout: its session kept the SET
    connection.connection.prepare_threshold = NEVER_AUTOMATICALLY
    if product_settings().transaction_pooler:
        return  # a session SET would outlive our turn on the server connection
    with connection.cursor() as cur:  # Django's own: SET cannot be prepared
        cur.execute(
            "SELECT set_config('plan_cache_mode', 'force_generic_plan', false),"
            " set_config('jit', 'off', false)"
        )


@functools.cache
def _prepared_cursor_class() -> type:
    # Imported on first use: the PostgreSQL backend needs psycopg installed.
    from django.db.backends.postgresql.base import ServerBindingCursor

    class PreparedCursor(ServerBindingCursor):
        """Binds server-side, prepares every statement it runs, and reads results
        in binary (psycopg's C loaders; Django's text loader for timestamptz is
        pure Python and was a measurable share of a batch claim)."""

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            # django-stubs declare ServerBindingCursor without its psycopg Cursor base.
            return super().execute(query, params, prepare=True, binary=True)  # type: ignore[misc]

        def close(self) -> None:
            """Kept open for the next statement (see ``cursor``); closed with
            its connection."""

    return PreparedCursor


# ------------------------------------------------------------ model rows
#
# A hot lookup that reads whole model instances (the request's token with its
# owner, the request's queue with its group) costs more to compile through the
# ORM than to run: a ``select_related`` query builds its SQL afresh on every
# call. These two helpers let such a lookup be one statement of an app's
# ``sql.py`` and still hand out ordinary model instances.


def model_columns(model: type[Model], alias: str) -> str:
    """The concrete columns of ``model`` as ``alias."column", …``, in the order
    :class:`ModelReader` reads them."""
    return ", ".join(f'{alias}."{f.column}"' for f in model._meta.concrete_fields)


M = TypeVar("M", bound=Model)


class ModelReader(Generic[M]):
    """Builds ``model`` instances from the columns :func:`model_columns` put in
    a row, converting each value as the ORM would on this connection (SQLite's
    UUIDs, datetimes and booleans; JSON read as text). Make one per model and
    connection and keep it (it looks the conversions up once)."""

    def __init__(self, model: type[M], *, using: str = DEFAULT_DB_ALIAS) -> None:
        connection = connections[using]
        fields = model._meta.concrete_fields
        self.model, self.using = model, using
        self.names = [field.attname for field in fields]
        self.width = len(fields)
        self.pk_index = fields.index(model._meta.pk)
        chains = [_converters(field, connection) for field in fields]
        self.converters = [(i, chain) for i, chain in enumerate(chains) if chain]

    def read(self, row: Sequence[Any], start: int) -> M | None:
        """The instance in ``row[start:start + width]``; None when its primary
        key is NULL (the far side of a LEFT JOIN that found nothing)."""
        values = list(row[start : start + self.width])
        if values[self.pk_index] is None:
            return None
        for i, chain in self.converters:
            value = values[i]
            if value is not None:
                for convert in chain:
                    value = convert(value)
                values[i] = value
        return self.model.from_db(self.using, self.names, values)


def _converters(field: Field, connection: Any) -> list[Callable[[Any], Any]]:
    col = field.get_col(field.model._meta.db_table)
    chain: list[Callable[[Any], Any]] = [
        functools.partial(_convert, c, col, connection)
        for c in connection.ops.get_db_converters(col) + field.get_db_converters(connection)
    ]
    if isinstance(field, JSONField):
        # A binary read (the prepared cursor) gives the decoded value already;
        # JSONField.from_db_value expects the text.
        chain = [functools.partial(_only_text, convert) for convert in chain]
    return chain


def _convert(converter: Callable[..., Any], col: Any, connection: Any, value: Any) -> Any:
    return converter(value, col, connection)


def _only_text(convert: Callable[[Any], Any], value: Any) -> Any:
    return convert(value) if isinstance(value, str | bytes) else value
