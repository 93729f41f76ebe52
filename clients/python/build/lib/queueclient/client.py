"""``Client``: the REST API of durable queues from Python (only httpx needed).

    from queueclient import Client

    with Client("https://queues.example.com", token="…") as client:
        jobs = client.queue("acme/jobs")
        jobs.enqueue({"order": 42}, priority=5)
        for message in jobs.claim(worker_id="w1", max_messages=10, wait_seconds=20):
            ...
            jobs.ack(message)

Errors are raised as the classes of ``queueclient.errors`` (``LeaseLost``,
``QueueFull``, ``NotFound``, …). Requests the server refused without acting
(429 ``throttled``, 503 ``unavailable``, a connection that could not be made)
are retried up to ``retries`` times, waiting ``Retry-After`` when the server
sends it and otherwise an exponential backoff with full jitter; anything else
is raised at once (a timed-out POST is never repeated: the server may have
acted on it).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from queueclient.errors import QueueClientError, TransportError, error_from
from queueclient.models import (
    AckEntry,
    AckResult,
    ClaimedMessage,
    Enqueued,
    Message,
    Page,
    QueueStats,
    Reservation,
)

RETRYABLE_STATUS = frozenset({429, 503})
RETRYABLE_CODES = frozenset({"throttled", "unavailable", ""})
INCARNATION_HEADER = "X-Session-Incarnation"


def backoff_delay(attempt: int, *, base: float, cap: float) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2**attempt)] (attempt from 0)."""
    return random.uniform(0, min(cap, base * 2**attempt))


def _seg(value: str) -> str:
    return quote(str(value), safe="")


def _enqueue_body(payload: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    body = {"payload": payload, **options}
    for name in ("deliver_after", "expires_at"):
        if isinstance(body.get(name), datetime):
            body[name] = body[name].isoformat()
    return body


class Client:
    """A connection to one server with one bearer token. Thread-safe (httpx's
    client is); use it as a context manager or call ``close()``."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        retries: int = 5,
        backoff_base: float = 0.2,
        backoff_max: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retries, self.backoff_base, self.backoff_max = retries, backoff_base, backoff_max
        self.timeout = timeout
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------ addressing

    def queue(self, ref: str) -> Queue:
        """The queue ``"group/queue"`` (group by slug or id)."""
        group, sep, name = ref.partition("/")
        if not (group and sep and name) or "/" in name:
            raise ValueError(f"Name a queue as 'group/queue', not {ref!r}.")
        return Queue(self, group, name)

    def app_queue(self, app: str, name: str) -> AppQueue:
        """The queue ``name`` as resolved through app ``app``'s chain."""
        return AppQueue(self, app, name)

    def session(self, session_id: str, *, incarnation: str | None = None) -> SessionQueue:
        """The queue of session ``session_id`` (``incarnation``: the session
        incarnation the caller knows; a stale one answers 409)."""
        return SessionQueue(self, session_id, incarnation)

    def groups(self) -> list[dict[str, Any]]:
        """The groups the token can read (every page)."""
        return list(self._pages("/api/groups/"))

    def create_task(self, app: str, title: str) -> dict[str, Any]:
        """A new session-queue task of app ``app``."""
        task: dict[str, Any] = self.request_json(
            "POST", f"/api/apps/{_seg(app)}/tasks/", json={"title": title}
        )
        return task

    def create_session(self, task_id: str) -> dict[str, Any]:
        """A new session of the task."""
        session: dict[str, Any] = self.request_json("POST", f"/api/tasks/{_seg(task_id)}/sessions/")
        return session

    # -------------------------------------------------------------- requests

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """One API call with the retry rule of the module docstring; raises the
        error class of a non-2xx answer."""
        for attempt in range(self.retries + 1):
            try:
                response = self._http.request(
                    method, path, json=json, params=params, headers=headers,
                    timeout=timeout if timeout is not None else self.timeout,
                )  # fmt: skip
            except httpx.ConnectError as exc:  # nothing reached the server: safe to repeat
                if attempt == self.retries:
                    raise TransportError(f"{method} {path}: {exc}") from exc
                time.sleep(backoff_delay(attempt, base=self.backoff_base, cap=self.backoff_max))
                continue
            except httpx.TransportError as exc:
                raise TransportError(f"{method} {path}: {exc}") from exc
            if response.is_success:
                return response
            error = error_from(response)
            if not self._retryable(response, error) or attempt == self.retries:
                raise error
            time.sleep(self._wait(response, attempt))
        raise AssertionError("unreachable")  # the loop returns or raises

    def request_json(self, method: str, path: str, **kwargs: Any) -> Any:
        """``request`` and the decoded JSON body (None for 204)."""
        response = self.request(method, path, **kwargs)
        return None if response.status_code == 204 or not response.content else response.json()

    def _retryable(self, response: httpx.Response, error: QueueClientError) -> bool:
        if response.status_code not in RETRYABLE_STATUS:
            return False
        # 429 queue_full is not transient unless the server says when to retry.
        return error.code in RETRYABLE_CODES or "Retry-After" in response.headers

    def _wait(self, response: httpx.Response, attempt: int) -> float:
        header = response.headers.get("Retry-After", "")
        try:
            after = float(header)
        except ValueError:
            return backoff_delay(attempt, base=self.backoff_base, cap=self.backoff_max)
        return max(0.0, after) + random.uniform(0, self.backoff_base)

    def _pages(self, path: str, params: Mapping[str, Any] | None = None) -> Iterable[Any]:
        body = self.request_json("GET", path, params=params)
        while True:
            yield from body["results"]
            if not body.get("next"):
                return
            body = self.request_json("GET", body["next"])


class Queue:
    """A group queue (``Client.queue("group/queue")``): enqueue, claim and the
    holder's operations, stats, dead messages."""

    def __init__(self, client: Client, group: str, name: str) -> None:
        self.client, self.group, self.name = client, group, name
        self.path = f"/api/groups/{_seg(group)}/queues/{_seg(name)}/"

    def __repr__(self) -> str:
        return f"Queue({self.group}/{self.name})"

    def _post(self, action: str, body: Any = None, **kwargs: Any) -> Any:
        return self.client.request_json("POST", self.path + action, json=body, **kwargs)

    def info(self) -> dict[str, Any]:
        """The collection: its settings and a nested ``stats``."""
        body: dict[str, Any] = self.client.request_json("GET", self.path)
        return body

    def enqueue(self, payload: Any, **options: Any) -> Enqueued:
        """Enqueue one message. Options as the REST enqueue: ``priority``,
        ``delay_seconds`` / ``deliver_after`` (datetime or ISO 8601),
        ``expires_in_seconds`` / ``expires_at``, ``max_attempts``,
        ``idempotency_key``. A repeated idempotency key answers the existing
        id with ``created=False``."""
        response = self.client.request("POST", self.path + "messages/",
                                       json=_enqueue_body(payload, options))  # fmt: skip
        return Enqueued(id=response.json()["id"], created=response.status_code == 201)

    def enqueue_many(self, messages: Sequence[Any]) -> list[str]:
        """Enqueue 1 to 500 messages in one request, all or nothing, in order; their
        ids. Each item is a payload, or ``Queue.message(payload, **options)``
        for one with options."""
        entries = [m if isinstance(m, _Entry) else _Entry(_enqueue_body(m, {})) for m in messages]
        body = self._post("messages/", {"messages": [e.body for e in entries]})
        return list(body["ids"])

    @staticmethod
    def message(payload: Any, **options: Any) -> _Entry:
        """One entry of ``enqueue_many`` with options."""
        return _Entry(_enqueue_body(payload, options))

    def claim(
        self,
        *,
        worker_id: str,
        max_messages: int = 1,
        visibility_timeout: int | None = None,
        wait_seconds: float = 0,
    ) -> list[ClaimedMessage]:
        """Claim up to ``max_messages`` (≤ 100), waiting up to ``wait_seconds``
        (≤ 20) for the first one (long poll)."""
        body: dict[str, Any] = {"worker_id": worker_id, "max_messages": max_messages,
                                "wait_seconds": wait_seconds}  # fmt: skip
        if visibility_timeout is not None:
            body["visibility_timeout"] = visibility_timeout
        answer = self._post("claim/", body, timeout=self.client.timeout + wait_seconds)
        return [ClaimedMessage.of(m) for m in answer["messages"]]

    def ack(self, message: ClaimedMessage) -> None:
        """Ack one held message; raises LeaseLost when it is no longer held."""
        result = self.ack_many([message])
        if not result.acked:
            raise _lease_lost(result.results[0].reason)

    def ack_many(self, messages: Iterable[ClaimedMessage]) -> AckResult:
        """Ack held messages in one request; the per-message outcomes."""
        acks = [{"id": m.id, "claim_token": m.claim_token} for m in messages]
        body = self._post("ack/", {"acks": acks})
        return AckResult(acked=body["acked"], results=[AckEntry(**r) for r in body["results"]])

    def nack(
        self, message: ClaimedMessage, *, error: str = "", delay_seconds: float | None = None
    ) -> Message:
        """Give it back for a retry (after ``delay_seconds``, or the collection's
        backoff), or dead when out of attempts."""
        body: dict[str, Any] = {**_held(message), "error": error}
        if delay_seconds is not None:
            body["delay_seconds"] = delay_seconds
        return Message.of(self._post("nack/", body))

    def fail(self, message: ClaimedMessage, *, error: str = "") -> Message:
        """Dead at once (no retry)."""
        return Message.of(self._post("fail/", {**_held(message), "error": error}))

    def extend(self, message: ClaimedMessage, *, visibility_timeout: int) -> Message:
        """Extend the lease to ``visibility_timeout`` seconds from now."""
        body = {**_held(message), "visibility_timeout": visibility_timeout}
        return Message.of(self._post("extend/", body))

    def release(self, message: ClaimedMessage) -> Message:
        """Give it back at once, its attempt not counted."""
        return Message.of(self._post("release/", _held(message)))

    def get(self, message_id: str) -> Message:
        return Message.of(
            self.client.request_json("GET", f"{self.path}messages/{_seg(message_id)}/")
        )

    def cancel(self, message_id: str) -> None:
        """Delete a live message (NotFound when none has that id)."""
        self.client.request("DELETE", f"{self.path}messages/{_seg(message_id)}/")

    def stats(self) -> QueueStats:
        return QueueStats.of(self.client.request_json("GET", self.path + "stats/"))

    def dead(self, *, page_size: int | None = None) -> Page:
        """The first page of dead messages (``Page.results``: dicts as ``get``)."""
        params = {"page_size": page_size} if page_size else None
        body = self.client.request_json("GET", self.path + "dead/", params=params)
        return Page(count=body["count"], results=body["results"], next=body.get("next"))

    def redrive(self, ids: Sequence[str] | None = None) -> int:
        """Dead messages back to ready: these ``ids``, or all when None."""
        body = {"all": True} if ids is None else {"ids": list(ids)}
        return int(self._post("redrive/", body)["count"])

    def purge(self, *, include_dead: bool = False) -> int:
        """Delete the queue's waiting messages (and the dead ones)."""
        return int(self._post("purge/", {"include_dead": include_dead})["count"])


class _Entry:
    """An ``enqueue_many`` entry with options (``Queue.message``)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body


def _held(message: ClaimedMessage) -> dict[str, str]:
    return {"id": message.id, "claim_token": message.claim_token}


def _lease_lost(reason: str | None) -> QueueClientError:
    from queueclient.errors import LeaseLost

    return LeaseLost(f"Not acked: {reason or 'lease_lost'}.", status=409, code="lease_lost")


class AppQueue:
    """A queue resolved through an app's chain (``Client.app_queue``)."""

    def __init__(self, client: Client, app: str, name: str) -> None:
        self.client = client
        self.path = f"/api/apps/{_seg(app)}/queues/{_seg(name)}/"

    def enqueue(self, payload: Any, **options: Any) -> Enqueued:
        """As ``Queue.enqueue``."""
        response = self.client.request("POST", self.path + "messages/",
                                       json=_enqueue_body(payload, options))  # fmt: skip
        return Enqueued(id=response.json()["id"], created=response.status_code == 201)

    def stats(self) -> QueueStats:
        return QueueStats.of(self.client.request_json("GET", self.path + "stats/"))


class SessionQueue:
    """A session's prompt queue (``Client.session``)."""

    def __init__(self, client: Client, session_id: str, incarnation: str | None) -> None:
        self.client = client
        self.path = f"/api/sessions/{_seg(session_id)}/queue/"
        self.headers = {INCARNATION_HEADER: incarnation} if incarnation else None

    def _call(self, method: str, action: str = "", body: Any = None) -> Any:
        return self.client.request_json(method, self.path + action, json=body, headers=self.headers)

    def status(self) -> dict[str, Any]:
        """entries, count, max, auto_run, merge_enabled, generations."""
        body: dict[str, Any] = self._call("GET")
        return body

    def enqueue(self, content: str, **fields: Any) -> dict[str, Any]:
        """Queue a prompt (``model``, ``plan_mode``, ``attachments``,
        ``metadata``, ``coalesce_key``, ``append_to_tail``, …); raises
        QueueFull at the session's cap."""
        body: dict[str, Any] = self._call("POST", "messages/", {"content": content, **fields})
        return body

    def edit(self, entry_id: str, **fields: Any) -> dict[str, Any]:
        body: dict[str, Any] = self._call("PATCH", f"messages/{_seg(entry_id)}/", fields)
        return body

    def delete(self, entry_id: str) -> None:
        self._call("DELETE", f"messages/{_seg(entry_id)}/")

    def reorder(self, ids: Sequence[str]) -> dict[str, Any]:
        body: dict[str, Any] = self._call("POST", "reorder/", {"ids": list(ids)})
        return body

    def set_auto_run(self, enabled: bool) -> dict[str, Any]:
        body: dict[str, Any] = self._call("PUT", "auto-run/", {"enabled": enabled})
        return body

    def set_auto_merge(self, enabled: bool | None) -> dict[str, Any]:
        """Merge prompts on admission (None: follow the server's setting)."""
        body: dict[str, Any] = self._call("PUT", "auto-merge/", {"enabled": enabled})
        return body

    def reserve(self) -> Reservation | None:
        """Reserve the head entry for delivery (None when the queue is empty)."""
        body = self._call("POST", "reserve/")
        return None if body is None else Reservation(body["reservation_id"], body["message"])

    def acknowledge(self, reservation: Reservation) -> None:
        """The reserved entry was delivered: it goes."""
        self._call("POST", f"reservations/{_seg(reservation.reservation_id)}/ack/")

    def release(self, reservation: Reservation) -> dict[str, Any]:
        """Not delivered: the entry is visible again at its old position."""
        body: dict[str, Any] = self._call(
            "POST", f"reservations/{_seg(reservation.reservation_id)}/release/"
        )
        return body
