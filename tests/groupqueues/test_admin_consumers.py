"""Admin for triggers: registered handlers only, writes through the services,
capabilities decide who may change them."""

from __future__ import annotations

import pytest
from django.test import Client

import groupqueues.admin_consumers  # noqa: F401  (registers the admin classes)
from groupqueues import services, trigger_services
from groupqueues.models import Consumer, Trigger
from principals.models import Role
from tests.factories import UserFactory, member

pytestmark = pytest.mark.django_db

INLINE = {"consumers-TOTAL_FORMS": "0", "consumers-INITIAL_FORMS": "0"}


@pytest.fixture
def superuser_client():
    client = Client()
    client.force_login(UserFactory(username="su", is_superuser=True, is_staff=True))
    return client


def staff_client(user):
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def jobs(tree):
    return services.collection_create(group=tree["root"], name="jobs")


def form(tree, **overrides):
    data = {
        "group": str(tree["child"].pk),
        "collection_name": "jobs",
        "handler": "noop",
        "shared": "on",
        "enabled": "on",
        "batch_size": "10",
        "concurrency": "2",
        "visibility_timeout": "",
        **INLINE,
    }
    data.update(overrides)
    return data


def test_add__creates_trigger_and_consumers(superuser_client, tree, jobs):
    response = superuser_client.post("/admin/groupqueues/trigger/add/", form(tree))
    assert response.status_code == 302, response.content
    trigger = Trigger.objects.get()
    assert Consumer.objects.filter(trigger=trigger).count() == 2


def test_add__offers_only_registered_handlers(superuser_client, tree, jobs):
    page = superuser_client.get("/admin/groupqueues/trigger/add/").content.decode()
    assert 'value="noop"' in page and 'value="webhook"' in page
    response = superuser_client.post(
        "/admin/groupqueues/trigger/add/", form(tree, handler="os.system")
    )
    assert response.status_code == 200
    assert not Trigger.objects.exists()


def test_add__unknown_queue_is_a_form_error(superuser_client, tree, jobs):
    response = superuser_client.post(
        "/admin/groupqueues/trigger/add/", form(tree, collection_name="nope")
    )
    assert response.status_code == 200
    assert b"No queue" in response.content


def test_change__unsharing_rematerialises(superuser_client, tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop", shared=True
    )
    data = form(tree)
    del data["shared"]
    response = superuser_client.post(f"/admin/groupqueues/trigger/{trigger.pk}/change/", data)
    assert response.status_code == 302, response.content
    assert list(Consumer.objects.values_list("app", flat=True)) == [None]


def test_viewer_sees_but_cannot_change(tree, jobs):
    trigger = trigger_services.trigger_create(
        group=tree["child"], collection_name="jobs", handler="noop"
    )
    client = staff_client(member(tree["child"], Role.VIEWER))
    assert client.get("/admin/groupqueues/trigger/").status_code == 200
    response = client.post(
        f"/admin/groupqueues/trigger/{trigger.pk}/change/", form(tree, concurrency="5")
    )
    assert response.status_code == 403


def test_app_webhook__set_through_the_app_admin(superuser_client, tree):
    app = tree["app_child"]
    response = superuser_client.post(
        f"/admin/principals/app/{app.pk}/change/",
        {
            "slug": app.slug,
            "name": app.name,
            "group": str(app.group_id),
            "webhook_url": "https://example.test/hook",
            "webhook_secret": "s",
            "webhook_timeout": "5",
        },
    )
    assert response.status_code == 302, response.content
    app.refresh_from_db()
    assert (app.webhook_url, app.webhook_secret, app.webhook_timeout) == (
        "https://example.test/hook",
        "s",
        5.0,
    )


def test_app_webhook__secret_hidden_from_viewers(tree):
    app = tree["app_child"]
    app.webhook_secret = "top-secret"
    app.save()
    client = staff_client(member(tree["child"], Role.VIEWER))
    page = client.get(f"/admin/principals/app/{app.pk}/change/")
    assert page.status_code == 200
    assert b"top-secret" not in page.content
