"""The in-process queue handle of application code (the seed's
``queue::shared_collection("name")``): resolve a shared queue through an app's
chain, then enqueue and read its depth, every call asking the one capability
function (``principals.authz.has_capability``) and failing closed.

    from groupqueues.handle import shared_collection

    jobs = shared_collection("jobs", app=shop)                 # app code (script:write)
    jobs = shared_collection("jobs", principal=principal_of(request))  # a view, as its caller
    jobs.enqueue({"order": 42}, priority=5, delay_seconds=30)
    jobs.depth(), jobs.depth_pending(), jobs.stats()

The handle holds no connection and no transaction: each call is the service
call it wraps (``message_enqueue`` and friends: their own transaction, their
errors — QueueFull, MessageTooLarge, InvalidQueueInput — unchanged).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from groupqueues import exceptions as err
from groupqueues import selectors, services
from groupqueues.models import Collection
from groupqueues.services.types import EnqueueResult, NewMessage
from principals.authz import Capability, Principal, has_capability
from principals.models import App, Scope


def app_principal(app: App) -> Principal:
    """Code running as ``app`` inside the project (the seed's scripts): an app
    principal with the ``script:write`` scope, which lets it enqueue into the
    queues of its chain and nothing else."""
    return Principal(app=app, scopes=frozenset({str(Scope.SCRIPT_WRITE)}))


def shared_collection(
    name: str, *, app: App | None = None, principal: Principal | None = None
) -> QueueHandle:
    """The handle of queue ``name`` as resolved for an app: the nearest group of
    the app's chain (its group, then the ancestors) declaring a ``queue``
    collection of that name.

    ``app`` alone acts as that app (``app_principal``). ``principal`` alone
    must be an app principal (an app token's): its app is resolved. Both:
    ``principal`` acts and ``app``'s chain is resolved (a user acting for an
    app; an app principal may only name its own app). Raises
    CollectionNotFound when nothing resolves, QueuePermissionDenied when the
    principal may neither enqueue into nor read the resolved queue (also for an
    anonymous principal: fails closed)."""
    if principal is None:
        if app is None:
            raise TypeError("shared_collection() needs app=… or principal=…")
        principal = app_principal(app)
    if app is None:
        app = principal.app
    if app is None:
        raise err.QueuePermissionDenied("A user principal must name the app to resolve from.")
    if principal.app is not None and principal.app.pk != app.pk:
        raise err.QueuePermissionDenied(f"App {principal.app.slug!r} may not act for {app.slug!r}.")
    collection = selectors.collection_resolve(app=app, name=name)
    handle = QueueHandle(collection=collection, principal=principal)
    if not (handle.may(Capability.QUEUE_ENQUEUE) or handle.may(Capability.QUEUE_READ)):
        raise err.QueuePermissionDenied(f"{principal.label} may not use queue {name!r}.")
    return handle


@dataclass(frozen=True)
class QueueHandle:
    """One resolved queue and who acts on it. Every method checks the
    capability it needs at call time (a role or token revoked meanwhile is
    seen by the next call)."""

    collection: Collection
    principal: Principal

    @property
    def name(self) -> str:
        return self.collection.name

    def may(self, capability: Capability) -> bool:
        return has_capability(self.principal, capability, self.collection.group)

    def enqueue(self, payload: Any, **options: Any) -> EnqueueResult:
        """Enqueue one message; ``options`` are ``message_enqueue``'s
        (priority, delay_seconds, deliver_after, expires_in_seconds,
        expires_at, max_attempts, idempotency_key, …). Needs QUEUE_ENQUEUE."""
        self._require(Capability.QUEUE_ENQUEUE, "enqueue into")
        return services.message_enqueue(
            collection=self.collection,
            payload=payload,
            enqueued_by=self.principal.label,
            **options,
        )

    def enqueue_many(self, messages: Iterable[Any]) -> list[EnqueueResult]:
        """Enqueue 1 to 500 messages in one transaction, all or nothing, in
        order: each a payload or a ``NewMessage`` (a payload with options).
        Needs QUEUE_ENQUEUE."""
        self._require(Capability.QUEUE_ENQUEUE, "enqueue into")
        news = [m if isinstance(m, NewMessage) else NewMessage(payload=m) for m in messages]
        return services.message_enqueue_batch(
            collection=self.collection, messages=news, enqueued_by=self.principal.label
        )

    def depth(self) -> int:
        """Live messages (ready + claimed). Needs QUEUE_READ or QUEUE_ENQUEUE."""
        self._require_read()
        return selectors.collection_depth(collection=self.collection)

    def depth_pending(self) -> int:
        """Ready messages due now and not expired. Needs QUEUE_READ or QUEUE_ENQUEUE."""
        self._require_read()
        return selectors.collection_depth_pending(collection=self.collection)

    def stats(self) -> selectors.QueueStats:
        """The collection's stats (SPEC §4). Needs QUEUE_READ or QUEUE_ENQUEUE."""
        self._require_read()
        return selectors.collection_stats(collection=self.collection)

    def _require(self, capability: Capability, verb: str) -> None:
        if not self.may(capability):
            raise err.QueuePermissionDenied(
                f"{self.principal.label} may not {verb} queue {self.collection.name!r}."
            )

    def _require_read(self) -> None:
        # Whoever may enqueue may see how full the queue is (the seed's handle
        # offers depth() to the same scripts that enqueue).
        if not (self.may(Capability.QUEUE_READ) or self.may(Capability.QUEUE_ENQUEUE)):
            self._require(Capability.QUEUE_READ, "read")
