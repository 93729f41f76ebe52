"""Static files (the admin's, the API docs') from the one process, under WSGI
and ASGI alike.

WhiteNoise's middleware is sync-only. Under ASGI, Django runs a sync-only
middleware on the request's thread and calls everything below it through
``async_to_sync``, so that thread stays blocked for as long as the view runs:
a long-poll waiting twenty seconds on the event loop would still hold a
thread the whole time (fifty waiting claims, fifty threads). This subclass is
async-capable: under ASGI it looks the path up without a thread, serves a
static file on one, and otherwise awaits the rest of the chain directly.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import HttpRequest
from django.http.response import HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):  # type: ignore[misc]  # untyped
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any = None, **kwargs: Any) -> None:
        super().__init__(get_response, **kwargs)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        if self.autorefresh:  # DEBUG: looks on disk
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            response: HttpResponseBase = await sync_to_async(self.serve)(static_file, request)
            return response
        response = await self.get_response(request)
        return response
