"""Small helpers shared by the API views of both queue engines."""

from typing import Any

from rest_framework import serializers


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """``data`` validated by ``serializer_class`` (raises DRF's ValidationError,
    which the one exception handler turns into 400 ``invalid`` with details)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    validated_data: dict[str, Any] = serializer.validated_data  # a dict once is_valid passed
    return validated_data
