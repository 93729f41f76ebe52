"""Serving waiting clients: Server-Sent Events framing and async wait loops.

Shared by every endpoint that holds a connection open until something happens
(notify channels, stream subscriptions, long-polls). The API runs under ASGI
(``uvicorn queueproject.asgi:application``); a waiting endpoint is an async
view that awaits here, so it holds neither a thread nor a database connection
while it waits:

* database work runs through :func:`run_sync`, on this module's bounded thread
  pool (``SSE_DB_THREADS``, default 8): a thousand listeners share those
  threads, which borrow from the web process's connection pool per call
  (without a pool: one connection kept per thread);
* wake-ups come from :mod:`queueproject.notify` (PostgreSQL LISTEN/NOTIFY, one
  LISTEN connection per process) bridged onto the event loop by
  :class:`Wakeup`; where LISTEN is unavailable (SQLite, poolers) the waiter
  re-checks every poll interval.

The contract a feature supplies is a *fetch*: a sync function ``fetch(cursor)
-> (items, new_cursor)`` returning what came after ``cursor`` (empty when
nothing did). A wake-up only says "look now", so the loops always re-fetch
after one, and never sleep longer than the poll interval.

Framing (https://html.spec.whatwg.org/multipage/server-sent-events.html):
:func:`format_event` writes ``id:``, ``event:``, ``data:`` lines (one
``data:`` line per line of the payload) and a blank line; :func:`comment`
writes a ``:`` line (keep-alive); :func:`retry` the reconnection delay. A
client that reconnects sends the last id it saw in the ``Last-Event-ID``
header; :func:`last_event_id` reads it (or the ``last_event_id`` query
parameter, for clients that cannot set headers), :func:`parse_cursor` turns
it into a non-negative integer cursor.

API (stable; other features build on it):

``format_event(data, *, id=None, event=None) -> bytes``
``format_json_event(obj, *, id=None, event=None) -> bytes``
``comment(text="") -> bytes``, ``retry(ms) -> bytes``
``last_event_id(request) -> str | None``, ``parse_cursor(value) -> int | None``
``run_sync(fn, *args, **kwargs) -> Awaitable``, ``release_request_thread()``
``Wakeup(channel_name)``: ``async with``; ``await wakeup.wait(timeout) -> bool``
``wake_local(channel_name)``: wake this process's waiters (call after commit)
``event_stream(*, fetch, start, wake, render, max_seconds=None, first=b"", share=None)
-> AsyncIterator[bytes]``
``long_poll(*, fetch, start, wake, timeout, share=None) -> (items, cursor)``
``streaming_response(stream) -> StreamingHttpResponse``
``Planned(plan)``, ``waiting(view_class, finish)``, ``finished(planned)``,
``DEFER_WAITS``: a waiting endpoint, its sync first step and its async finish;
``Wait(...)``, ``waiting_view(view_class)``: a JSON endpoint that long-polls
(see "waiting endpoints" below)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from django.conf import settings as dj
from django.db import connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from queueproject import notify
from queueproject.conf import product_settings
from queueproject.exceptions import DomainError, api_exception_handler

P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C")
E = TypeVar("E")

CONTENT_TYPE = "text/event-stream"
KEEPALIVE_SECONDS = 15.0  # below the idle timeout of common proxies (30-60 s)
MAX_STREAM_SECONDS = 300.0  # then the stream ends and the client resumes by Last-Event-ID
RETRY_MS = 1000
LAST_EVENT_ID_MAX = 64
CURSOR_MAX = 2**63 - 1
DB_THREADS = 8  # SSE_DB_THREADS: database threads (and connections) per process

# --- framing --------------------------------------------------------------------


def format_event(data: str, *, id: str | int | None = None, event: str | None = None) -> bytes:
    """One SSE event. ``data`` may span lines (each becomes a ``data:`` line);
    ``id`` and ``event`` must be single-line (ValueError otherwise)."""
    lines: list[str] = []
    if id is not None:
        lines.append(f"id: {_one_line(str(id), 'id')}")
    if event is not None:
        lines.append(f"event: {_one_line(event, 'event')}")
    lines.extend(f"data: {line}" for line in data.replace("\r\n", "\n").split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def format_json_event(obj: Any, *, id: str | int | None = None, event: str | None = None) -> bytes:
    """An SSE event whose data is ``obj`` as compact JSON (always one line)."""
    return format_event(json.dumps(obj, separators=(",", ":"), default=str), id=id, event=event)


def comment(text: str = "") -> bytes:
    """An SSE comment line (clients ignore it): the keep-alive that stops
    proxies from closing an idle stream."""
    return f": {_one_line(text, 'comment')}\n\n".encode() if text else b":\n\n"


def retry(ms: int) -> bytes:
    """Tell the client how long to wait before reconnecting."""
    return f"retry: {int(ms)}\n\n".encode()


def _one_line(value: str, what: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError(f"An SSE {what} cannot contain a line break.")
    return value


# --- resuming ------------------------------------------------------------------


def last_event_id(request: HttpRequest) -> str | None:
    """The id a reconnecting client saw last: the ``Last-Event-ID`` header, else
    the ``last_event_id`` query parameter; None when neither is given (or empty)."""
    value = request.headers.get("Last-Event-ID") or request.GET.get("last_event_id")
    return value.strip() or None if value else None


def parse_cursor(value: str | None) -> int | None:
    """``value`` as a non-negative integer cursor; None when absent. Raises
    ValueError for anything else (the view answers 400 naming the field)."""
    if value is None:
        return None
    text = value.strip()
    if len(text) > LAST_EVENT_ID_MAX or not text.isascii() or not text.isdigit():
        raise ValueError("Use a non-negative integer event id.")
    cursor = int(text)
    if cursor > CURSOR_MAX:
        raise ValueError("Use a non-negative integer event id.")
    return cursor


# --- database work off the event loop ----------------------------------------------

_pool_guard = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_guard:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_pool_size(), thread_name_prefix="dq-sse-db")
        return _pool


def _pool_size() -> int:
    return max(0, int(getattr(dj, "SSE_DB_THREADS", DB_THREADS)))


def _with_connection_hygiene(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    # These threads live outside Django's request cycle. A pooled connection
    # (the web process's pool, settings.py) goes back to the pool after each
    # call, so these threads never sit on connections the requests need.
    # Without a pool their connections stay open across calls
    # (SSE_DB_THREADS per process at most: reconnecting per fetch would cost
    # more than the fetch); one that broke is dropped, as
    # close_old_connections would at the next request.
    try:
        return fn(*args, **kwargs)
    finally:
        for conn in connections.all(initialized_only=True):
            if getattr(conn, "pool", None) is not None:
                conn.close()
            elif conn.errors_occurred:
                if conn.is_usable():
                    conn.errors_occurred = False
                else:
                    conn.close()


async def run_sync(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run the sync ``fn`` (database work) on the shared bounded pool and await it.

    ``SSE_DB_THREADS = 0`` runs it with asgiref's thread-sensitive
    ``sync_to_async`` instead: under the sync test client that is the test's
    own thread, whose connection holds the test transaction (the test
    settings use it; production never should: under ASGI it is a thread per
    request)."""
    if _pool_size() == 0:
        return await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
    loop = asyncio.get_running_loop()
    call = functools.partial(_with_connection_hygiene, fn, *args, **kwargs)
    return await loop.run_in_executor(_executor(), call)


def release_request_thread() -> None:
    """Let the idle per-request thread go while this request waits.

    Django's sync middleware runs each request's sync steps on one thread of
    the request's asgiref ``ThreadSensitiveContext``, kept until the response
    ends: for a stream, until the client leaves. Shut that executor down now
    (it is idle: the middleware has run); a later thread-sensitive call of
    this request (closing the response) starts a fresh one. A no-op outside a
    ThreadSensitiveContext (the sync test client)."""
    context = SyncToAsync.thread_sensitive_context.get(None)
    if context is None:
        return
    executor = SyncToAsync.context_to_thread_executor.pop(context, None)
    if executor is not None:
        # The thread's connections die with it otherwise: a pooled one would
        # never go back to its pool, a persistent one would stay open until
        # the garbage collector finds it.
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)


# --- wake-ups ---------------------------------------------------------------------


class _LoopEvent(threading.Event):
    """A threading.Event (what ``notify``'s listener thread sets) that also sets
    an asyncio.Event on the waiter's loop, so the waiter needs no thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.aevent = asyncio.Event()
        self.set_at = 0.0  # when the last wake-up came (monotonic)

    def set(self) -> None:
        self.set_at = time.monotonic()
        super().set()
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self.loop.call_soon_threadsafe(self.aevent.set)


_local_guard = threading.Lock()
_local: dict[str, set[_LoopEvent]] = {}


def wake_local(name: str) -> None:
    """Wake this process's waiters on ``name`` now (thread-safe). Writers call
    it after commit (``transaction.on_commit``) beside ``notify.notify``: the
    waiters of the serving process wake at once even where LISTEN is
    unavailable (SQLite); other processes' waiters still poll."""
    with _local_guard:
        events = list(_local.get(name, ()))
    for event in events:
        event.set()


class Wakeup:
    """An async subscription to the wake-up channel ``name`` (see
    :func:`queueproject.notify.channel`); ``name=None`` only polls. Use as
    ``async with Wakeup(name) as wake: ... await wake.wait(t)``. LISTEN is active
    when ``__aenter__`` returns, so fetch the starting point after entering."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.sub: notify.Subscription | None = None
        self.event: _LoopEvent | None = None
        self.max_sleep = product_settings().worker_poll_interval
        self.woke_at = 0.0  # the last wake-up's time: a fetch must start after it

    async def __aenter__(self) -> Wakeup:
        if self.name is not None:
            self.event = _LoopEvent(asyncio.get_running_loop())
            with _local_guard:
                _local.setdefault(self.name, set()).add(self.event)
            # subscribe() waits (briefly, off the loop) until LISTEN is active.
            self.sub = await run_sync(notify.subscribe, self.name, event=self.event)
            self.max_sleep = self.sub.max_sleep
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.name is not None and self.event is not None:
            with _local_guard:
                waiting = _local.get(self.name)
                if waiting is not None:
                    waiting.discard(self.event)
                    if not waiting:
                        del _local[self.name]
        if self.sub is not None:
            self.sub.close()
            self.sub = None

    async def wait(self, timeout: float) -> bool:
        """Sleep until woken or ``min(timeout, poll interval)`` passes; True if woken."""
        limit = max(0.0, min(timeout, self.max_sleep))
        if self.event is None:
            await asyncio.sleep(limit)
            return False
        try:
            await asyncio.wait_for(self.event.aevent.wait(), limit)
            woke = True
            self.woke_at = self.event.set_at
        except TimeoutError:
            woke = False
        self.event.aevent.clear()
        self.event.clear()
        return woke


Fetch = Callable[[C], tuple[Sequence[E], C]]

# --- shared fetches ------------------------------------------------------------------


@dataclass(eq=False)
class _Fetched:
    items: Sequence[Any]
    cursor: Any
    rendered: bytes | None = None


_inflight: dict[tuple[int, Hashable, Any], tuple[float, asyncio.Task[_Fetched]]] = {}


async def _fetch(
    share: Hashable | None, fetch: Fetch[C, E], cursor: C, fresh_after: float = 0.0
) -> _Fetched:
    """``fetch(cursor)`` off the loop. With a ``share`` key, listeners of the
    same key at the same cursor (a thousand listeners at a channel's head,
    all woken by one publish) share one call, and its rendering: the key must
    determine ``fetch`` and ``render``. A call is shared only with waiters
    woken before it started (``fresh_after``), so none gets a result older
    than its wake-up. A waiter that is cancelled (its client left) does not
    cancel the call the others wait for."""
    if share is None:
        items, after = await run_sync(fetch, cursor)
        return _Fetched(items, after)
    key = (id(asyncio.get_running_loop()), share, cursor)
    entry = _inflight.get(key)
    if entry is None or entry[0] < fresh_after:

        async def call() -> _Fetched:
            items, after = await run_sync(fetch, cursor)
            return _Fetched(items, after)

        mine = (time.monotonic(), asyncio.ensure_future(call()))
        _inflight[key] = entry = mine

        def forget(_: object) -> None:
            if _inflight.get(key) is mine:
                del _inflight[key]

        mine[1].add_done_callback(forget)
    return await asyncio.shield(entry[1])


def _rendered(fetched: _Fetched, render: Callable[[Any], bytes]) -> bytes:
    if fetched.rendered is None:
        fetched.rendered = b"".join(render(item) for item in fetched.items)
    return fetched.rendered


# --- the loops ---------------------------------------------------------------------


async def event_stream(
    *,
    fetch: Fetch[C, E],
    start: Callable[[], C],
    wake: Wakeup,
    render: Callable[[E], bytes],
    keepalive: float = KEEPALIVE_SECONDS,
    max_seconds: float | None = None,
    first: bytes = b"",
    share: Hashable | None = None,
) -> AsyncIterator[bytes]:
    """The body of an SSE response: ``first`` (e.g. :func:`retry`), then every
    item ``fetch`` finds after the cursor ``start()`` returns (called once
    LISTEN is active, so nothing committed after it is missed), rendered, in order; a keep-alive
    comment after ``keepalive`` idle seconds; ends after ``max_seconds``
    (default ``SSE_MAX_STREAM_SECONDS`` or 300; the client reconnects with
    ``Last-Event-ID``). Closes ``wake`` when it ends or the client leaves.
    ``share``: see :func:`_fetch` (listeners of one key share fetch and render)."""
    limit = max_seconds if max_seconds is not None else _max_stream_seconds()
    deadline = time.monotonic() + limit
    async with wake:  # a client that leaves cancels us here: the exit unsubscribes
        release_request_thread()  # streaming: the middleware is done with it
        cursor = await run_sync(start)
        if first:
            yield first
        last_sent = time.monotonic()
        while (now := time.monotonic()) < deadline:
            fetched = await _fetch(share, fetch, cursor, wake.woke_at)
            cursor = fetched.cursor
            if fetched.items:
                yield _rendered(fetched, render)
                last_sent = time.monotonic()
                continue  # there may be more than one page
            if now - last_sent >= keepalive:
                yield comment("keep-alive")
                last_sent = now
            await wake.wait(min(deadline - now, keepalive - (now - last_sent)))


async def long_poll(
    *,
    fetch: Fetch[C, E],
    start: Callable[[], C],
    wake: Wakeup,
    timeout: float,
    share: Hashable | None = None,
) -> tuple[Sequence[E], C]:
    """Wait up to ``timeout`` seconds for ``fetch`` to find items after the
    cursor ``start()`` returns (called once LISTEN is active); returns them
    (maybe none) and the cursor to pass next time."""
    deadline = time.monotonic() + timeout
    async with wake:
        release_request_thread()  # idle until the view returns
        cursor = await run_sync(start)
        while True:
            fetched = await _fetch(share, fetch, cursor, wake.woke_at)
            cursor = fetched.cursor
            remaining = deadline - time.monotonic()
            if fetched.items or remaining <= 0:
                return fetched.items, cursor
            await wake.wait(remaining)


# --- waiting endpoints (long-polls and event streams) --------------------------------
#
# A waiting endpoint (a claim with ``wait_seconds``, a stream read with
# ``wait_seconds``, a channel's long-poll or event stream) is a DRF view like any
# other for its first step: authentication, throttling, authorisation, parsing and
# a first try, on the request's thread with the rest of the middleware. When that
# try finds nothing and the client asked to wait, the view returns
# ``Planned(plan)`` instead of a response, and the endpoint's *finish* (an async
# function of the plan) serves it on the event loop: no thread and no database
# connection are held while nothing happens, however many clients wait.
#
# Who runs the finish: under the production server, the ASGI handler
# (``queueproject.asgi_handler``), once the sync middleware chain has returned the
# ``Planned`` (it sets :data:`DEFER_WAITS` around that chain); elsewhere (WSGI:
# ``runserver``, the test client) the view itself, through ``async_to_sync``,
# holding its thread as every WSGI request does.

DEFER_WAITS: ContextVar[bool] = ContextVar("dq_defer_waits", default=False)
Finish = Callable[[Any], Awaitable[HttpResponseBase]]


@dataclass(frozen=True)
class Wait:
    """How to wait: ``fetch``/``start``/``share`` as :func:`long_poll` takes them,
    the wake-up channel ``wake`` (None: poll), ``timeout`` seconds, and
    ``respond(items, cursor)``: the JSON body, from what the wait found (maybe
    nothing) and the last cursor. ``fetch`` and ``respond`` run off the loop
    and may raise domain errors (answered in the envelope)."""

    fetch: Fetch[Any, Any]
    start: Callable[[], Any]
    wake: str | None
    timeout: float
    respond: Callable[[Sequence[Any], Any], Any]
    share: Hashable | None = None


class Planned(HttpResponse):
    """What a waiting endpoint's DRF view returns instead of a response when
    the async part of the endpoint is to serve it (never sent as such):
    ``plan`` says how (a :class:`Wait`, or an endpoint's own plan), ``finish``
    (set by :func:`waiting`) serves it."""

    def __init__(self, plan: Any) -> None:
        super().__init__(status=200)
        self.plan = plan
        self.finish: Finish | None = None


def planner(view_class: type[Any]) -> Callable[..., HttpResponseBase]:
    """The first, sync step of a waiting endpoint: run the DRF view
    ``view_class`` (authentication, throttling, authorisation, parsing) and
    answer its response rendered, or its ``Planned``."""
    sync_view = view_class.as_view()

    def plan(request: HttpRequest, **kwargs: Any) -> HttpResponseBase:
        response: HttpResponseBase = sync_view(request, **kwargs)
        if not isinstance(response, Planned) and hasattr(response, "render"):
            response.render()
        return response

    return plan


# Set by the middleware on the stand-in, not by the finish: carried over.
_NOT_CARRIED = frozenset({"content-type", "content-length"})


async def finished(planned: Planned) -> HttpResponseBase:
    """Serve ``planned``: await its finish, then carry over what the middleware
    set on the stand-in (headers the real response lacks, cookies, and the
    closers that end the request)."""
    assert planned.finish is not None, "a Planned left its view without a finish"
    response = await planned.finish(planned.plan)
    for key, value in planned.items():
        if key.lower() not in _NOT_CARRIED and not response.has_header(key):
            response[key] = value
    if isinstance(response, HttpResponse) and not response.has_header("Content-Length"):
        response["Content-Length"] = str(len(response.content))  # as CommonMiddleware would
    for name, morsel in planned.cookies.items():
        response.cookies[name] = morsel
    closers = planned._resource_closers  # type: ignore[attr-defined]  # Django's, untyped
    response._resource_closers.extend(closers)  # type: ignore[attr-defined]
    closers.clear()
    return response


def waiting(view_class: type[Any], finish: Finish) -> Callable[..., HttpResponseBase]:
    """The view for the route of the DRF view ``view_class`` whose handlers may
    return ``Planned``: any other response passes through; a ``Planned`` is
    served by ``finish(plan)`` (see above for who awaits it). Every method of
    the route goes through it; the schema is ``view_class``'s
    (:func:`routed_as`)."""
    plan = planner(view_class)

    @csrf_exempt  # DRF's authentication enforces CSRF for session logins itself
    def view(request: HttpRequest, **kwargs: Any) -> HttpResponseBase:
        response = plan(request, **kwargs)
        if isinstance(response, Planned):
            response.finish = finish
            if not DEFER_WAITS.get():
                return async_to_sync(finished)(response)
        return response

    routed_as(view, view_class)
    return view


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> HttpResponse:
    """``body`` rendered as the API renders JSON (DRF's JSONRenderer)."""
    return HttpResponse(JSONRenderer().render(body), status=status, headers=headers,
                        content_type="application/json")  # fmt: skip


def _error(exc: Exception) -> HttpResponseBase:
    """A domain error raised while waiting, in the envelope (the one handler)."""
    response = api_exception_handler(exc, {})
    if response is None:
        raise exc
    headers = {k: v for k, v in response.items() if k.lower() != "content-type"}
    return _json(response.data, response.status_code, headers)


async def _serve_wait(wait: Wait) -> HttpResponseBase:
    try:
        items, cursor = await long_poll(
            fetch=wait.fetch, start=wait.start, wake=Wakeup(wait.wake),
            timeout=wait.timeout, share=wait.share,
        )  # fmt: skip
        return _json(await run_sync(wait.respond, items, cursor))
    except DomainError as exc:  # e.g. retention passed the offset meanwhile
        return await run_sync(_error, exc)


def waiting_view(view_class: type[Any]) -> Callable[..., HttpResponseBase]:
    """:func:`waiting` for a JSON long-poll whose plan is a :class:`Wait`."""
    return waiting(view_class, _serve_wait)


def streaming_response(stream: AsyncIterator[bytes]) -> StreamingHttpResponse:
    """A ``text/event-stream`` response that proxies must not buffer or cache."""
    response = StreamingHttpResponse(stream, content_type=CONTENT_TYPE)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event through at once
    return response


def _max_stream_seconds() -> float:
    return float(getattr(dj, "SSE_MAX_STREAM_SECONDS", MAX_STREAM_SECONDS))


class JSONOnly(BaseContentNegotiation):
    """Errors (and the long-poll) are JSON whatever ``Accept`` says: an
    EventSource asks for text/event-stream and must still read the envelope."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type


def routed_as(view: Callable[..., Any], view_class: type[Any]) -> None:
    """Let an async function view (a waiting endpoint) pass for its DRF class
    view's route: drf-spectacular documents it from ``cls``/``initkwargs``, and
    Django's resolver and the routing checks read ``view_class``."""
    view.cls = view_class  # type: ignore[attr-defined]
    view.initkwargs = {}  # type: ignore[attr-defined]
    view.view_class = view_class  # type: ignore[attr-defined]


# One Server-Sent Event as the OpenAPI schema of a text/event-stream response
# (what clients and the whole-API fuzz read each event against): its fields,
# ``data`` being the JSON text of the item (the endpoint's description says
# which), ``id`` the resume cursor, ``event`` set only on a terminal event.
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "data": {"type": "string", "description": "the item as JSON text"},
        "event": {"type": "string"},
        "id": {"type": "string", "description": "resume with Last-Event-ID"},
        "retry": {"type": "integer", "minimum": 0},
    },
}
