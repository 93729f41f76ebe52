"""seed_demo finds every installed app's ``demo`` module and seeds in DEMO_ORDER."""

from io import StringIO

import pytest
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from queueproject.management.commands.seed_demo import demo_modules

SEEDING_ORDER = ["principals.demo", "groupqueues.demo", "sessionqueues.demo"]


def test_demo_modules__every_installed_app_with_a_demo_in_demo_order():
    assert [module.__name__ for module in demo_modules()] == SEEDING_ORDER


def test_demo_modules__demo_order_wins_over_installed_apps_order():
    reversed_apps = [a for a in settings.INSTALLED_APPS if a not in ("principals", "sessionqueues")]
    with override_settings(INSTALLED_APPS=["sessionqueues", *reversed_apps, "principals"]):
        assert [module.__name__ for module in demo_modules()] == SEEDING_ORDER


def test_demo_modules__an_app_without_demo_order_seeds_last():
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, "tests.queueproject"]):
        names = [module.__name__ for module in demo_modules()]
    assert names == [*SEEDING_ORDER, "tests.queueproject.demo"]


@pytest.mark.django_db
def test_seed_demo__second_run_adds_nothing():
    def counts():
        return {model._meta.label: model._default_manager.count() for model in apps.get_models()}

    call_command("seed_demo", stdout=StringIO())
    first = counts()
    call_command("seed_demo", stdout=StringIO())
    assert counts() == first
    assert first["groupqueues.Message"] > 0 and first["sessionqueues.QueuedMessage"] > 0
    assert first["groupqueues.Trigger"] > 0  # groupqueues.demo's second seeder (DEMO_SEEDS)


@pytest.mark.django_db
def test_seed_demo__shows_every_state_in_queues_no_demo_worker_drains():
    from groupqueues.models import Collection, Message, Trigger
    from sessionqueues.models import PendingMove, QueuedMessage

    call_command("seed_demo", stdout=StringIO())
    orders = Message.objects.filter(collection__group__slug="acme", collection__name="orders")
    dead = sorted(str(r) for r in orders.filter(state="dead").values_list("dead_reason", flat=True))
    assert dead == ["exhausted", "expired", "failed"]
    assert orders.filter(state="dead", last_error__contains="(demo)").count() == 2
    ready = orders.filter(state="ready")
    from django.utils import timezone

    assert ready.filter(deliver_after__gt=timezone.now()).count() == 1  # delayed
    assert ready.filter(deliver_after__lte=timezone.now()).count() >= 3  # ready now
    reports = Collection.objects.get(group__slug="acme", name="reports")
    assert reports.paused and Message.objects.filter(collection=reports).count() == 2
    names = set(Trigger.objects.values_list("collection_name", flat=True))
    assert not names & {"orders", "reports"}  # no demo worker drains them
    assert PendingMove.objects.count() == 1 and QueuedMessage.objects.count() == 3


@pytest.mark.django_db
def test_seed_demo__a_rerun_after_the_worker_drained_the_demo_queues_adds_nothing():
    from groupqueues.models import Message

    call_command("seed_demo", stdout=StringIO())
    drained = Message.objects.filter(collection__name__in=["emails", "thumbnails"])
    drained.delete()  # what the demo worker's acks leave
    before = Message.objects.count()
    call_command("seed_demo", stdout=StringIO())
    assert Message.objects.count() == before
