"""The ASGI handler of the production server: each request's middleware and
view in one hop to a thread, waits on the event loop.

Django's own ASGI handler runs the middleware chain async: every
``MiddlewareMixin`` middleware (security, sessions, common, CSRF,
authentication, messages, clickjacking) hands its ``process_request``,
``process_view`` and ``process_response`` to the request's thread one at a time
and back, a dozen thread hand-offs per request before the (sync) view runs.
Measured behind uvicorn, PostgreSQL, one client enqueueing one message per
request: 5.8 ms of server CPU per request, against 3.2 ms for the same
request served by WSGI (bench/README.md, "The REST API under load").

This handler loads the chain sync, as WSGI does, and runs it for each request
in one ``sync_to_async`` call (on the request's thread-sensitive thread, so the
request's database connection is the one ``request_finished`` gives back). A
waiting endpoint's view returns ``sse.Planned`` from that chain
(``sse.DEFER_WAITS`` is set around it); the handler then serves it on the event
loop with ``sse.finished``, holding no thread while it waits.

Each request's thread is taken from a small stock of idle ones and given back
when the response is sent (asgiref starts and joins a thread per request: a
tenth of a request's CPU). Thread-local state a request leaves behind is what a
threaded WSGI server's threads keep between requests too (the database
connection object, given back to the pool by ``request_finished``).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.db import connections
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.log import log_response

from queueproject import sse

IDLE_THREADS = 32  # request threads kept idle per process, at most

_idle: deque[Executor] = deque()  # touched by the event loop's thread only


class _RequestThread(ThreadSensitiveContext):
    """asgiref's per-request thread context, on a thread kept for the next request."""

    async def __aenter__(self) -> _RequestThread:
        await super().__aenter__()  # type: ignore[no-untyped-call]  # asgiref, untyped
        if self.token is not None:  # the outermost context: this request's
            executor = _idle.pop() if _idle else ThreadPoolExecutor(1, "dq-request")
            SyncToAsync.context_to_thread_executor[self] = executor
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self.token is not None:
            # Every thread-sensitive call of the request has returned. An
            # executor shut down meanwhile (sse.release_request_thread, a
            # waiting request's) is not kept.
            executor = SyncToAsync.context_to_thread_executor.pop(self, None)
            if executor is not None:
                if len(_idle) < IDLE_THREADS and not getattr(executor, "_shutdown", True):
                    _idle.append(executor)
                else:
                    executor.shutdown(wait=False)
        await super().__aexit__(*exc)  # type: ignore[no-untyped-call]


class Handler(ASGIHandler):
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        async with _RequestThread():
            await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        response = await sync_to_async(self._get_response_deferring, thread_sensitive=True)(request)
        if isinstance(response, sse.Planned):
            response = await sse.finished(response)
            if response.status_code >= 400:
                await sync_to_async(_log, thread_sensitive=False)(request, response)
        return response

    def _get_response_deferring(self, request: HttpRequest) -> HttpResponseBase:
        token = sse.DEFER_WAITS.set(True)
        try:
            response = self.get_response(request)
        finally:
            sse.DEFER_WAITS.reset(token)
        if isinstance(response, sse.Planned):
            # Give this thread's connection back before the wait: the wait's
            # own database calls borrow from the same pool (sse.run_sync), and
            # a thousand waiters must not sit on connections.
            connections.close_all()
        return response


def _log(request: HttpRequest, response: HttpResponseBase) -> None:
    """What Django logs of a response of status >= 400 (a wait's may end so)."""
    log_response("%s: %s", response.reason_phrase, request.path,
                 response=response, request=request)  # type: ignore[arg-type]  # fmt: skip
