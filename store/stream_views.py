"""The stream API (SPEC §6) under ``/api/groups/{g}/topics/``.

Capabilities on the owning group, as for queues: reading topics, entries and
consumers needs read; appending needs enqueue; committing a consumer's offset
needs consume; creating, changing, deleting and purging topics, resetting and
deleting consumers need manage. An unknown or invisible group answers 404 like
the queue routes; a missing topic 404 ``topic_not_found``, a missing consumer
404 ``consumer_not_found``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues.openapi import GROUP_ROUTE, PAGE_PARAMETERS, PATH, paginated
from groupqueues.serializers import CountSerializer
from groupqueues.views import group_for
from principals.authz import Capability
from queueproject import sse
from queueproject.api import TakesNoBody, validated
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES, error
from store import stream_serializers as s
from store import streams
from store.exceptions import InvalidStreamInput, OffsetOutOfRange
from store.models import StreamEntry, Topic

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
    def get(self, request: Request, g: str, t: str) -> HttpResponse:
        topic = topic_for(request, Capability.QUEUE_READ, g, t)
        query = validated(s.ReadQuerySerializer, request.query_params.dict())
        page = streams.stream_read(topic=topic, since=query["since"], limit=query["limit"])
        return read_or_wait(topic, page, query["limit"], query["wait_seconds"])

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
    def get(self, request: Request, g: str, t: str, consumer: str) -> HttpResponse:
        topic = topic_for(request, Capability.QUEUE_READ, g, t)
        query = validated(s.ConsumerReadQuerySerializer, request.query_params.dict())
        page = streams.consumer_read(topic=topic, name=consumer, limit=query["limit"])
        return read_or_wait(topic, page, query["limit"], query["wait_seconds"])


def read_or_wait(
    topic: Topic, page: streams.StreamPage, limit: int, wait_seconds: float
) -> HttpResponse:
    """``page``; when it is empty and the client asked to wait, the plan of a
    long poll (served by ``sse.waiting_view``, woken by appends) whose answer
    is the first page read after ``page.since`` that has entries, or the empty
    one at the deadline."""
    if page.entries or wait_seconds <= 0:
        return Response(s.page_body(page))

    def read(_: Any = None) -> tuple[list[streams.StreamPage], streams.StreamPage]:
        again = streams.stream_read(topic=topic, since=page.since, limit=limit)
        return ([again] if again.entries else []), again

    return sse.Planned(sse.Wait(
        fetch=read, start=lambda: page, wake=streams.wake_channel(topic), timeout=wait_seconds,
        respond=lambda _, last: s.page_body(last),
    ))  # fmt: skip


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


# ------------------------------------------------------------------ subscribe (SSE)
#
# ``GET …/consumers/{consumer}/events/`` streams the entries after the
# consumer's saved offset (or after ``Last-Event-ID``) as Server-Sent Events,
# ``id:`` = the offset, under ASGI without a thread or connection per client
# (``queueproject.sse``, shared with notify channels). As there, the sync DRF
# view ``ConsumerEventsView`` authenticates, authorises and checks the start
# (409 ``offset_out_of_range`` before the stream starts), and the async
# ``consumer_events`` serves the plan. Streaming does not commit: the client
# commits what it processed with commit/. When retention passes a running
# stream, it ends with an ``offset_out_of_range`` event carrying the envelope.


@dataclass(frozen=True)
class EventsPlan:
    topic: Topic
    since: int
    timeout: float | None


@dataclass(frozen=True)
class Gone:
    """The fetch found its range pruned: the stream's last event."""

    error: OffsetOutOfRange


GONE_EVENT = "offset_out_of_range"
EVENTS_DESCRIPTION = (
    "Server-Sent Events (`Accept: text/event-stream`): one event per entry after the consumer's "
    "saved offset (`id:` its offset, `data:` the entry as JSON), `: keep-alive` comments when "
    "idle; a reconnect with `Last-Event-ID` (or `?last_event_id=`) resumes after that offset. "
    "Streaming does not commit (POST commit/). If retention passes the stream, a last event "
    "`offset_out_of_range` carries the error envelope."
)


@CONSUMER_ROUTE
class ConsumerEventsView(APIView):
    """The sync first step of the subscribe endpoint (see above)."""

    renderer_classes = [JSONRenderer]
    content_negotiation_class = sse.JSONOnly

    @extend_schema(
        tags=[TAG], summary="Subscribe from the saved offset: Server-Sent Events (read)",
        description=EVENTS_DESCRIPTION, parameters=[s.EventsQuerySerializer],
        responses={
            (200, sse.CONTENT_TYPE): OpenApiResponse(sse.EVENT_SCHEMA, description="SSE"),
            **RESPONSES, **OUT_OF_RANGE,
        },
    )  # fmt: skip
    def get(self, request: Request, g: str, t: str, consumer: str) -> HttpResponse:
        topic = topic_for(request, Capability.QUEUE_READ, g, t)
        query = validated(s.EventsQuerySerializer, request.query_params.dict())
        try:
            header = sse.parse_cursor(request.headers.get("Last-Event-ID") or None)
        except ValueError as exc:
            raise InvalidStreamInput.field("Last-Event-ID", str(exc)) from None
        since = header if header is not None else query.get("last_event_id")
        if since is None:
            since = streams.consumer_position(topic=topic, name=consumer)
        streams.stream_read(topic=topic, since=since, limit=1)  # 409 before streaming
        return sse.Planned(EventsPlan(topic, since, query.get("timeout")))


def _fetch(topic: Topic) -> sse.Fetch[int, StreamEntry | Gone]:
    def fetch(cursor: int) -> tuple[Sequence[StreamEntry | Gone], int]:
        try:
            page = streams.stream_read(topic=topic, since=cursor, limit=streams.READ_DEFAULT)
        except OffsetOutOfRange as exc:
            return [Gone(exc)], cursor
        return page.entries, page.next_since

    return fetch


def _render(item: StreamEntry | Gone) -> bytes:
    if isinstance(item, Gone):
        envelope = {"code": item.error.code, "message": item.error.message,
                    "details": item.error.details}  # fmt: skip
        return sse.format_json_event({"error": envelope}, event=GONE_EVENT)
    return sse.format_json_event(s.EntrySerializer(item).data, id=item.offset)


async def _until_gone(events: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The events, ending after an ``offset_out_of_range`` event."""
    try:
        async for chunk in events:
            yield chunk
            if b"event: " + GONE_EVENT.encode() in chunk:
                return
    finally:
        await events.aclose()  # type: ignore[attr-defined]


async def _serve_events(plan: EventsPlan) -> HttpResponseBase:
    """``GET …/consumers/{consumer}/events/`` once planned: stream (async)."""
    events = sse.event_stream(
        fetch=_fetch(plan.topic), start=lambda: plan.since,
        wake=sse.Wakeup(streams.wake_channel(plan.topic)), render=_render,
        max_seconds=plan.timeout, first=sse.retry(sse.RETRY_MS),
        share=("stream", plan.topic.pk),
    )  # fmt: skip
    return sse.streaming_response(_until_gone(events))


consumer_events = sse.waiting(ConsumerEventsView, _serve_events)
entries = sse.waiting_view(EntriesView)
consumer_entries = sse.waiting_view(ConsumerEntriesView)
