"""factory-boy factories shared by all test modules."""

import factory
from django.contrib.auth import get_user_model

from principals.models import App, Group, Membership, Role
from principals.services import token_create


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


class GroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Group

    slug = factory.Sequence(lambda n: f"group-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    parent = None


class AppFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = App

    slug = factory.Sequence(lambda n: f"app-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    group = factory.SubFactory(GroupFactory)


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    group = factory.SubFactory(GroupFactory)
    role = Role.VIEWER


def make_token(*, scopes, user=None, app=None, **kwargs):
    """A token and its secret (as create_token prints it)."""
    return token_create(name=kwargs.pop("name", "t"), scopes=scopes, user=user, app=app, **kwargs)


def member(group, role, **kwargs):
    """A new user holding ``role`` on ``group``."""
    user = UserFactory(**kwargs)
    MembershipFactory(user=user, group=group, role=role)
    return user
