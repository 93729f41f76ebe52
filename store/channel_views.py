"""The notify channel API (SPEC §6) under ``/api/groups/{g}/channels/``.

Capabilities on the group, as for queues: list, get and listen need queue
read; publish needs enqueue; create, delete and purge need manage. An unknown
or invisible group answers 404 like the queue routes, a missing channel 404
``channel_not_found``.

``GET …/channels/{c}/events/`` waits for notifications, so it is an async view
(served under ASGI, ``uvicorn queueproject.asgi:application``) that holds no
thread and no database connection while it waits (``queueproject.sse``). Its
first step, authentication, throttling, authorisation and parsing, is the
sync DRF view :class:`ChannelEventsView`, run off the event loop; it answers
errors in the usual envelope, or a :class:`EventsPlan` the async part serves:
``Accept: text/event-stream`` gets Server-Sent Events (``id:`` per event, resume
by ``Last-Event-ID``), anything else the JSON long-poll.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues.openapi import GROUP_ROUTE, PAGE_PARAMETERS, paginated
from groupqueues.views import group_for
from principals.authz import Capability
from queueproject import sse
from queueproject.api import TakesNoBody, validated
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES, error
from store import channel_serializers as s
from store import channels
from store.exceptions import InvalidChannelInput
from store.models import Channel, Notification

TAG = "channels"
CHANNEL_ROUTE = extend_schema(parameters=[
    OpenApiParameter("g", str, OpenApiParameter.PATH, description="Group slug or id."),
    OpenApiParameter("c", str, OpenApiParameter.PATH, description="Channel name."),
])  # fmt: skip
NOT_FOUND = {404: error("not_found / channel_not_found")}
RESPONSES = {**{k: v for k, v in ERROR_RESPONSES.items() if k != 404}, **NOT_FOUND}


def channel_for(request: Request, capability: Capability, g: str, c: str) -> Channel:
    _, group = group_for(request, capability, g)
    return channels.channel_get(group=group, name=c)


def body(channel: Channel) -> dict[str, Any]:
    return s.ChannelSerializer(channel).data


@GROUP_ROUTE
class ChannelsView(APIView):
    @extend_schema(
        tags=[TAG], summary="The group's notify channels", operation_id="groups_channels_list",
        parameters=PAGE_PARAMETERS,
        responses={200: paginated("PaginatedChannelList", s.ChannelSerializer(many=True)),
                   **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_READ, g)
        paginator = Pagination()
        page = paginator.paginate_queryset(channels.channels_of(group=group), request, self)
        return paginator.get_paginated_response(s.ChannelSerializer(page, many=True).data)

    @extend_schema(
        tags=[TAG], summary="Create a notify channel (manage)", request=s.ChannelCreateSerializer,
        responses={201: s.ChannelSerializer, 409: error("already_exists"), **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_MANAGE, g)
        data = validated(s.ChannelCreateSerializer, request.data)
        channel = channels.channel_create(group=group, name=data["name"])
        return Response(body(channel), status=status.HTTP_201_CREATED)


@CHANNEL_ROUTE
class ChannelView(APIView):
    @extend_schema(
        tags=[TAG], summary="A notify channel (head: its latest notification id)",
        responses={200: s.ChannelSerializer, **RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str, c: str) -> Response:
        return Response(body(channel_for(request, Capability.QUEUE_READ, g, c)))

    @extend_schema(
        tags=[TAG], summary="Delete a notify channel and its notifications (manage)",
        responses={204: None, **RESPONSES},
    )  # fmt: skip
    def delete(self, request: Request, g: str, c: str) -> Response:
        channels.channel_delete(channel=channel_for(request, Capability.QUEUE_MANAGE, g, c))
        return Response(status=status.HTTP_204_NO_CONTENT)


@CHANNEL_ROUTE
class PublishView(APIView):
    @extend_schema(
        tags=[TAG], summary="Publish a notification to the channel's current listeners (enqueue)",
        request=s.PublishSerializer,
        responses={201: s.NotificationSerializer, 413: error("payload_too_large"), **RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, c: str) -> Response:
        channel = channel_for(request, Capability.QUEUE_ENQUEUE, g, c)
        data = validated(s.PublishSerializer, request.data)
        note = channels.publish(
            channel=channel, payload=data["payload"], idempotency_key=data.get("idempotency_key")
        )
        return Response(s.NotificationSerializer(note).data, status=status.HTTP_201_CREATED)


@CHANNEL_ROUTE
class PurgeView(TakesNoBody, APIView):
    @extend_schema(
        tags=[TAG], summary="Delete the channel's retained notifications (manage)", request=None,
        responses={200: s.PurgedSerializer, **RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, c: str) -> Response:
        channel = channel_for(request, Capability.QUEUE_MANAGE, g, c)
        return Response({"deleted": channels.channel_purge(channel=channel)})


# ------------------------------------------------------------------ events


@dataclass(frozen=True)
class EventsPlan:
    """What the async part serves, decided by the sync part."""

    channel_id: int
    resume: int | None  # None: attach at the head (no replay)
    timeout: float | None
    stream: bool  # SSE (else the JSON long-poll)


EVENTS_DESCRIPTION = (
    "With `Accept: text/event-stream`: Server-Sent Events, one event per notification "
    "(`id:` its id, `data:` the notification as JSON), `: keep-alive` comments when idle; "
    "a reconnect with `Last-Event-ID` (or `?last_event_id=`) resumes after that id without "
    "loss inside the retention window. Otherwise a JSON long-poll: waits up to `timeout` "
    "seconds for notifications after `after` and returns them with the id to pass next time. "
    "Without a resume id the listener attaches now: only later notifications arrive."
)


@CHANNEL_ROUTE
class ChannelEventsView(APIView):
    """The sync first step of the events endpoint (see the module docstring)."""

    renderer_classes = [JSONRenderer]
    content_negotiation_class = sse.JSONOnly

    @extend_schema(
        tags=[TAG], summary="Listen: Server-Sent Events, or a JSON long-poll (read)",
        description=EVENTS_DESCRIPTION, parameters=[s.EventsQuerySerializer],
        responses={
            (200, "application/json"): s.LongPollSerializer,
            (200, sse.CONTENT_TYPE): OpenApiResponse(sse.EVENT_SCHEMA, description="SSE"),
            **RESPONSES,
        },
    )  # fmt: skip
    def get(self, request: Request, g: str, c: str) -> HttpResponse:
        channel = channel_for(request, Capability.QUEUE_READ, g, c)
        data = validated(s.EventsQuerySerializer, request.query_params.dict())
        try:
            header = sse.parse_cursor(request.headers.get("Last-Event-ID") or None)
        except ValueError as exc:
            raise InvalidChannelInput.field("Last-Event-ID", str(exc)) from None
        stream = sse.CONTENT_TYPE in request.headers.get("Accept", "")
        resume = header if header is not None else data.get("last_event_id", data.get("after"))
        return sse.Planned(EventsPlan(channel.pk, resume, data.get("timeout"), stream))


def _fetch(channel_id: int) -> sse.Fetch[int, Notification]:
    def fetch(cursor: int) -> tuple[Sequence[Notification], int]:
        batch = channels.notifications_after(channel=channel_id, after=cursor)
        return batch, (batch[-1].seq if batch else cursor)

    return fetch


def _start(plan: EventsPlan) -> Any:
    if plan.resume is not None:
        return lambda: plan.resume
    return lambda: channels.channel_head(channel=plan.channel_id)


def _render(note: Notification) -> bytes:
    return sse.format_json_event(s.NotificationSerializer(note).data, id=note.seq)


async def _serve(plan: EventsPlan) -> HttpResponseBase:
    """``GET …/channels/{c}/events/`` once planned: stream, or long-poll (async)."""
    wake = sse.Wakeup(channels.wake_name(plan.channel_id))
    if plan.stream:
        events = sse.event_stream(
            fetch=_fetch(plan.channel_id), start=_start(plan), wake=wake, render=_render,
            max_seconds=plan.timeout, first=sse.retry(sse.RETRY_MS),
            share=("channel", plan.channel_id),
        )  # fmt: skip
        return sse.streaming_response(events)
    timeout = plan.timeout if plan.timeout is not None else s.LONG_POLL_DEFAULT
    notes, last = await sse.long_poll(
        fetch=_fetch(plan.channel_id), start=_start(plan), wake=wake, timeout=timeout,
        share=("channel", plan.channel_id),
    )  # fmt: skip
    return JsonResponse(s.LongPollSerializer({"notifications": notes, "last_event_id": last}).data)


channel_events = sse.waiting(ChannelEventsView, _serve)
