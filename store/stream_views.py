"""The stream API (SPEC §6) under ``/api/groups/{g}/topics/``.

Capabilities on the owning group, as for queues: reading topics, entries and
consumers needs read; appending needs enqueue; committing a consumer's offset
needs consume; creating, changing, deleting and purging topics, resetting and
deleting consumers need manage. An unknown or invisible group answers 404 like
the queue routes; a missing topic 404 ``topic_not_found``, a missing consumer
404 ``consumer_not_found``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues.openapi import GROUP_ROUTE, PAGE_PARAMETERS, PATH, paginated
from groupqueues.serializers import CountSerializer
from groupqueues.views import group_for
from principals.authz import Capability
from queueproject.api import TakesNoBody, validated
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES, error
from store import stream_serializers as s
from store import streams
from store.exceptions import InvalidStreamInput
from store.models import Topic

TAG = "streams"
TOPIC_PARAMETERS = [
    OpenApiParameter("g", str, PATH, description="Group slug or id."),
    OpenApiParameter("t", str, PATH, description="Topic name."),
]
TOPIC_ROUTE = extend_schema(parameters=TOPIC_PARAMETERS)
CONSUMER_ROUTE = extend_schema(parameters=[
    *TOPIC_PARAMETERS, OpenApiParameter("consumer", str, PATH, description="Consumer name."),
])  # fmt: skip
NOT_FOUND = {404: error("not_found / topic_not_found / consumer_not_found")}
RESPONSES = {**ERROR_RESPONSES, **NOT_FOUND}
OUT_OF_RANGE = {
    409: error(
        "offset_out_of_range: the entries after the offset are gone, or it is beyond the "
        "head (details: first_available_offset, head_offset)"
    )
}
APPEND_REQUEST = PolymorphicProxySerializer(
    component_name="StreamAppendRequest",
    serializers=[s.AppendSerializer, s.AppendBatchSerializer],
    resource_type_field_name=None,
)
APPENDED = PolymorphicProxySerializer(
    component_name="StreamAppendResponse",
    serializers=[s.AppendedSerializer, s.AppendedBatchSerializer],
    resource_type_field_name=None,
)


def topic_for(request: Request, capability: Capability, g: str, t: str) -> Topic:
    _, group = group_for(request, capability, g)
    return streams.topic_get(group=group, name=t)


def topic_body(topic: Topic) -> dict[str, Any]:
    return dict(s.TopicDetailSerializer(topic).data)


@GROUP_ROUTE
class TopicsView(APIView):
    @extend_schema(
        tags=[TAG], summary="The group's topics", operation_id="groups_topics_list",
        parameters=PAGE_PARAMETERS,
        responses={200: paginated("PaginatedTopicList", s.TopicSerializer(many=True)),
                   **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_READ, g)
        paginator = Pagination()
        page = paginator.paginate_queryset(streams.topics_of(group=group), request, self)
        return paginator.get_paginated_response(s.TopicSerializer(page, many=True).data)

    @extend_schema(
        tags=[TAG], summary="Create a topic (manage)", request=s.TopicCreateSerializer,
        responses={201: s.TopicDetailSerializer, 409: error("already_exists"), **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_MANAGE, g)
        data = dict(validated(s.TopicCreateSerializer, request.data))
        topic = streams.topic_create(group=group, name=data.pop("name"), **data)
        return Response(topic_body(topic), status=status.HTTP_201_CREATED)


@TOPIC_ROUTE
class TopicView(APIView):
    @extend_schema(tags=[TAG], summary="A topic: offsets, settings, consumers with their lag",
                   responses={200: s.TopicDetailSerializer, **RESPONSES})  # fmt: skip
    def get(self, request: Request, g: str, t: str) -> Response:
        return Response(topic_body(topic_for(request, Capability.QUEUE_READ, g, t)))

    @extend_schema(tags=[TAG], summary="Change retention or the payload limit (manage)",
                   request=s.TopicChangeSerializer,
                   responses={200: s.TopicDetailSerializer, **RESPONSES})  # fmt: skip
    def patch(self, request: Request, g: str, t: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_MANAGE, g, t)
        data = validated(s.TopicChangeSerializer, request.data)
        return Response(topic_body(streams.topic_update(topic=topic, **data)))

    @extend_schema(tags=[TAG], summary="Delete a topic with its entries and consumers (manage)",
                   responses={204: None, **RESPONSES})  # fmt: skip
    def delete(self, request: Request, g: str, t: str) -> Response:
        streams.topic_delete(topic=topic_for(request, Capability.QUEUE_MANAGE, g, t))
        return Response(status=status.HTTP_204_NO_CONTENT)


@TOPIC_ROUTE
class EntriesView(APIView):
    @extend_schema(
        tags=[TAG], summary="Read the entries after an offset (long poll with wait_seconds)",
        parameters=[s.ReadQuerySerializer],
        responses={200: s.PageSerializer, **RESPONSES, **OUT_OF_RANGE},
    )  # fmt: skip
    def get(self, request: Request, g: str, t: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_READ, g, t)
        query = validated(s.ReadQuerySerializer, request.query_params.dict())
        page = streams.stream_wait(topic=topic, since=query["since"], limit=query["limit"],
                                   wait_seconds=query["wait_seconds"])  # fmt: skip
        return Response(s.page_body(page))

    @extend_schema(
        tags=[TAG], summary=f"Append one entry or a batch of up to {streams.APPEND_MAX}",
        request=APPEND_REQUEST,
        responses={
            201: OpenApiResponse(APPENDED, description="{offset} for one, {offsets} for a batch."),
            200: OpenApiResponse(APPENDED, description="Idempotent repeat: nothing appended."),
            413: error("payload_too_large"), **RESPONSES,
        },
    )  # fmt: skip
    def post(self, request: Request, g: str, t: str) -> Response:
        principal, group = group_for(request, Capability.QUEUE_ENQUEUE, g)
        topic = streams.topic_get(group=group, name=t)
        data = request.data
        if isinstance(data, dict) and "entries" in data and "payload" in data:
            raise InvalidStreamInput.field("entries", 'Give "payload" (one) or "entries" (many).')
        batch = isinstance(data, dict) and "entries" in data
        if batch:
            entries = validated(s.AppendBatchSerializer, data)["entries"]
        else:
            entries = [s.AppendSerializer.entry(validated(s.AppendSerializer, data))]
        results = streams.stream_append_results(topic=topic, entries=entries,
                                                appended_by=principal.label)  # fmt: skip
        offsets = [r.offset for r in results]
        body: dict[str, Any] = {"offsets": offsets} if batch else {"offset": offsets[0]}
        created = any(r.created for r in results)
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


@TOPIC_ROUTE
class PurgeView(TakesNoBody, APIView):
    @extend_schema(
        tags=[TAG], summary="Delete every entry; offsets are not reused (manage)", request=None,
        responses={200: CountSerializer, **RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, t: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_MANAGE, g, t)
        return Response({"count": streams.topic_purge(topic=topic)})


@TOPIC_ROUTE
class ConsumersView(APIView):
    @extend_schema(
        tags=[TAG], summary="The topic's consumers with their lag",
        operation_id="groups_topics_consumers_list", parameters=PAGE_PARAMETERS,
        responses={200: paginated("PaginatedConsumerList", s.ConsumerSerializer(many=True)),
                   **RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str, t: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_READ, g, t)
        paginator = Pagination()
        page = paginator.paginate_queryset(streams.consumers_of(topic=topic), request, self)
        return paginator.get_paginated_response(s.ConsumerSerializer(page, many=True).data)


@CONSUMER_ROUTE
class ConsumerView(APIView):
    @extend_schema(tags=[TAG], summary="A consumer: its committed offset and lag",
                   responses={200: s.ConsumerSerializer, **RESPONSES})  # fmt: skip
    def get(self, request: Request, g: str, t: str, consumer: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_READ, g, t)
        return Response(s.ConsumerSerializer(streams.consumer_get(topic=topic, name=consumer)).data)

    @extend_schema(tags=[TAG], summary="Forget a consumer and its offset (manage)",
                   responses={204: None, **RESPONSES})  # fmt: skip
    def delete(self, request: Request, g: str, t: str, consumer: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_MANAGE, g, t)
        streams.consumer_delete(consumer=streams.consumer_get(topic=topic, name=consumer))
        return Response(status=status.HTTP_204_NO_CONTENT)


@CONSUMER_ROUTE
class ConsumerEntriesView(APIView):
    @extend_schema(
        tags=[TAG], summary="Read from the consumer's saved offset (does not commit; long poll)",
        parameters=[s.ConsumerReadQuerySerializer],
        responses={200: s.PageSerializer, **RESPONSES, **OUT_OF_RANGE},
    )  # fmt: skip
    def get(self, request: Request, g: str, t: str, consumer: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_READ, g, t)
        query = validated(s.ConsumerReadQuerySerializer, request.query_params.dict())
        page = streams.consumer_read(topic=topic, name=consumer, limit=query["limit"],
                                     wait_seconds=query["wait_seconds"])  # fmt: skip
        return Response(s.page_body(page))


@CONSUMER_ROUTE
class CommitView(APIView):
    @extend_schema(
        tags=[TAG], summary="Save the consumer's offset: forward only (consume)",
        request=s.CommitSerializer,
        responses={200: s.ConsumerSerializer, **RESPONSES,
                   409: error("offset_regressed: below the saved offset (details: "
                              "committed_offset, offset) / offset_out_of_range: beyond the head")},
    )  # fmt: skip
    def post(self, request: Request, g: str, t: str, consumer: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_CONSUME, g, t)
        offset = validated(s.CommitSerializer, request.data)["offset"]
        saved = streams.consumer_commit(topic=topic, name=consumer, offset=offset)
        return Response(s.ConsumerSerializer(saved).data)


@CONSUMER_ROUTE
class ResetView(APIView):
    @extend_schema(
        tags=[TAG], summary="Move the consumer to any offset, backwards too (manage)",
        request=s.ResetSerializer,
        responses={200: s.ConsumerSerializer, **RESPONSES, **OUT_OF_RANGE},
    )  # fmt: skip
    def post(self, request: Request, g: str, t: str, consumer: str) -> Response:
        topic = topic_for(request, Capability.QUEUE_MANAGE, g, t)
        data = validated(s.ResetSerializer, request.data)
        moved = streams.consumer_reset(topic=topic, name=consumer, offset=data.get("offset"),
                                       to=data.get("to"))  # fmt: skip
        return Response(s.ConsumerSerializer(moved).data)
