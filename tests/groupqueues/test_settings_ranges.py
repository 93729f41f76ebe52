"""One table of collection setting ranges (``settings_ranges.SETTING_RANGES``):
the service, the API serializer, the admin form and the database constraints
each agree with it at both ends of every range."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms
from django.db import DataError, IntegrityError, transaction
from django.db.models import CheckConstraint

from groupqueues import exceptions as err
from groupqueues import services
from groupqueues.admin import CollectionForm
from groupqueues.models import Collection
from groupqueues.serializers import CollectionSettingsSerializer
from groupqueues.settings_ranges import (
    SETTING_RANGES,
    range_condition,
    range_constraint_name,
)

pytestmark = pytest.mark.django_db

NAMES = sorted(SETTING_RANGES)


def _outside(name: str) -> tuple[float, float]:
    """A value just below and just above the range."""
    r = SETTING_RANGES[name]
    step = 0.0001 if r.seconds else 1
    return r.low - step, r.high + step


def _valid_settings(name: str, value: float) -> dict[str, Any]:
    """Settings holding ``value`` for ``name`` that break no other rule (the
    backoff's cap at least its base), as keyword arguments of any setting's type."""
    settings: dict[str, Any] = {name: value}
    if name == "retry_backoff_base":
        settings["retry_backoff_max"] = max(value, SETTING_RANGES["retry_backoff_max"].low)
    if name == "retry_backoff_max":
        settings["retry_backoff_base"] = SETTING_RANGES["retry_backoff_base"].low
    return settings


def test_ranges__cover_every_collection_setting():
    from groupqueues.admin import SETTINGS

    assert set(SETTING_RANGES) == set(SETTINGS) - {"paused", "fairness", "rate_limit"}


@pytest.mark.parametrize("name", NAMES)
def test_constraint__is_the_tables_range(name):
    constraints = {c.name: c for c in Collection._meta.constraints}
    constraint = constraints[range_constraint_name(name)]
    assert isinstance(constraint, CheckConstraint)
    assert constraint.condition == range_condition(name)


@pytest.mark.parametrize("name", NAMES)
def test_constraint__the_database_holds_the_ends_and_refuses_past_them(group, name):
    r = SETTING_RANGES[name]
    for i, value in enumerate((r.low, r.high)):
        Collection.objects.create(group=group, name=f"ok{i}", **_valid_settings(name, value))
    for i, value in enumerate(_outside(name)):
        # PostgreSQL refuses past INT32_MAX by the column's type already
        with pytest.raises((IntegrityError, DataError)), transaction.atomic():
            Collection.objects.create(group=group, name=f"bad{i}", **_valid_settings(name, value))


@pytest.mark.parametrize("name", NAMES)
def test_service__accepts_the_ends_and_refuses_past_them(group, name):
    r = SETTING_RANGES[name]
    for i, value in enumerate((r.low, r.high)):
        services.collection_create(group=group, name=f"ok{i}", **_valid_settings(name, value))
    for value in _outside(name):
        with pytest.raises(err.InvalidQueueInput) as exc:
            services.collection_create(group=group, name="bad", **_valid_settings(name, value))
        assert name in exc.value.details


@pytest.mark.parametrize("name", NAMES)
def test_serializer__accepts_the_ends_and_refuses_past_them(name):
    r = SETTING_RANGES[name]
    for value in (r.low, r.high):
        assert CollectionSettingsSerializer(data={name: value}, partial=True).is_valid()
    for value in _outside(name):
        serializer = CollectionSettingsSerializer(data={name: value}, partial=True)
        assert not serializer.is_valid() and name in serializer.errors


@pytest.mark.parametrize("name", NAMES)
def test_admin_form__fields_carry_the_tables_range(name):
    r = SETTING_RANGES[name]
    field = CollectionForm.base_fields[name]
    assert isinstance(field, forms.IntegerField)  # FloatField is one too
    assert (field.min_value, field.max_value, field.required) == (r.low, r.high, not r.nullable)
    for value in (r.low, r.high):
        field.clean(value)
    for value in _outside(name):
        with pytest.raises(Exception, match="Ensure this value"):
            field.clean(value)
