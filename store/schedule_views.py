"""The schedule API (SPEC §6) under ``/api/groups/{g}/schedules/``. Reads
need queue read on the group, writes queue manage; an unknown or invisible
group answers 404 like the queue routes, a missing schedule 404
``schedule_not_found``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues.openapi import GROUP_ROUTE, PAGE_PARAMETERS, paginated
from groupqueues.views import group_for
from principals.authz import Capability
from queueproject.api import validated
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES, error
from store import schedule_serializers as s
from store import schedules
from store.models import Schedule

TAG = "schedules"
SCHEDULE_ROUTE = extend_schema(parameters=[
    OpenApiParameter("g", str, OpenApiParameter.PATH, description="Group slug or id."),
    OpenApiParameter("name", str, OpenApiParameter.PATH, description="Schedule name."),
])  # fmt: skip
RESPONSES = {200: s.ScheduleSerializer, 404: error("not_found / schedule_not_found"),
             **{k: v for k, v in ERROR_RESPONSES.items() if k != 404}}  # fmt: skip


def schedule_for(request: Request, capability: Capability, g: str, name: str) -> Schedule:
    _, group = group_for(request, capability, g)
    return schedules.schedule_get(group=group, name=name)


def body(schedule: Schedule) -> dict[str, Any]:
    return s.ScheduleSerializer(schedule).data


@GROUP_ROUTE
class SchedulesView(APIView):
    @extend_schema(
        tags=[TAG], summary="The group's schedules", operation_id="groups_schedules_list",
        parameters=PAGE_PARAMETERS,
        responses={200: paginated("PaginatedScheduleList", s.ScheduleSerializer(many=True)),
                   **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_READ, g)
        paginator = Pagination()
        page = paginator.paginate_queryset(schedules.schedules_of(group=group), request, self)
        return paginator.get_paginated_response(s.ScheduleSerializer(page, many=True).data)

    @extend_schema(
        tags=[TAG], summary="Create a schedule (manage)", request=s.ScheduleCreateSerializer,
        responses={201: s.ScheduleSerializer, 409: error("already_exists"), **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_MANAGE, g)
        data = dict(validated(s.ScheduleCreateSerializer, request.data))
        schedule = schedules.schedule_create(group=group, name=data.pop("name"), **data)
        return Response(body(schedule), status=status.HTTP_201_CREATED)


@SCHEDULE_ROUTE
class ScheduleView(APIView):
    @extend_schema(tags=[TAG], summary="A schedule with its next boundaries", responses=RESPONSES)
    def get(self, request: Request, g: str, name: str) -> Response:
        return Response(body(schedule_for(request, Capability.QUEUE_READ, g, name)))

    @extend_schema(
        tags=[TAG], summary="Change a schedule (manage)", request=s.ScheduleChangeSerializer,
        responses=RESPONSES,
    )  # fmt: skip
    def patch(self, request: Request, g: str, name: str) -> Response:
        schedule = schedule_for(request, Capability.QUEUE_MANAGE, g, name)
        data = validated(s.ScheduleChangeSerializer, request.data)
        return Response(body(schedules.schedule_update(schedule=schedule, **data)))

    @extend_schema(tags=[TAG], summary="Delete a schedule (manage)",
                   responses={204: None, **RESPONSES})  # fmt: skip
    def delete(self, request: Request, g: str, name: str) -> Response:
        schedules.schedule_delete(schedule=schedule_for(request, Capability.QUEUE_MANAGE, g, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


@SCHEDULE_ROUTE
class PauseView(APIView):
    @extend_schema(tags=[TAG], summary="Pause (manage)", request=None, responses=RESPONSES)
    def post(self, request: Request, g: str, name: str) -> Response:
        schedule = schedule_for(request, Capability.QUEUE_MANAGE, g, name)
        return Response(body(schedules.schedule_pause(schedule=schedule)))


@SCHEDULE_ROUTE
class ResumeView(APIView):
    @extend_schema(tags=[TAG], summary="Resume from the next boundary (manage)", request=None,
                   responses=RESPONSES)  # fmt: skip
    def post(self, request: Request, g: str, name: str) -> Response:
        schedule = schedule_for(request, Capability.QUEUE_MANAGE, g, name)
        return Response(body(schedules.schedule_resume(schedule=schedule)))


@SCHEDULE_ROUTE
class RunNowView(APIView):
    @extend_schema(
        tags=[TAG], summary="Enqueue one message now; the cursor does not move (manage)",
        request=None, responses={201: s.RunNowSerializer, **RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, name: str) -> Response:
        schedule = schedule_for(request, Capability.QUEUE_MANAGE, g, name)
        result = schedules.schedule_run_now(schedule=schedule)
        return Response({"id": str(result.id)}, status=status.HTTP_201_CREATED)
