"""Request serializer pieces shared by every API app."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, ClassVar

from django.utils import timezone
from rest_framework import serializers

from queueproject.ids import parse_id

# Scalars are strict: a JSON string or boolean where a number is expected (or a
# number where a string or boolean is) is refused rather than coerced, so the
# API accepts exactly what its OpenAPI schema describes.


class StrictIntegerField(serializers.IntegerField):
    """An integer that must be a JSON integer (no strings, booleans or 1.0)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A number that must be a JSON number (no strings or booleans)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A string that must be a JSON string (no numbers turned into text)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean (no "yes", 1 or "true")."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictUUIDField(serializers.UUIDField):
    """A UUID as a JSON string in its canonical 8-4-4-4-12 form only (what
    ``format: uuid`` says; ``queueproject.ids.parse_id``), not an integer or
    the braces, URN or bare-hex spellings Python also parses."""

    def to_internal_value(self, data: Any) -> uuid.UUID:
        try:
            return parse_id(data if isinstance(data, str) else None)
        except ValueError:
            self.fail("invalid", value=data)


class StrictFieldsMixin:
    """Refuse request fields the serializer does not know: each unknown key of
    the input object is a 400 ``invalid`` with ``details`` naming it, rather
    than silently dropped. Nested serializers and list entries are checked too,
    each by its own serializer (so give them this mixin as well); their errors
    land under the parent field, as DRF nests any error.

    ``min_fields``: at least this many known fields must be given (PATCH
    bodies that must change something); the schema says ``minProperties``."""

    min_fields: int = 0

    def get_fields(self) -> dict[str, serializers.Field]:
        """The declared fields, for this instance. DRF deep-copies each one per
        serializer instance (it builds the field anew from its deep-copied
        arguments): most of a small request's validation CPU, and a batch of
        100 builds 100 serializers. Here a prototype of the fields is built
        once per class; a field holding no other field is copied shallowly
        from it (binding sets its name and parent on the copy; its validators
        and messages are only read), one that holds others (a nested
        serializer, a list's child) deep-copied as DRF does."""
        cls = type(self)
        prototypes = cls.__dict__.get("_field_prototypes")
        if prototypes is None:
            prototypes = copy.deepcopy(self._declared_fields)  # type: ignore[attr-defined]
            cls._field_prototypes = prototypes  # type: ignore[attr-defined]  # a per-class cache
        return {
            name: copy.copy(field) if _holds_no_field(field) else copy.deepcopy(field)
            for name, field in prototypes.items()
        }

    def to_internal_value(self, data: Any) -> Any:
        unknown = self.unknown_fields(data)
        if not unknown and isinstance(data, Mapping) and len(data) < self.min_fields:
            names = ", ".join(self.fields)  # type: ignore[attr-defined]
            raise serializers.ValidationError(
                {"non_field_errors": [f"Give at least {self.min_fields} of: {names}."]}
            )
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                exc.detail.update(unknown)  # type: ignore[arg-type]  # one answer names every problem; the stubs type detail values narrower than DRF builds them
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value

    def unknown_fields(self, data: Any) -> dict[str, list[str]]:
        """``{key: ["Unknown field."]}`` for each key no writable field takes."""
        if not isinstance(data, Mapping):
            return {}
        fields = self.fields.items()  # type: ignore[attr-defined]
        known = {name for name, field in fields if not field.read_only}
        return {str(key): ["Unknown field."] for key in sorted(data, key=str) if key not in known}


def _holds_no_field(field: serializers.Field) -> bool:
    return not isinstance(field, serializers.BaseSerializer) and not any(
        hasattr(field, name) for name in ("child", "child_relation")
    )


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    """The base of every request serializer (unknown fields are a 400).

    ``schema_rules``: JSON Schema keywords (``not``, ``oneOf`` …) that state in
    the request schema the cross-field rules ``validate()`` enforces, so the
    schema refuses exactly what the server refuses."""

    schema_rules: ClassVar[dict[str, Any]] = {}


def not_both(first: str, second: str, **types: str) -> dict[str, Any]:
    """A schema rule: ``first`` and ``second`` are not both given non-null
    (``types``: each one's JSON type, which excludes null)."""
    properties = {name: {"type": types[name]} for name in (first, second)}
    return {"not": {"required": [first, second], "properties": properties}}


def api_datetime(value: datetime) -> str:
    """A datetime as every response spells it: what DRF's ``DateTimeField``
    renders (ISO 8601 in the current time zone, ``Z`` for UTC), for the hot
    responses built without a serializer instance."""
    text = value.astimezone(timezone.get_current_timezone()).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text
