"""The outbox API (issue 15) under ``/api/groups/{g}/outbox/``: list (by
state), one row, stats (queue read on the group); redrive dead rows and purge
delivered ones (queue manage). An unknown or invisible group answers 404 like
the queue routes, a row of another group 404 ``not_found``."""

from __future__ import annotations

import dataclasses
import uuid

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues import serializers as gs
from groupqueues.openapi import GROUP_ROUTE, PAGE_PARAMETERS, paginated
from groupqueues.views import group_for
from principals.authz import Capability
from queueproject.api import validated
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES
from store import outbox
from store import outbox_serializers as s
from store.models import OutboxState

TAG = "outbox"
ROW_ROUTE = extend_schema(parameters=[
    OpenApiParameter("g", str, OpenApiParameter.PATH, description="Group slug or id."),
    OpenApiParameter("id", uuid.UUID, OpenApiParameter.PATH, description="Outbox message id."),
])  # fmt: skip
STATE_PARAMETER = OpenApiParameter(
    "state", str, OpenApiParameter.QUERY, enum=OutboxState.values,
    description="Only rows in this state (default: all).",
)  # fmt: skip


@GROUP_ROUTE
class OutboxListView(APIView):
    @extend_schema(
        tags=[TAG], summary="The group's outbox rows, oldest first",
        operation_id="groups_outbox_list",
        parameters=[STATE_PARAMETER, *PAGE_PARAMETERS],
        responses={200: paginated("PaginatedOutboxMessageList",
                                  s.OutboxMessageSerializer(many=True)), **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_READ, g)
        rows = outbox.outbox_of(group=group, state=request.query_params.get("state"))
        paginator = Pagination()
        page = paginator.paginate_queryset(rows, request, self)
        return paginator.get_paginated_response(s.OutboxMessageSerializer(page, many=True).data)


@ROW_ROUTE
class OutboxMessageView(APIView):
    @extend_schema(tags=[TAG], summary="One outbox row",
                   responses={200: s.OutboxMessageSerializer, **ERROR_RESPONSES})  # fmt: skip
    def get(self, request: Request, g: str, id: uuid.UUID) -> Response:
        _, group = group_for(request, Capability.QUEUE_READ, g)
        return Response(s.OutboxMessageSerializer(outbox.outbox_get(group=group, id=id)).data)


@GROUP_ROUTE
class OutboxStatsView(APIView):
    @extend_schema(tags=[TAG], summary="Outbox rows per state",
                   responses={200: s.OutboxStatsSerializer, **ERROR_RESPONSES})  # fmt: skip
    def get(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_READ, g)
        return Response(dataclasses.asdict(outbox.outbox_stats(group=group)))


@GROUP_ROUTE
class OutboxRedriveView(APIView):
    @extend_schema(
        tags=[TAG], summary="Dead outbox rows back to pending (manage)",
        request=gs.RedriveSerializer, responses={200: gs.CountSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_MANAGE, g)
        data = validated(gs.RedriveSerializer, request.data)
        count = outbox.outbox_redrive(group=group, ids=data.get("ids"), all=data["all"])
        return Response({"count": count})


@GROUP_ROUTE
class OutboxPurgeView(APIView):
    @extend_schema(
        tags=[TAG], summary="Delete delivered (and optionally dead) outbox rows (manage)",
        request=gs.PurgeSerializer, responses={200: gs.CountSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_MANAGE, g)
        data = validated(gs.PurgeSerializer, request.data)
        return Response({"count": outbox.outbox_purge(group=group, **data)})
