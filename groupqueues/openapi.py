"""The OpenAPI description of the group-queue API (drf-spectacular): path
parameters, pages, the enqueue request/response union and error responses.
The views decorate themselves with these; nothing here runs at request time."""

from __future__ import annotations

from typing import Any, Final

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers as drf

from groupqueues import serializers as s
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES, error

TAG = "group queues"
ERRORS_409 = {409: error("lease_lost: the claim is no longer held")}
ERRORS_413_429 = {
    413: error("payload_too_large: a payload over the collection's max_payload_bytes"),
    429: error("throttled / queue_full: the collection holds max_depth live messages"),
}

PATH: Final = OpenApiParameter.PATH
GROUP_ROUTE = extend_schema(parameters=[
    OpenApiParameter("g", str, PATH, description="Group slug or id."),
])  # fmt: skip
QUEUE_ROUTE = extend_schema(parameters=[
    OpenApiParameter("g", str, PATH, description="Group slug or id."),
    OpenApiParameter("q", str, PATH, description="Collection name."),
])  # fmt: skip
MESSAGE_ROUTE = extend_schema(parameters=[
    OpenApiParameter("g", str, PATH, description="Group slug or id."),
    OpenApiParameter("q", str, PATH, description="Collection name."),
    OpenApiParameter("id", str, PATH, description="Message id (a UUID; anything else is 404)."),
])  # fmt: skip
APP_ROUTE = extend_schema(parameters=[
    OpenApiParameter("app", str, PATH, description="App slug or id."),
    OpenApiParameter("name", str, PATH, description="Collection name, resolved through the "
                     "app's chain (its group, the parent, ... the root)."),
])  # fmt: skip
PAGE_PARAMETERS = [
    OpenApiParameter(
        "page",
        Pagination.schema("page"),
        OpenApiParameter.QUERY,
        description="Page number (from 1).",
    ),
    OpenApiParameter(
        "page_size",
        Pagination.schema("page_size"),
        OpenApiParameter.QUERY,
        description="At most 500.",
    ),
]


def paginated(name: str, child: drf.Serializer) -> drf.Serializer:
    """The schema of a page: {"count", "next", "previous", "results"}."""
    return inline_serializer(
        name=name,
        fields={
            "count": drf.IntegerField(), "next": drf.URLField(allow_null=True),
            "previous": drf.URLField(allow_null=True), "results": child,
        },
    )  # fmt: skip


ENQUEUE_REQUEST = PolymorphicProxySerializer(
    component_name="EnqueueRequest",
    serializers=[s.EnqueueSerializer, s.EnqueueBatchSerializer],
    resource_type_field_name=None,
)
ENQUEUED = PolymorphicProxySerializer(
    component_name="EnqueueResponse",
    serializers=[s.EnqueuedSerializer, s.EnqueuedBatchSerializer],
    resource_type_field_name=None,
)
ENQUEUE_RESPONSES = {
    201: OpenApiResponse(ENQUEUED, description="Created: {id} for one, {ids} for a batch."),
    200: OpenApiResponse(
        ENQUEUED, description="Idempotent repeat: nothing was created; the existing id(s)."
    ),
    **ERROR_RESPONSES,
    **ERRORS_413_429,
}


def holder_schema(summary: str, request: type) -> Any:
    return extend_schema(
        tags=[TAG], summary=summary, request=request,
        responses={200: s.MessageSerializer, **ERRORS_409, **ERROR_RESPONSES},
    )  # fmt: skip
