"""Path segments in API URLs: one converter for every id-carrying route, and
one for slugs and names (``<api_segment:…>``).

``<api_id:name>`` matches one path segment and hands the view a
:class:`uuid.UUID`; a malformed id matches no route, so the ``/api/``
catch-all answers it as every unknown path is answered: 404 ``not_found`` in
the error envelope, for every method (see ``queueproject.urls``). Both queue
engines route their ids through it; none parses a path id itself.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.urls import register_converter

# The canonical 8-4-4-4-12 spelling only (what ``format: uuid`` says), not the
# braces, URN or bare-hex forms ``uuid.UUID`` also parses.
CANONICAL = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")


def parse_id(value: Any) -> uuid.UUID:
    """``value`` as a UUID when it is one (a UUID or its canonical text);
    raises ValueError otherwise."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str) or not CANONICAL.match(value):
        raise ValueError(f"{value!r} is not an id")
    return uuid.UUID(value)


class IdConverter:
    """``<api_id:…>``: one path segment that must be an id (else no match)."""

    regex = "[^/]+"

    def to_python(self, value: str) -> uuid.UUID:
        return parse_id(value)

    def to_url(self, value: uuid.UUID | str) -> str:
        return str(value)


register_converter(IdConverter, "api_id")


class SegmentConverter:
    """``<api_segment:…>``: one path segment without NUL (group and app
    references, collection, lock and schedule names). PostgreSQL text cannot
    hold NUL, so such a reference names nothing; it falls through to the API's
    routing 404 instead of reaching a query."""

    regex = "[^/\x00]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(SegmentConverter, "api_segment")
