"""The in-process queue handle (``groupqueues.handle.shared_collection``):
resolution through the app's chain, the capability check (fails closed), the
options and the size cap pass through to the services."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.handle import shared_collection
from groupqueues.models import Message
from groupqueues.services.types import NewMessage
from principals.authz import Principal
from principals.models import Role
from queueproject import clock
from tests.factories import make_token, member

pytestmark = pytest.mark.django_db


@pytest.fixture
def queues(tree: dict[str, Any]) -> dict[str, Any]:
    """``jobs`` declared at root and again at child (the nearer one wins for
    child's apps); ``mail`` only at root."""
    return {
        "root_jobs": services.collection_create(group=tree["root"], name="jobs"),
        "child_jobs": services.collection_create(group=tree["child"], name="jobs"),
        "mail": services.collection_create(group=tree["root"], name="mail"),
    }


def test_resolves_the_nearest_declaring_group(tree: dict[str, Any], queues: dict[str, Any]) -> None:
    assert shared_collection("jobs", app=tree["app_grandchild"]).collection == queues["child_jobs"]
    assert shared_collection("jobs", app=tree["app_sibling"]).collection == queues["root_jobs"]
    assert shared_collection("mail", app=tree["app_grandchild"]).collection == queues["mail"]


def test_no_queue_in_the_chain__not_found(tree: dict[str, Any], queues: dict[str, Any]) -> None:
    services.collection_create(group=tree["sibling"], name="only-sibling")
    with pytest.raises(err.CollectionNotFound):
        shared_collection("only-sibling", app=tree["app_child"])
    with pytest.raises(err.CollectionNotFound):
        shared_collection("nope", app=tree["app_child"])


def test_enqueue_as_the_app__options_pass_through(
    tree: dict[str, Any], queues: dict[str, Any]
) -> None:
    jobs = shared_collection("jobs", app=tree["app_child"])
    when = clock.now() + timedelta(hours=1)
    result = jobs.enqueue({"n": 1}, priority=7, deliver_after=when, idempotency_key="k1")
    assert result.created
    again = jobs.enqueue({"n": 1}, idempotency_key="k1")
    assert (again.id, again.created) == (result.id, False)
    message = Message.objects.get(id=result.id)
    assert (message.priority, message.deliver_after, message.enqueued_by) == (
        7,
        when,
        "app:app-child",
    )
    assert message.collection_id == queues["child_jobs"].pk
    assert (jobs.depth(), jobs.depth_pending()) == (1, 0)
    assert jobs.stats().delayed == 1


def test_unknown_option__type_error(tree: dict[str, Any], queues: dict[str, Any]) -> None:
    with pytest.raises(TypeError, match="colour"):
        shared_collection("jobs", app=tree["app_child"]).enqueue({}, colour="red")


def test_enqueue_many__in_order_all_or_nothing(
    tree: dict[str, Any], queues: dict[str, Any]
) -> None:
    jobs = shared_collection("mail", app=tree["app_sibling"])
    results = jobs.enqueue_many([{"n": 1}, NewMessage(payload={"n": 2}, priority=3), "three"])
    assert [Message.objects.get(id=r.id).payload for r in results] == [{"n": 1}, {"n": 2}, "three"]
    with pytest.raises(err.InvalidQueueInput):
        jobs.enqueue_many([{"n": 4}, NewMessage(payload={}, priority=10**6)])
    assert jobs.depth() == 3


def test_size_cap_and_max_depth_apply(tree: dict[str, Any], queues: dict[str, Any]) -> None:
    services.collection_update(collection=queues["mail"], max_payload_bytes=64, max_depth=1)
    mail = shared_collection("mail", app=tree["app_child"])
    with pytest.raises(err.MessageTooLarge):
        mail.enqueue("x" * 100)
    mail.enqueue("ok")
    with pytest.raises(err.QueueFull):
        mail.enqueue("second")


def test_app_token_principal__its_own_app_only(
    tree: dict[str, Any], queues: dict[str, Any], app_token: Any
) -> None:
    token, _ = app_token(tree["app_child"], "queue:write")
    principal = Principal.for_token(token)
    assert shared_collection("jobs", principal=principal).enqueue(1).created
    with pytest.raises(err.QueuePermissionDenied):
        shared_collection("jobs", principal=principal, app=tree["app_sibling"])


def test_app_token_without_a_queue_scope__refused(
    tree: dict[str, Any], queues: dict[str, Any], app_token: Any
) -> None:
    token, _ = app_token(tree["app_child"], "session:write")
    with pytest.raises(err.QueuePermissionDenied):
        shared_collection("jobs", principal=Principal.for_token(token))


def test_read_only_token__reads_but_cannot_enqueue(
    tree: dict[str, Any], queues: dict[str, Any], app_token: Any
) -> None:
    token, _ = app_token(tree["app_child"], "queue:read")
    jobs = shared_collection("jobs", principal=Principal.for_token(token))
    assert jobs.depth() == 0
    with pytest.raises(err.QueuePermissionDenied):
        jobs.enqueue(1)
    assert Message.objects.count() == 0


def test_user_principal__by_role_on_the_owning_group(
    tree: dict[str, Any], queues: dict[str, Any]
) -> None:
    editor = member(tree["child"], Role.EDITOR)
    viewer = member(tree["child"], Role.VIEWER)
    app = tree["app_child"]
    as_editor = shared_collection("jobs", principal=Principal.for_user(editor), app=app)
    assert as_editor.enqueue(1).created
    as_viewer = shared_collection("jobs", principal=Principal.for_user(viewer), app=app)
    assert as_viewer.depth() == 1
    with pytest.raises(err.QueuePermissionDenied):
        as_viewer.enqueue(2)
    # The root's mail queue: the child's editor has no role on root.
    with pytest.raises(err.QueuePermissionDenied):
        shared_collection("mail", principal=Principal.for_user(editor), app=tree["app_child"])


def test_user_principal_without_app__refused(tree: dict[str, Any], queues: dict[str, Any]) -> None:
    editor = member(tree["child"], Role.EDITOR)
    with pytest.raises(err.QueuePermissionDenied):
        shared_collection("jobs", principal=Principal.for_user(editor))


def test_anonymous__fails_closed(tree: dict[str, Any], queues: dict[str, Any]) -> None:
    with pytest.raises(err.QueuePermissionDenied):
        shared_collection("jobs", principal=Principal(), app=tree["app_child"])


def test_revoked_scope_is_seen_by_the_next_call(
    tree: dict[str, Any], queues: dict[str, Any]
) -> None:
    token, _ = make_token(app=tree["app_child"], scopes=["queue:write"])
    principal = Principal.for_token(token)
    jobs = shared_collection("jobs", principal=principal)
    jobs.enqueue(1)
    object.__setattr__(principal, "scopes", frozenset({"queue:read"}))
    with pytest.raises(err.QueuePermissionDenied):
        jobs.enqueue(2)


def test_no_app_nor_principal__type_error() -> None:
    with pytest.raises(TypeError):
        shared_collection("jobs")
