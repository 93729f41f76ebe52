"""Who may call which group-queue endpoint: every principal by every endpoint.

The queue ``jobs`` belongs to group ``child`` (root ⊃ child ⊃ grandchild,
root ⊃ sibling). Expected: 401 without valid credentials; the success status
where the principal holds the endpoint's capability; 403 where it can see the
group's queues but lacks the capability; 404 where it cannot see them. Where
refused, the body is the error envelope only and no row changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from groupqueues import services
from groupqueues.models import Collection, Message
from principals.authz import Capability
from tests.conftest import bearer
from tests.groupqueues.api_helpers import ADMIN, EDITOR, VIEWER, app_client, user_client

pytestmark = pytest.mark.django_db

READ, ENQUEUE, CONSUME, MANAGE = (
    Capability.QUEUE_READ, Capability.QUEUE_ENQUEUE, Capability.QUEUE_CONSUME,
    Capability.QUEUE_MANAGE,
)  # fmt: skip
EVERYTHING = {READ, ENQUEUE, CONSUME, MANAGE}


@dataclass(frozen=True)
class Who:
    """A principal: how to build its client, what it may do on ``child`` and
    whether it sees child's queues at all (401 when ``authenticated`` is False)."""

    make: Callable[[dict[str, Any]], APIClient]  # the ``tree`` fixture → a client
    may: frozenset[Capability] = frozenset()
    sees: bool = False
    authenticated: bool = True


PRINCIPALS = {
    "anonymous": Who(lambda t: APIClient(), authenticated=False),
    "bad_token": Who(lambda t: bearer("dq_not-a-real-token"), authenticated=False),
    "non_member": Who(lambda t: user_client(t["root"], None)),
    "viewer": Who(lambda t: user_client(t["child"], VIEWER), frozenset({READ}), True),
    "editor": Who(
        lambda t: user_client(t["child"], EDITOR), frozenset({READ, ENQUEUE, CONSUME}), True
    ),
    "admin": Who(lambda t: user_client(t["child"], ADMIN), frozenset(EVERYTHING), True),
    "root_viewer": Who(lambda t: user_client(t["root"], VIEWER), frozenset({READ}), True),
    "editor_read_scope_only": Who(
        lambda t: user_client(t["child"], EDITOR, ["queue:read"]), frozenset({READ}), True
    ),
    "grandchild_editor": Who(lambda t: user_client(t["grandchild"], EDITOR)),
    "sibling_editor": Who(lambda t: user_client(t["sibling"], EDITOR)),
    "app_read": Who(
        lambda t: app_client(t["app_grandchild"], "queue:read"), frozenset({READ}), True
    ),
    "app_write": Who(
        lambda t: app_client(t["app_grandchild"], "queue:write"), frozenset({ENQUEUE}), True
    ),
    "app_script": Who(
        lambda t: app_client(t["app_grandchild"], "script:write"), frozenset({ENQUEUE}), True
    ),
    "app_consume": Who(
        lambda t: app_client(t["app_grandchild"], "queue:consume"), frozenset({CONSUME}), True
    ),
    "app_admin_scope": Who(lambda t: app_client(t["app_grandchild"], "queue:admin")),
    "app_session_scopes": Who(
        lambda t: app_client(t["app_grandchild"], "session:read", "session:write")
    ),
    "app_outside_subtree": Who(
        lambda t: app_client(
            t["app_sibling"], "queue:read", "queue:write", "queue:consume", "queue:admin"
        )
    ),
}


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str  # formatted with the fixture's ids
    capability: Capability
    ok: int
    body: object = None
    group_level: bool = False  # 404 is not_found (the group) rather than collection_not_found


Q = "/api/groups/child/queues/jobs/"
ENDPOINTS = {
    "list": Endpoint("get", "/api/groups/child/queues/", READ, 200, group_level=True),
    "create": Endpoint("post", "/api/groups/child/queues/", MANAGE, 201, {"name": "new"}, True),
    "get_collection": Endpoint("get", Q, READ, 200),
    "patch_collection": Endpoint("patch", Q, MANAGE, 200, {"paused": True}),
    "enqueue": Endpoint("post", Q + "messages/", ENQUEUE, 201, {"payload": 1}),
    "enqueue_batch": Endpoint(
        "post", Q + "messages/", ENQUEUE, 201, {"messages": [{"payload": 1}]}
    ),
    "get_message": Endpoint("get", Q + "messages/{ready}/", READ, 200),
    "get_message_by_group_id": Endpoint(
        "get", "/api/groups/{child}/queues/jobs/messages/{dead}/", READ, 200
    ),
    "cancel": Endpoint("delete", Q + "messages/{ready}/", CONSUME, 204),
    "claim": Endpoint("post", Q + "claim/", CONSUME, 200, {"worker_id": "w"}),
    "ack": Endpoint("post", Q + "ack/", CONSUME, 200, {"acks": ["{held}"]}),
    "nack": Endpoint("post", Q + "nack/", CONSUME, 200, "{held}"),
    "fail": Endpoint("post", Q + "fail/", CONSUME, 200, "{held}"),
    "extend": Endpoint("post", Q + "extend/", CONSUME, 200, "{held+timeout}"),
    "release": Endpoint("post", Q + "release/", CONSUME, 200, "{held}"),
    "stats": Endpoint("get", Q + "stats/", READ, 200),
    "dead": Endpoint("get", Q + "dead/", READ, 200),
    "redrive": Endpoint("post", Q + "redrive/", MANAGE, 200, {"all": True}),
    "purge": Endpoint("post", Q + "purge/", MANAGE, 200, {"include_dead": True}),
    "app_enqueue": Endpoint(
        "post", "/api/apps/app-grandchild/queues/jobs/messages/", ENQUEUE, 201, {"payload": 1}
    ),
    "app_stats": Endpoint("get", "/api/apps/{app}/queues/jobs/stats/", READ, 200),
}


@pytest.fixture
def world(tree):
    """The queue with a ready, a claimed and a dead message."""
    queue = services.collection_create(group=tree["child"], name="jobs")
    ids = [services.message_enqueue(collection=queue, payload=i, enqueued_by="x").id
           for i in range(3)]  # fmt: skip
    held, dead = services.message_claim(collection=queue, worker_id="w", n=2)
    services.message_fail(collection=queue, id=dead.id, claim_token=dead.claim_token, error="e")
    held_body = {"id": str(held.id), "claim_token": str(held.claim_token)}
    return {
        "tree": tree,
        "ready": str(ids[2]),
        "dead": str(dead.id),
        "child": str(tree["child"].pk),
        "app": str(tree["app_grandchild"].pk),
        "held": held_body,
        "held+timeout": {**held_body, "visibility_timeout": 60},
    }


def fill(value, world):
    """The endpoint's path or body with the fixture's ids filled in."""
    if isinstance(value, str) and value.startswith("{") and value.strip("{}") in world:
        return world[value.strip("{}")]
    if isinstance(value, str):
        return value.format(**{k: v for k, v in world.items() if isinstance(v, str)})
    if isinstance(value, dict):
        return {k: fill(v, world) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, world) for v in value]
    return value


def snapshot():
    return (
        list(Message.objects.order_by("seq").values()),
        list(Collection.objects.order_by("pk").values()),
    )


def expected(who: Who, endpoint: Endpoint) -> tuple[int, str | None]:
    if not who.authenticated:
        return 401, "not_authenticated"
    if endpoint.capability in who.may:
        return endpoint.ok, None
    if who.sees:
        return 403, "permission_denied"
    return 404, "not_found" if endpoint.group_level else "collection_not_found"


@pytest.mark.parametrize("endpoint_name", ENDPOINTS)
@pytest.mark.parametrize("who_name", PRINCIPALS)
def test_authz_matrix(world, who_name, endpoint_name):
    who, endpoint = PRINCIPALS[who_name], ENDPOINTS[endpoint_name]
    client = who.make(world["tree"])
    before = snapshot()
    call = getattr(client, endpoint.method)
    kwargs = {"format": "json"} if endpoint.body is not None else {}
    body = fill(endpoint.body, world) if endpoint.body is not None else None
    response = call(fill(endpoint.path, world), body, **kwargs)
    status, code = expected(who, endpoint)
    assert response.status_code == status, response.content
    if code is not None:
        assert response.json()["error"]["code"] == code
        assert set(response.json()) == {"error"}
        assert snapshot() == before, "a refused request changed data"
