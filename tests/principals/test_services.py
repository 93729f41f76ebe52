import pytest

from principals import exceptions as err
from principals import services
from principals.authz import Principal
from principals.models import ApiToken, Role
from principals.tokens import hash_secret
from tests.factories import GroupFactory, UserFactory, member

pytestmark = pytest.mark.django_db


def test_group_cycle_is_refused(tree):
    with pytest.raises(err.GroupCycle):
        services.group_set_parent(group=tree["root"], parent=tree["grandchild"])
    with pytest.raises(err.GroupCycle):
        services.group_set_parent(group=tree["child"], parent=tree["child"])
    tree["root"].refresh_from_db()
    assert tree["root"].parent is None


def test_group_move_and_path(tree):
    services.group_set_parent(group=tree["sibling"], parent=tree["grandchild"])
    tree["sibling"].refresh_from_db()
    assert tree["sibling"].path == "root/child/grandchild/sibling"


def test_duplicate_slug_and_bad_slug():
    services.group_create(slug="dup")
    with pytest.raises(err.SlugTaken):
        services.group_create(slug="dup")
    with pytest.raises(err.InvalidInput):
        services.group_create(slug="Bad Slug!")


def test_group_with_children_or_apps_cannot_be_deleted(tree):
    with pytest.raises(err.GroupNotEmpty):
        services.group_delete(group=tree["root"])
    with pytest.raises(err.GroupNotEmpty):
        services.group_delete(group=tree["sibling"])  # has an app
    empty = GroupFactory(parent=tree["root"])
    services.group_delete(group=empty)


def test_token_secret_is_only_stored_hashed():
    user = UserFactory()
    token, secret = services.token_create(name="t", scopes=["queue:read"], user=user)
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.secret_hash == hash_secret(secret)
    assert secret not in str(stored.__dict__.values())
    assert secret.startswith(stored.prefix)


def test_token_scopes_are_validated():
    with pytest.raises(err.InvalidScope):
        services.token_create(name="t", scopes=["queue:everything"], user=UserFactory())
    with pytest.raises(err.InvalidScope):
        services.token_create(name="t", scopes=[], user=UserFactory())


def test_token_revoke_by_name_or_prefix():
    user = UserFactory()
    token, _ = services.token_create(name="ci", scopes=["queue:read"], user=user)
    services.token_revoke(tokens=services.token_find(name_or_prefix=token.prefix))
    token.refresh_from_db()
    assert token.revoked
    with pytest.raises(err.TokenNotFound):
        services.token_find(name_or_prefix="ci")


def test_only_an_owner_grants_owner(tree):
    admin = Principal.for_user(member(tree["root"], Role.ADMIN))
    owner = Principal.for_user(member(tree["root"], Role.OWNER))
    target = UserFactory()
    services.membership_grant(user=target, group=tree["child"], role=Role.ADMIN, by=admin)
    with pytest.raises(err.RoleGrantDenied):
        services.membership_grant(user=target, group=tree["child"], role=Role.OWNER, by=admin)
    services.membership_grant(user=target, group=tree["child"], role=Role.OWNER, by=owner)
    editor = Principal.for_user(member(tree["root"], Role.EDITOR))
    with pytest.raises(err.RoleGrantDenied):
        services.membership_grant(user=target, group=tree["child"], role=Role.VIEWER, by=editor)


@pytest.mark.parametrize("ref", ["a\x00b", "Not A Slug", "x" * 300, "../etc", ""])
def test_malformed_references_are_not_found_not_errors(tree, ref):
    with pytest.raises(err.GroupNotFound):
        services.group_get(ref=ref)
    with pytest.raises(err.AppNotFound):
        services.app_get(ref=ref)


def test_references_by_slug_or_id(tree):
    assert services.group_get(ref="child") == tree["child"]
    assert services.group_get(ref=str(tree["child"].pk)) == tree["child"]
    assert services.app_get(ref=str(tree["app_child"].pk)) == tree["app_child"]
