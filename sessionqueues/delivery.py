"""Deliverers: where the dispatcher hands a session's head entry to its agent.

A deliverer is a callable registered under a name with :func:`deliverer`::

    @deliverer("my-runtime")
    def send(delivery: Delivery) -> bool | None:
        ...

Return True when the agent can take another entry right away (the session
stays ready); anything else marks the agent busy until it reports ready again.
Raise :class:`DeliveryFailed` (or any exception) when the agent did not get the
entry: it goes back to its position. Raise :class:`DeliveryUncertain`
when it may have got it: the entry is dropped (at most once).

Deliverers live in the shared :class:`~queueproject.registry.Registry`
``DELIVERERS`` (one name, one callable); the ``deliverers`` module of every
installed app is imported on first lookup, so registering is a matter of
defining them there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queueproject.registry import Registry, UnknownName
from sessionqueues import exceptions as err


@dataclass(frozen=True)
class Delivery:
    """One reserved entry on its way to the agent of a session. The payload keeps
    the wire names of the webhook contract (``session.prompt``, ``message``)."""

    session_id: str
    task_id: str
    app: str
    incarnation_id: str
    reservation_id: str
    entry: dict[str, Any]

    def as_payload(self) -> dict[str, Any]:
        return {
            "event": "session.prompt",
            "session_id": self.session_id,
            "task_id": self.task_id,
            "app": self.app,
            "incarnation_id": self.incarnation_id,
            "reservation_id": self.reservation_id,
            "message": self.entry,
        }


class DeliveryFailed(Exception):
    """The agent did not get the entry; it may be offered again."""


class DeliveryUncertain(DeliveryFailed):
    """The agent may have got the entry; it must not be offered again."""


Deliverer = Callable[[Delivery], Any]

DELIVERERS: Registry[Deliverer] = Registry("deliverer", "deliverers")

#: ``@deliverer("name")`` registers a deliverer (see the module docstring).
deliverer = DELIVERERS.register


def get_deliverer(name: str) -> Deliverer:
    """The deliverer registered as ``name`` (raises InvalidSessionInput)."""
    try:
        return DELIVERERS.get(name)
    except UnknownName as exc:
        known = ", ".join(DELIVERERS.names()) or "none"
        raise err.InvalidSessionInput(f"Unknown deliverer {name!r}; registered: {known}.") from exc
