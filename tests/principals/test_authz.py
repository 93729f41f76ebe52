"""The capability check: roles, inheritance down the tree, scopes, app reach."""

import pytest
from django.utils import timezone

from principals.authz import Capability, Principal, has_capability, readable_groups
from principals.models import Role
from tests.factories import UserFactory, make_token, member

pytestmark = pytest.mark.django_db

QUEUE_MIN_ROLE = {
    Capability.QUEUE_READ: Role.VIEWER,
    Capability.QUEUE_ENQUEUE: Role.EDITOR,
    Capability.QUEUE_CONSUME: Role.EDITOR,
    Capability.QUEUE_MANAGE: Role.ADMIN,
    Capability.GROUP_MANAGE_ACCESS: Role.ADMIN,
}


@pytest.mark.parametrize("role", list(Role))
@pytest.mark.parametrize("capability", list(QUEUE_MIN_ROLE))
def test_role_thresholds_apply_to_the_subtree(tree, role, capability):
    user = member(tree["child"], role)
    principal = Principal.for_user(user)
    expected = role >= QUEUE_MIN_ROLE[capability]
    assert has_capability(principal, capability, tree["child"]) is expected
    assert has_capability(principal, capability, tree["grandchild"]) is expected
    assert has_capability(principal, capability, tree["root"]) is False
    assert has_capability(principal, capability, tree["sibling"]) is False


def test_effective_role_is_the_highest_on_the_chain(tree):
    user = member(tree["root"], Role.VIEWER)
    from tests.factories import MembershipFactory

    MembershipFactory(user=user, group=tree["child"], role=Role.ADMIN)
    principal = Principal.for_user(user)
    assert principal.role_on(tree["grandchild"]) == Role.ADMIN
    assert principal.role_on(tree["sibling"]) == Role.VIEWER


def test_no_role_no_capability(tree):
    principal = Principal.for_user(UserFactory())
    assert not any(has_capability(principal, c, tree["root"]) for c in QUEUE_MIN_ROLE)


def test_anonymous_and_inactive_users_get_nothing(tree):
    user = member(tree["root"], Role.OWNER)
    user.is_active = False
    user.save()
    for principal in (Principal(), Principal.for_user(user)):
        assert not has_capability(principal, Capability.QUEUE_READ, tree["root"])


def test_superuser_may_do_everything(tree):
    su = UserFactory(is_superuser=True, is_staff=True)
    principal = Principal.for_user(su)
    assert all(has_capability(principal, c, tree["sibling"]) for c in QUEUE_MIN_ROLE)
    assert has_capability(principal, Capability.SESSION_EDIT, tree["app_sibling"])


def test_unknown_capability_fails_closed(tree):
    su = UserFactory(is_superuser=True)
    teleport = "queue.teleport"  # deliberately not a Capability: what an untyped caller may pass
    assert has_capability(Principal.for_user(su), teleport, tree["root"]) is False  # type: ignore[arg-type]


def test_user_token_is_narrowed_by_scopes(tree):
    user = member(tree["child"], Role.ADMIN)
    token, _ = make_token(user=user, scopes=["queue:read"])
    principal = Principal.for_token(token)
    assert has_capability(principal, Capability.QUEUE_READ, tree["child"])
    assert not has_capability(principal, Capability.QUEUE_ENQUEUE, tree["child"])
    token2, _ = make_token(user=user, scopes=["queue:write"])
    assert has_capability(Principal.for_token(token2), Capability.QUEUE_ENQUEUE, tree["child"])


def test_user_token_needs_the_role_too(tree):
    user = member(tree["child"], Role.VIEWER)
    token, _ = make_token(user=user, scopes=["queue:write"])
    assert not has_capability(Principal.for_token(token), Capability.QUEUE_ENQUEUE, tree["child"])


@pytest.mark.parametrize(
    ("scope", "capability"),
    [
        ("queue:read", Capability.QUEUE_READ),
        ("queue:write", Capability.QUEUE_ENQUEUE),
        ("script:write", Capability.QUEUE_ENQUEUE),
        ("queue:consume", Capability.QUEUE_CONSUME),
    ],
)
def test_app_token_reaches_groups_on_its_chain_only(tree, scope, capability):
    token, _ = make_token(app=tree["app_grandchild"], scopes=[scope])
    principal = Principal.for_token(token)
    for name in ("grandchild", "child", "root"):
        assert has_capability(principal, capability, tree[name]), name
    assert not has_capability(principal, capability, tree["sibling"])


def test_app_token_without_the_scope_gets_nothing(tree):
    token, _ = make_token(app=tree["app_child"], scopes=["session:read"])
    principal = Principal.for_token(token)
    assert not any(has_capability(principal, c, tree["child"]) for c in QUEUE_MIN_ROLE)


def test_app_token_never_manages(tree):
    token, _ = make_token(app=tree["app_child"], scopes=["queue:admin", "queue:read"])
    principal = Principal.for_token(token)
    assert not has_capability(principal, Capability.QUEUE_MANAGE, tree["child"])


def test_session_capabilities_target_the_own_app_only(tree):
    token, _ = make_token(app=tree["app_child"], scopes=["session:read", "session:write"])
    principal = Principal.for_token(token)
    assert has_capability(principal, Capability.SESSION_READ, tree["app_child"])
    assert has_capability(principal, Capability.SESSION_EDIT, tree["app_child"])
    assert not has_capability(principal, Capability.SESSION_READ, tree["app_grandchild"])
    assert not has_capability(principal, Capability.SESSION_CONSUME, tree["app_child"])
    assert not has_capability(principal, Capability.TASK_ADMIN, tree["app_child"])


def test_users_reach_sessions_through_the_apps_group(tree):
    editor = Principal.for_user(member(tree["child"], Role.EDITOR))
    assert has_capability(editor, Capability.SESSION_EDIT, tree["app_grandchild"])
    assert not has_capability(editor, Capability.TASK_ADMIN, tree["app_grandchild"])
    assert not has_capability(editor, Capability.SESSION_READ, tree["app_sibling"])


def test_readable_groups_for_users_and_apps(tree):
    user = member(tree["child"], Role.VIEWER)
    assert [g.slug for g in readable_groups(Principal.for_user(user))] == ["child", "grandchild"]
    token, _ = make_token(app=tree["app_grandchild"], scopes=["queue:read"])
    assert [g.slug for g in readable_groups(Principal.for_token(token))] == [
        "child",
        "grandchild",
        "root",
    ]
    token2, _ = make_token(app=tree["app_grandchild"], scopes=["queue:write"])
    assert readable_groups(Principal.for_token(token2)) == []


def test_expired_token_is_still_refused_by_authentication(tree):
    from rest_framework.exceptions import AuthenticationFailed

    from principals.authentication import BearerTokenAuthentication

    token, secret = make_token(app=tree["app_child"], scopes=["queue:read"])
    token.expires_at = timezone.now()
    token.save()
    with pytest.raises(AuthenticationFailed):
        BearerTokenAuthentication().authenticate_secret(secret)
