"""``LOG_FORMAT=json``: every log line one JSON object (python-json-logger).

Each line carries ``time``, ``level``, ``logger`` and ``event`` (the message),
plus the process-wide fields a worker or dispatcher sets once at start
(``set_process_fields(worker=...)``) and whatever ``extra=`` a call passes
(``queue``, ``message_id``, ``outcome``, ``duration_ms``, ``attempt``, …).
A message that is itself a JSON object (the worker's per-message outcome
lines, built by hand for speed) is merged in rather than quoted, so those
lines keep their fields at the top level. The text format stays the
default (``queueproject.settings`` wires this formatter only for json).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.conf import settings
from pythonjsonlogger.json import JsonFormatter as _BaseJsonFormatter

_process_fields: dict[str, Any] = {}


def json_logs() -> bool:
    """Whether ``LOG_FORMAT=json`` is on (stderr then carries only JSON lines:
    human progress displays stay off)."""
    return getattr(settings, "LOG_FORMAT", "text") == "json"


def set_process_fields(**fields: Any) -> None:
    """Fields added to every JSON line of this process (e.g. ``worker``)."""
    _process_fields.update(fields)


class JsonFormatter(_BaseJsonFormatter):
    """One JSON object per record; see the module docstring for the fields."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("timestamp", "time")
        kwargs.setdefault("json_ensure_ascii", False)
        super().__init__(*args, **kwargs)

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        message = log_data.pop("message", record.getMessage())
        merged = _as_object(message)
        for key, value in _process_fields.items():
            log_data.setdefault(key, value)
        log_data["level"] = record.levelname
        log_data["logger"] = record.name
        if merged is not None:
            log_data.update(merged)
        else:
            log_data["event"] = message


def _as_object(message: str) -> dict[str, Any] | None:
    """``message`` parsed when it is a JSON object, else None."""
    if not (message.startswith("{") and message.endswith("}")):
        return None
    try:
        value = json.loads(message)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
