"""Small helpers shared by the API views of both queue engines."""

from typing import Any

from rest_framework import serializers

from queueproject.serializers import StrictSerializer


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """``data`` validated by ``serializer_class`` (raises DRF's ValidationError,
    which the one exception handler turns into 400 ``invalid`` with details)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    validated_data: dict[str, Any] = serializer.validated_data  # a dict once is_valid passed
    return validated_data


class NoBodySerializer(StrictSerializer):
    """No fields: every field of a request body is unknown."""


class TakesNoBody:
    """APIView mixin for endpoints whose writes take no request body: a body
    with fields is 400 ``invalid`` naming them, as on every other endpoint,
    rather than ignored. Checked after authentication (401 comes first)."""

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if request.method in ("POST", "PUT", "PATCH"):
            validated(NoBodySerializer, request.data)
