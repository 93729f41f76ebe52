"""OpenAPI pieces shared by every API view: the error envelope and its responses."""

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

ErrorSerializer = inline_serializer(
    name="Error",
    fields={
        "error": inline_serializer(
            name="ErrorBody",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "details": serializers.DictField(),
            },
        )
    },
)


def error(description: str) -> OpenApiResponse:
    return OpenApiResponse(response=ErrorSerializer, description=description)


ERROR_RESPONSES = {
    400: error("invalid: bad input (details per field), malformed or too deep JSON"),
    401: error("not_authenticated: missing, unknown, expired or revoked credentials"),
    403: error("permission_denied: visible but not allowed"),
    404: error("not_found / collection_not_found"),
    429: error("throttled (Retry-After) / queue_full"),
    503: error(
        "unavailable: the database cannot be reached now, or no pooled connection "
        "is free (Retry-After)"
    ),
}


class StrictSerializerExtension(OpenApiSerializerExtension):
    """Request serializers that refuse unknown fields say so in the schema
    (``additionalProperties: false``), so clients and fuzzers know."""

    target_class = "queueproject.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(self.target, direction)
        if direction == "request":
            schema["additionalProperties"] = False
            if self.target.min_fields:
                schema["minProperties"] = self.target.min_fields
            schema.update(self.target.schema_rules)
        return schema


def lib_doc_excludes() -> list[type]:
    """GET_LIB_DOC_EXCLUDES: drf-spectacular's, plus the project's serializer
    bases, whose docstrings describe the base and not each request body."""
    from drf_spectacular.plumbing import get_lib_doc_excludes

    from queueproject.serializers import StrictFieldsMixin, StrictSerializer

    return [*get_lib_doc_excludes(), StrictSerializer, StrictFieldsMixin]
