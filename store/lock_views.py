"""The lock API (SPEC §6): ``/api/groups/{g}/locks/{name}/``. Every call,
reads included, needs the consume capability on the group (editors and up,
app tokens with ``queue:consume``): a lock's holder is part of the work it
guards. A group the principal cannot see is 404 ``not_found``; one it can only
read is 403. A free lock reads as 200 with ``owner: null``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues.views import group_for
from principals.authz import Capability
from queueproject.api import validated
from queueproject.schema import ERROR_RESPONSES, error
from store import lock_serializers as s
from store import locks
from store.locks import OWNER_MAX, HeldLock, LockState

TAG = "locks"
USE = Capability.QUEUE_CONSUME
LOCK_ROUTE = extend_schema(parameters=[
    OpenApiParameter("g", str, OpenApiParameter.PATH, description="Group slug or id."),
    OpenApiParameter("name", str, OpenApiParameter.PATH,
                     description="Lock name: 1-64 letters, digits, dots, underscores, hyphens."),
])  # fmt: skip
HELD = {409: error("lock_held: another owner holds it (details: owner, expires_at)")}
LOST = {409: error("lock_lost: this owner does not hold it (expired, released, taken over)")}


def body(state: HeldLock | LockState) -> dict[str, object]:
    return s.LockSerializer(state).data


@LOCK_ROUTE
class LockView(APIView):
    @extend_schema(
        tags=[TAG], summary="Holder, expiry and last fencing token of a lock",
        responses={200: s.LockSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str, name: str) -> Response:
        _, group = group_for(request, USE, g)
        return Response(body(locks.lock_get(group=group, name=name)))

    @extend_schema(
        tags=[TAG], summary="Acquire a free or expired lock (its holder: unchanged, not extended)",
        request=s.LockTakeSerializer, responses={200: s.LockSerializer, **ERROR_RESPONSES, **HELD},
    )  # fmt: skip
    def put(self, request: Request, g: str, name: str) -> Response:
        _, group = group_for(request, USE, g)
        data = validated(s.LockTakeSerializer, request.data)
        state = locks.lock_acquire(
            group=group, name=name, owner=data["owner"], ttl=data["ttl_seconds"]
        )
        return Response(body(state))

    @extend_schema(
        tags=[TAG], summary="Release a lock (its owner only)", request=None,
        parameters=[OpenApiParameter(
            "owner", {"type": "string", "minLength": 1, "maxLength": OWNER_MAX},
            OpenApiParameter.QUERY, required=True, description="The owner that holds the lock.",
        )],
        responses={204: None, **ERROR_RESPONSES, **LOST},
    )  # fmt: skip
    def delete(self, request: Request, g: str, name: str) -> Response:
        _, group = group_for(request, USE, g)
        data = validated(s.LockOwnerSerializer, request.query_params.dict())
        locks.lock_release(group=group, name=name, owner=data["owner"])
        return Response(status=status.HTTP_204_NO_CONTENT)


@LOCK_ROUTE
class LockRenewView(APIView):
    @extend_schema(
        tags=[TAG], summary="Extend a lock to now + ttl_seconds (its owner only; token kept)",
        request=s.LockTakeSerializer, responses={200: s.LockSerializer, **ERROR_RESPONSES, **LOST},
    )  # fmt: skip
    def post(self, request: Request, g: str, name: str) -> Response:
        _, group = group_for(request, USE, g)
        data = validated(s.LockTakeSerializer, request.data)
        state = locks.lock_renew(
            group=group, name=name, owner=data["owner"], ttl=data["ttl_seconds"]
        )
        return Response(body(state))
