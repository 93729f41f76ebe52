"""Request serializer pieces shared by every API app."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class StrictFieldsMixin:
    """Refuse request fields the serializer does not know: each unknown key of
    the input object is a 400 ``invalid`` with ``details`` naming it, rather
    than silently dropped. Nested serializers and list entries are checked too,
    each by its own serializer (so give them this mixin as well); their errors
    land under the parent field, as DRF nests any error."""

    def to_internal_value(self, data: Any) -> Any:
        unknown = self.unknown_fields(data)
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                exc.detail.update(unknown)  # one answer names every problem
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


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    """The base of every request serializer (unknown fields are a 400)."""
