"""The group-queue API (SPEC §4). Each view checks the capability, then calls
one service; errors are raised as domain errors and rendered by the one
handler in ``queueproject.exceptions``.

Not found, without probing: on queue routes an unknown group, a group the
principal cannot see, and a missing collection all answer the same 404
``collection_not_found`` (on the app routes likewise for the app); a message
of another collection is 404 ``not_found``. Capability comes before
existence: a reader acting on any collection of a group it can see gets 403.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import HttpResponse
from django.utils.decorators import method_decorator
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from groupqueues import selectors, services
from groupqueues import serializers as s
from groupqueues.exceptions import (
    CollectionNotFound,
    InvalidQueueInput,
    LeaseLost,
    MessageNotFound,
)
from groupqueues.models import Collection
from groupqueues.openapi import (
    APP_ROUTE,
    ENQUEUE_REQUEST,
    ENQUEUE_RESPONSES,
    GROUP_ROUTE,
    MESSAGE_ROUTE,
    PAGE_PARAMETERS,
    QUEUE_ROUTE,
    TAG,
    holder_schema,
    paginated,
)
from principals import services as principals
from principals.authentication import principal_of
from principals.authz import Capability, Principal, can_see_queues
from principals.exceptions import AppNotFound, GroupNotFound
from principals.models import Group
from principals.permissions import require
from queueproject import sse
from queueproject.api import validated
from queueproject.pagination import Pagination
from queueproject.schema import ERROR_RESPONSES, error

# ------------------------------------------------------------------ lookups


def group_for(request: Request, capability: Capability, g: str) -> tuple[Principal, Group]:
    """The group ``g`` (slug or id) if the principal has ``capability`` on it;
    404 not_found when it is unknown or invisible, 403 when visible only."""
    try:
        group = principals.group_get(ref=g)
        return require(request, capability, group, not_found=GroupNotFound), group
    except GroupNotFound:
        raise GroupNotFound(f"No group {g!r}.") from None


def queue_for(
    request: Request, capability: Capability, g: str, q: str
) -> tuple[Principal, Collection]:
    """The queue ``q`` of group ``g`` if the principal has ``capability`` on the
    group (403 if it can only see it); one 404 for everything it cannot see."""
    found = selectors.collection_at(group_ref=g, name=q)  # the common case: one query
    if found is not None:
        return require(request, capability, found.group, not_found=CollectionNotFound), found
    try:
        group = principals.group_get(ref=g)
        principal = require(request, capability, group, not_found=CollectionNotFound)
        collection = services.collection_get(group=group, name=q)
    except (GroupNotFound, CollectionNotFound):
        raise CollectionNotFound(f"No queue {q!r} in group {g!r}.") from None
    collection.group = group
    return principal, collection


def queue_of_app(
    request: Request, capability: Capability, app_ref: str, name: str
) -> tuple[Principal, Collection]:
    """The queue ``name`` resolved through the chain of app ``app_ref``. The app
    must be visible: an app token only sees its own app, a user the apps of
    groups whose queues it can see. Capability is checked on the owning group."""
    principal = principal_of(request)
    try:
        app = principals.app_get(ref=app_ref)
        visible = (
            app.pk == principal.app.pk
            if principal.app is not None
            else can_see_queues(principal, app.group)
        )
        if not visible:
            raise CollectionNotFound()
        collection = services.collection_resolve(app=app, name=name)
        principal = require(request, capability, collection.group, not_found=CollectionNotFound)
    except (AppNotFound, CollectionNotFound):
        raise CollectionNotFound(f"No queue {name!r} for app {app_ref!r}.") from None
    return principal, collection


def collection_body(collection: Collection) -> dict[str, Any]:
    stats = {collection.pk: services.collection_stats(collection=collection)}
    return s.CollectionSerializer(collection, context={"stats": stats}).data


def message_body(message: Any, collection: Collection) -> dict[str, Any]:
    message.collection, message.group = collection, collection.group
    return s.MessageSerializer(message).data


# -------------------------------------------------------------- collections


@GROUP_ROUTE
class GroupQueuesView(APIView):
    @extend_schema(
        tags=[TAG], summary="The group's queue collections with their stats",
        operation_id="groups_queues_list",
        parameters=PAGE_PARAMETERS,
        responses={
            200: paginated("PaginatedCollectionList", s.CollectionSerializer(many=True)),
            **ERROR_RESPONSES,
        },
    )  # fmt: skip
    def get(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_READ, g)
        paginator = Pagination()
        page = paginator.paginate_queryset(selectors.collections_of(group=group), request, self)
        stats = selectors.collections_stats(collections=page)
        body = s.CollectionSerializer(page, many=True, context={"stats": stats}).data
        return paginator.get_paginated_response(body)

    @extend_schema(
        tags=[TAG], summary="Create a queue collection (manage)",
        request=s.CollectionCreateSerializer,
        responses={201: s.CollectionSerializer, 409: error("already_exists"), **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str) -> Response:
        _, group = group_for(request, Capability.QUEUE_MANAGE, g)
        data = validated(s.CollectionCreateSerializer, request.data)
        collection = services.collection_create(group=group, **data)
        return Response(collection_body(collection), status=status.HTTP_201_CREATED)


@QUEUE_ROUTE
class QueueView(APIView):
    @extend_schema(
        tags=[TAG], summary="Collection settings and stats",
        responses={200: s.CollectionSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_READ, g, q)
        return Response(collection_body(collection))

    @extend_schema(
        tags=[TAG], summary="Change settings, pause or resume (manage)",
        request=s.CollectionSettingsSerializer,
        responses={200: s.CollectionSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def patch(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_MANAGE, g, q)
        data = validated(s.CollectionSettingsSerializer, request.data)
        collection = services.collection_update(collection=collection, **data)
        return Response(collection_body(collection))


@QUEUE_ROUTE
class StatsView(APIView):
    @extend_schema(
        tags=[TAG], summary="Depths of the queue",
        responses={200: s.QueueStatsSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_READ, g, q)
        return Response(s.QueueStatsSerializer.of(services.collection_stats(collection=collection)))


# ------------------------------------------------------------------ enqueue


def enqueue(request: Request, principal: Principal, collection: Collection) -> Response:
    """Enqueue one message (``payload``) or a batch (``messages``)."""
    data = request.data
    if isinstance(data, dict) and "messages" in data and "payload" in data:
        raise InvalidQueueInput.field("messages", 'Give "payload" (one) or "messages" (a batch).')
    if isinstance(data, dict) and "messages" in data:
        entries = validated(s.EnqueueBatchSerializer, request.data)["messages"]
        results = services.message_enqueue_batch(
            collection=collection, messages=entries, enqueued_by=principal.label
        )
        created = any(r.created for r in results)
        body: dict[str, Any] = {"ids": [str(r.id) for r in results]}
    else:
        fields = validated(s.EnqueueSerializer, request.data)
        result = services.message_enqueue(
            collection=collection, enqueued_by=principal.label, **fields
        )
        created, body = result.created, {"id": str(result.id)}
    return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


@QUEUE_ROUTE
class MessagesView(APIView):
    @extend_schema(
        tags=[TAG], summary="Enqueue one message or a batch of up to 500",
        request=ENQUEUE_REQUEST, responses=ENQUEUE_RESPONSES,
    )  # fmt: skip
    def post(self, request: Request, g: str, q: str) -> Response:
        principal, collection = queue_for(request, Capability.QUEUE_ENQUEUE, g, q)
        return enqueue(request, principal, collection)


@MESSAGE_ROUTE
class MessageView(APIView):
    @extend_schema(
        tags=[TAG], summary="A message (dead ones included)",
        responses={200: s.MessageSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, g: str, q: str, id: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_READ, g, q)
        message = services.message_get(collection=collection, id=id)
        return Response(message_body(message, collection))

    @extend_schema(
        tags=[TAG], summary="Cancel a ready or claimed message (consume)",
        responses={204: None, **ERROR_RESPONSES},
    )  # fmt: skip
    def delete(self, request: Request, g: str, q: str, id: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_CONSUME, g, q)
        if not services.message_cancel(collection=collection, id=id):
            raise MessageNotFound()
        return Response(status=status.HTTP_204_NO_CONTENT)


# -------------------------------------------------------------------- claim


@QUEUE_ROUTE
@method_decorator(transaction.non_atomic_requests, name="dispatch")
class ClaimView(APIView):
    @extend_schema(
        tags=[TAG], summary="Claim up to max_messages messages (long poll with wait_seconds)",
        request=s.ClaimSerializer, responses={200: s.ClaimedSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, q: str) -> HttpResponse:
        """Claims now; with ``wait_seconds`` and nothing claimable, the
        waiting is done by ``claim`` below, on the event loop."""
        _, collection = queue_for(request, Capability.QUEUE_CONSUME, g, q)
        data = validated(s.ClaimSerializer, request.data)

        def attempt(cursor: None = None) -> tuple[list[services.ClaimedMessage], None]:
            return services.message_claim(
                collection=collection, worker_id=data["worker_id"], n=data["max_messages"],
                visibility_timeout=data.get("visibility_timeout"),
            ), None  # fmt: skip

        claimed, _ = attempt()
        if claimed or data["wait_seconds"] <= 0 or data["max_messages"] <= 0:
            return Response(s.ClaimedSerializer.of(claimed))
        return sse.Planned(sse.Wait(
            fetch=attempt, start=lambda: None, wake=collection.wake_channel,
            timeout=data["wait_seconds"],
            respond=lambda found, _: s.ClaimedSerializer.of(list(found)),
        ))  # fmt: skip


claim = sse.waiting_view(ClaimView)


@QUEUE_ROUTE
class AckView(APIView):
    @extend_schema(
        tags=[TAG], summary="Ack claimed messages; each entry says whether it landed",
        request=s.AckSerializer, responses={200: s.AckedSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_CONSUME, g, q)
        acks = validated(s.AckSerializer, request.data)["acks"]
        result = services.message_ack_batch(collection=collection, acks=acks)
        return Response(s.AckedSerializer.of(result))


@QUEUE_ROUTE
class HolderActionView(APIView):
    """nack / fail / extend / release: the message as ``get`` shows it, 409
    lease_lost when the claim is no longer held (also once the message was
    acked or cancelled: its holder learns it lost the claim), 404 when the id
    names a message of another collection."""

    serializer_class: type[s.HeldSerializer] = s.HeldSerializer

    def act(self, collection: Collection, data: dict[str, Any]) -> Any:
        raise NotImplementedError

    def post(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_CONSUME, g, q)
        data = validated(self.serializer_class, request.data)
        try:
            message = self.act(collection, data)
        except LeaseLost:
            if selectors.message_elsewhere(collection=collection, id=data["id"]):
                raise MessageNotFound() from None
            raise
        return Response(message_body(message, collection))


@method_decorator(holder_schema("Give a claim back for a retry", s.NackSerializer), "post")
class NackView(HolderActionView):
    serializer_class = s.NackSerializer

    def act(self, collection: Collection, data: dict[str, Any]) -> Any:
        return services.message_nack(collection=collection, **data)


@method_decorator(holder_schema("Kill a claimed message (dead: failed)", s.FailSerializer), "post")
class FailView(HolderActionView):
    serializer_class = s.FailSerializer

    def act(self, collection: Collection, data: dict[str, Any]) -> Any:
        return services.message_fail(
            collection=collection, id=data["id"], claim_token=data["claim_token"],
            error=data.get("error"),
        )  # fmt: skip


@method_decorator(holder_schema("Extend a lease (heartbeat)", s.ExtendSerializer), "post")
class ExtendView(HolderActionView):
    serializer_class = s.ExtendSerializer

    def act(self, collection: Collection, data: dict[str, Any]) -> Any:
        return services.message_extend(collection=collection, **data)


@method_decorator(holder_schema("Give a claim back uncounted", s.HeldSerializer), "post")
class ReleaseView(HolderActionView):
    def act(self, collection: Collection, data: dict[str, Any]) -> Any:
        return services.message_release(collection=collection, **data)


# ------------------------------------------------------------ dead and manage


@QUEUE_ROUTE
class DeadView(APIView):
    @extend_schema(
        tags=[TAG], summary="Dead messages, most recent first",
        operation_id="groups_queues_dead_list",
        parameters=PAGE_PARAMETERS,
        responses={
            200: paginated("PaginatedMessageList", s.MessageSerializer(many=True)),
            **ERROR_RESPONSES,
        },
    )  # fmt: skip
    def get(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_READ, g, q)
        paginator = Pagination()
        page = paginator.paginate_queryset(
            selectors.messages_dead(collection=collection), request, self
        )
        body = [message_body(m, collection) for m in page]
        return paginator.get_paginated_response(body)


BLOCKED_PARAMETER = OpenApiParameter(
    "blocked", {"type": "string", "enum": ["true", "false"]}, OpenApiParameter.QUERY,
    description="true: only keys whose head holds the rest back; false: only the others.",
)  # fmt: skip


def _blocked_filter(request: Request) -> bool | None:
    """The ``blocked`` query parameter (400 ``invalid`` naming it if not
    "true" or "false")."""
    value = request.query_params.get("blocked")
    if value is None:
        return None
    if value not in ("true", "false"):
        raise InvalidQueueInput.field("blocked", 'Must be "true" or "false".')
    return value == "true"


@QUEUE_ROUTE
class KeysView(APIView):
    @extend_schema(
        tags=[TAG], summary="Ordering keys with live messages, and their heads",
        operation_id="groups_queues_keys_list",
        parameters=[BLOCKED_PARAMETER, *PAGE_PARAMETERS],
        responses={
            200: paginated("PaginatedOrderingKeyList", s.OrderingKeySerializer(many=True)),
            **ERROR_RESPONSES,
        },
    )  # fmt: skip
    def get(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_READ, g, q)
        blocked = _blocked_filter(request)
        paginator = Pagination()
        heads = selectors.ordering_key_heads(collection=collection, blocked=blocked)
        # rows annotated with ``blocked`` and ``waiting`` (selectors.ordering_key_heads)
        page: list[Any] = paginator.paginate_queryset(heads, request, self) or []
        body = [
            {"ordering_key": h.ordering_key, "blocked": h.blocked, "waiting": h.waiting,
             "head": message_body(h, collection)}
            for h in page
        ]  # fmt: skip
        return paginator.get_paginated_response(body)


@QUEUE_ROUTE
class RedriveView(APIView):
    @extend_schema(
        tags=[TAG], summary="Dead messages back to ready (manage)",
        request=s.RedriveSerializer, responses={200: s.CountSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_MANAGE, g, q)
        data = validated(s.RedriveSerializer, request.data)
        count = services.messages_redrive(
            collection=collection, ids=data.get("ids"), all=data["all"], where=data.get("filter")
        )
        return Response({"count": count})


@QUEUE_ROUTE
class PurgeView(APIView):
    @extend_schema(
        tags=[TAG], summary="Delete ready (and dead) messages, or dead ones by filter (manage)",
        request=s.PurgeSerializer, responses={200: s.CountSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def post(self, request: Request, g: str, q: str) -> Response:
        _, collection = queue_for(request, Capability.QUEUE_MANAGE, g, q)
        data = validated(s.PurgeSerializer, request.data)
        if "filter" in data:
            count = services.messages_purge_dead(collection=collection, where=data["filter"])
        else:
            count = services.collection_purge(collection=collection, **data)
        return Response({"count": count})


# --------------------------------------------------------- through an app


@APP_ROUTE
class AppMessagesView(APIView):
    @extend_schema(
        tags=[TAG], summary="Enqueue into the queue the app's chain resolves",
        request=ENQUEUE_REQUEST, responses=ENQUEUE_RESPONSES,
    )  # fmt: skip
    def post(self, request: Request, app: str, name: str) -> Response:
        principal, collection = queue_of_app(request, Capability.QUEUE_ENQUEUE, app, name)
        return enqueue(request, principal, collection)


@APP_ROUTE
class AppStatsView(APIView):
    @extend_schema(
        tags=[TAG], summary="Depths of the queue the app's chain resolves",
        responses={200: s.QueueStatsSerializer, **ERROR_RESPONSES},
    )  # fmt: skip
    def get(self, request: Request, app: str, name: str) -> Response:
        _, collection = queue_of_app(request, Capability.QUEUE_READ, app, name)
        return Response(s.QueueStatsSerializer.of(services.collection_stats(collection=collection)))
