"""factory-boy factories shared by all test modules."""

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from principals.models import ApiToken, App, Group, Membership, Role
from principals.services import token_create

_T = TypeVar("_T")

if TYPE_CHECKING:

    class ModelFactory(factory.django.DjangoModelFactory[_T]):
        # factory-boy's metaclass makes ``SomeFactory(**kw)`` create and return a model row,
        # but its __call__ is unannotated, so mypy would type the call as the factory itself.
        def __new__(cls, **kwargs: Any) -> _T:  # type: ignore[misc]  # the model, not cls
            raise NotImplementedError
else:
    ModelFactory = factory.django.DjangoModelFactory


class UserFactory(ModelFactory[User]):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


class GroupFactory(ModelFactory[Group]):
    class Meta:
        model = Group

    slug = factory.Sequence(lambda n: f"group-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    parent = None


class AppFactory(ModelFactory[App]):
    class Meta:
        model = App

    slug = factory.Sequence(lambda n: f"app-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    group = factory.SubFactory(GroupFactory)


class MembershipFactory(ModelFactory[Membership]):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    group = factory.SubFactory(GroupFactory)
    role = Role.VIEWER


def make_token(
    *, scopes: Iterable[str], user: User | None = None, app: App | None = None, **kwargs: Any
) -> tuple[ApiToken, str]:
    """A token and its secret (as create_token prints it)."""
    return token_create(name=kwargs.pop("name", "t"), scopes=scopes, user=user, app=app, **kwargs)


def member(group: Group, role: Role, **kwargs: Any) -> User:
    """A new user holding ``role`` on ``group``."""
    user = UserFactory(**kwargs)
    MembershipFactory(user=user, group=group, role=role)
    return user
