"""Schemathesis over the whole API (principals, group queues, session queues,
store): generated requests, valid and invalid, with every check enabled, must
never get a 500, every response must match the OpenAPI schema (status, content
type, headers, body) and the server must refuse what the schema forbids.

Paths are pinned to real objects (a group, queue, app, dead message, task,
session, entry, reservation and send-now claim) so that most requests reach the
views instead of stopping at a 404. Three principals: an editor and an admin
(user tokens with every scope) over every path, and an app token with the
session scopes over the app and session routes.

The bounded run (a few examples per operation, derandomized) is in the default
suite; the long run is ``@pytest.mark.slow`` (``make schemathesis``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections

from groupqueues import services as gq
from principals.models import Role, Scope
from queueproject.ids import CANONICAL
from sessionqueues import services as sq
from sessionqueues.services import NewEntry
from sessionqueues.services.send_now import SendNowExpectation
from store import channels
from store import streams as st
from tests.factories import make_token, member

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import Case  # noqa: E402
from schemathesis.config import SchemathesisConfig  # noqa: E402
from schemathesis.schemas import BaseSchema  # noqa: E402

Tree = dict[str, Any]

APP_PATHS = r"^/api/(apps/\{app\}/|tasks/|sessions/)"


@pytest.fixture
def pinned(db: None, tree: Tree) -> dict[str, str]:
    """Real objects for every path parameter of the API."""
    gq.collection_create(group=tree["child"], name="tuned")
    queue = gq.collection_create(group=tree["child"], name="jobs")
    for i in range(20):
        gq.message_enqueue(collection=queue, payload={"i": i}, enqueued_by="t")
    (dead,) = gq.message_claim(collection=queue, worker_id="w")
    gq.message_fail(collection=queue, id=dead.id, claim_token=dead.claim_token, error="x")
    task = sq.task_create(app=tree["app_grandchild"], title="fuzz")
    session = sq.session_create(task=task)
    entries = [
        sq.entry_insert(
            session_id=session.pk, entry=NewEntry(content=f"e{i}", queued_by="u", durable=True)
        ).entry
        for i in range(4)
    ]
    reserved, _ = sq.reservation_reserve_for_delivery(session_id=session.pk)
    assert reserved is not None
    channel = channels.channel_create(group=tree["child"], name="news")
    channels.publish(channel=channel, payload={"n": 1})
    claim, _ = sq.queue_send_now_claim(
        session_id=session.pk,
        expected=[SendNowExpectation(id=entries[1].pk, content=entries[1].content)],
    )
    topic = st.topic_create(group=tree["child"], name="events")
    st.append(topic=topic, entries=[st.StreamEntryIn({"i": i}) for i in range(5)])
    st.consumer_commit(topic=topic, name="reader", offset=2)
    return {
        "t": "events",
        "consumer": "reader",
        "g": "child",
        "q": "jobs",
        "app": "app-grandchild",
        "name": "jobs",
        "id": str(dead.id),
        "task_id": str(task.pk),
        "session_id": str(session.pk),
        "message_id": str(entries[2].pk),
        "reservation_id": str(reserved.reservation_id),
        "claim_id": str(claim.pk),
        "c": "news",
    }


COLLECTION_SETTINGS = [
    # Settings changes go to their own queue, so that a tiny max_payload_bytes or
    # max_depth does not turn the other operations' valid requests into 413/429.
    {
        "include-method": "PATCH",
        "include-path": "/api/groups/{g}/queues/{q}/",
        "parameters": {"q": "tuned"},
        # Every check but one: the API refuses retry_backoff_max below
        # retry_backoff_base (against the stored value on PATCH), a comparison of
        # two values that JSON Schema cannot state.
        "checks": {"positive_data_acceptance": {"enabled": False}},
    },
    {
        "include-method": "POST",
        "include-path": "/api/groups/{g}/queues/",
        "checks": {"positive_data_acceptance": {"enabled": False}},  # as above
    },
]


def load_schema(secret: str, pinned: dict[str, str], run: Run) -> BaseSchema:
    config = SchemathesisConfig.from_dict(
        {
            "headers": {"Authorization": f"Bearer {secret}"},
            "parameters": pinned,
            "phases": {"coverage": {"enabled": run.coverage}},
            "generation": {"max-examples": run.max_examples, "deterministic": True},
            "checks": {"enabled": True},
            "operations": COLLECTION_SETTINGS,
        }
    )
    return schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application(), config=config)


@dataclass(frozen=True)
class Run:
    """How hard to fuzz: examples per operation, and whether the coverage phase
    (every boundary and every way to break each keyword of the schema, ~50
    cases per operation) runs too."""

    max_examples: int
    coverage: bool


# Bounded (default suite, about a minute per database): the coverage phase once,
# as the editor; the admin and the app get a few fuzzed examples per operation.
EDITOR_BOUNDED = Run(max_examples=1, coverage=True)
OTHERS_BOUNDED = Run(max_examples=3, coverage=False)
LONG = Run(max_examples=25, coverage=True)


def user_schema(tree: Tree, pinned: dict[str, str], role: Role, run: Run) -> BaseSchema:
    """The whole API as a new user holding ``role`` on ``child``, every scope."""
    _, secret = make_token(user=member(tree["child"], role), scopes=list(Scope.values))
    return load_schema(secret, pinned, run)


def app_schema(tree: Tree, pinned: dict[str, str], run: Run) -> BaseSchema:
    """The app and session routes as the task's app with the session scopes."""
    scopes = [Scope.SESSION_READ, Scope.SESSION_WRITE, Scope.SESSION_CONSUME]
    _, secret = make_token(app=tree["app_grandchild"], scopes=scopes)
    return load_schema(secret, pinned, run).include(path_regex=APP_PATHS)


@pytest.fixture
def editor_schema(tree, pinned):
    return user_schema(tree, pinned, Role.EDITOR, EDITOR_BOUNDED)


@pytest.fixture
def admin_schema(tree, pinned):
    return user_schema(tree, pinned, Role.ADMIN, OTHERS_BOUNDED)


@pytest.fixture
def app_token_schema(tree, pinned):
    return app_schema(tree, pinned, OTHERS_BOUNDED)


@pytest.fixture
def editor_schema_long(tree, pinned):
    return user_schema(tree, pinned, Role.EDITOR, LONG)


@pytest.fixture
def admin_schema_long(tree, pinned):
    return user_schema(tree, pinned, Role.ADMIN, LONG)


@pytest.fixture
def app_token_schema_long(tree, pinned):
    return app_schema(tree, pinned, LONG)


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """The raw WSGI app would close the test's connection at each request
    (Django's test client avoids that the same way)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(autouse=True)
def _quiet_request_log():
    """Thousands of 4xx answers are the point here, not news."""
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request):
    """Schemathesis 4.32's lazy loader reads ``node._nodeid``, which pytest 9
    no longer sets; give it the public node id."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


def short_waits(case: Case) -> None:
    """A long-poll claim may wait 20 s; a fuzzer needs no more than a taste."""
    body = case.body if isinstance(case.body, dict) else {}
    wait = body.get("wait_seconds")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and 0 <= wait <= 20:
        body["wait_seconds"] = min(wait, 0.05)  # invalid values stay invalid
    params = case.query or {}
    if "wait_seconds" in params:  # stream reads (GET) take it as a query parameter
        try:
            if 0 <= float(params["wait_seconds"]) <= 20:
                params["wait_seconds"] = "0.05"
        except (TypeError, ValueError):
            pass  # invalid values stay invalid
    if case.path.endswith("/events/"):
        # Channel events wait (long-poll) or stream (SSE) up to ``timeout``.
        query: dict[str, Any] = case.query or {}
        timeout = query.get("timeout")
        if timeout is None:
            query["timeout"] = 0.05
        elif not isinstance(timeout, bool):
            # Numbers and numeric strings alike (the coverage phase sends "299"):
            # a valid wait becomes a short one; invalid values stay invalid.
            try:
                valid = 0 <= float(timeout) <= 300
            except (TypeError, ValueError):
                valid = False
            if valid:
                query["timeout"] = 0.05 if not isinstance(timeout, str) else "0.05"
        case.query = query


def real_sender_task(case: Case, pinned: dict[str, str]) -> None:
    """A well-formed ``sender_task_id`` names the pinned task: whether a task
    exists is no schema's to say (an unknown one is a 400, as an unknown
    reference in a body is everywhere in this API)."""
    body = case.body if isinstance(case.body, dict) else {}
    sender = body.get("sender_task_id")
    if isinstance(sender, str) and CANONICAL.match(sender):
        body["sender_task_id"] = pinned["task_id"]


def call(case: Case, pinned: dict[str, str]) -> None:
    short_waits(case)
    real_sender_task(case, pinned)
    case.call_and_validate()


editor = schemathesis.pytest.from_fixture("editor_schema")
admin = schemathesis.pytest.from_fixture("admin_schema")
app_token = schemathesis.pytest.from_fixture("app_token_schema")
editor_long = schemathesis.pytest.from_fixture("editor_schema_long")
admin_long = schemathesis.pytest.from_fixture("admin_schema_long")
app_token_long = schemathesis.pytest.from_fixture("app_token_schema_long")


@editor.parametrize()
def test_schemathesis__as_an_editor(case, pinned):
    call(case, pinned)


@admin.parametrize()
def test_schemathesis__as_an_admin(case, pinned):
    call(case, pinned)


@app_token.parametrize()
def test_schemathesis__as_an_app(case, pinned):
    call(case, pinned)


@pytest.mark.slow
@editor_long.parametrize()
def test_schemathesis_long__as_an_editor(case, pinned):
    call(case, pinned)


@pytest.mark.slow
@admin_long.parametrize()
def test_schemathesis_long__as_an_admin(case, pinned):
    call(case, pinned)


@pytest.mark.slow
@app_token_long.parametrize()
def test_schemathesis_long__as_an_app(case, pinned):
    call(case, pinned)
