"""The API's only request parser: strict JSON with size and depth limits.

Refuses, as 400 ``invalid``: invalid UTF-8, malformed JSON, NaN/Infinity,
numbers that do not fit, strings with NUL or lone surrogates (PostgreSQL's
jsonb cannot store them) and nesting deeper than ``json_max_depth`` counted
from the body root. Bodies over ``api_max_body_bytes`` are 413.
"""

from __future__ import annotations

import json
import math
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from queueproject.conf import product_settings
from queueproject.exceptions import PayloadTooLarge


class JSONRejected(ValueError):
    """A decoded JSON value that the product cannot store."""


def _refuse_constant(name: str) -> Any:
    raise JSONRejected(f"{name} is not valid JSON")


def check_json_value(value: Any, max_depth: int) -> None:
    """Raise JSONRejected if ``value`` nests deeper than ``max_depth`` or holds
    something a database cannot store (non-finite floats, NUL, surrogates).

    Depth: a scalar body is depth 0, ``[]`` or ``{}`` is 1, ``[[1]]`` is 2.
    Iterative, so hostile depth cannot exhaust the stack.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth + 1 > max_depth:
                raise JSONRejected(f"JSON nested deeper than {max_depth} levels")
            for key, child in item.items():
                _check_string(key)
                stack.append((child, depth + 1))
        elif isinstance(item, list):
            if depth + 1 > max_depth:
                raise JSONRejected(f"JSON nested deeper than {max_depth} levels")
            stack.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            _check_string(item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise JSONRejected("number out of range")


def _check_string(text: str) -> None:
    if "\x00" in text:
        raise JSONRejected("strings must not contain the NUL character (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JSONRejected("strings must not contain unpaired surrogates") from exc


def loads_strict(raw: bytes) -> Any:
    """Decode a JSON document under the product's rules (raises ParseError)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError("The request body is not valid UTF-8.") from exc
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise ParseError(
            f"JSON nested deeper than {product_settings().json_max_depth} levels."
        ) from exc
    except (ValueError, JSONRejected) as exc:  # JSONDecodeError is a ValueError
        raise ParseError(f"Malformed JSON: {exc}") from exc
    try:
        check_json_value(value, product_settings().json_max_depth)
    except JSONRejected as exc:
        raise ParseError(f"Invalid JSON: {exc}.") from exc
    return value


class StrictJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = product_settings().api_max_body_bytes
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        if not raw.strip():
            return {}
        return loads_strict(raw)
