"""Deliverers: where the dispatcher hands a session's head prompt to its agent.

A deliverer is a callable registered under a name with :func:`deliverer`::

    @deliverer("my-runtime")
    def send(delivery: Delivery) -> bool | None:
        ...

Return True when the agent can take another prompt right away (the session
stays ready); anything else marks the agent busy until it reports ready again.
Raise :class:`DeliveryFailed` (or any exception) when the agent did not get the
prompt: the entry goes back to its position. Raise :class:`DeliveryUncertain`
when it may have got it: the entry is dropped (at most once).

Modules named ``deliverers`` in installed apps are imported by
:func:`autodiscover`, so registering is a matter of defining them there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import autodiscover_modules

from sessionqueues import exceptions as err


@dataclass(frozen=True)
class Delivery:
    """One reserved prompt on its way to the agent of a session."""

    session_id: str
    task_id: str
    app: str
    incarnation_id: str
    reservation_id: str
    message: dict[str, Any]

    def as_payload(self) -> dict[str, Any]:
        return {
            "event": "session.prompt",
            "session_id": self.session_id,
            "task_id": self.task_id,
            "app": self.app,
            "incarnation_id": self.incarnation_id,
            "reservation_id": self.reservation_id,
            "message": self.message,
        }


class DeliveryFailed(Exception):
    """The agent did not get the prompt; it may be offered again."""


class DeliveryUncertain(DeliveryFailed):
    """The agent may have got the prompt; it must not be offered again."""


Deliverer = Callable[[Delivery], Any]
_registry: dict[str, Deliverer] = {}


def deliverer(name: str) -> Callable[[Deliverer], Deliverer]:
    """Register the decorated callable under ``name`` (a later one replaces it)."""

    def register(func: Deliverer) -> Deliverer:
        _registry[name] = func
        return func

    return register


def autodiscover() -> None:
    """Import every installed app's ``deliverers`` module (idempotent)."""
    autodiscover_modules("deliverers")


def get_deliverer(name: str) -> Deliverer:
    """The deliverer registered as ``name`` (raises InvalidSessionInput)."""
    autodiscover()
    try:
        return _registry[name]
    except KeyError as exc:
        known = ", ".join(sorted(_registry)) or "none"
        raise err.InvalidSessionInput(f"Unknown deliverer {name!r}; registered: {known}.") from exc


def registered() -> list[str]:
    autodiscover()
    return sorted(_registry)
