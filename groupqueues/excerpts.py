"""Short one-line excerpts of message payloads and errors, for lists (the
admin's message list, the ``queue_dead list`` table)."""

from __future__ import annotations

import json
from typing import Any

PAYLOAD_EXCERPT = 60
ERROR_EXCERPT = 80


def excerpt(text: str | None, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def payload_excerpt(payload: Any, width: int = PAYLOAD_EXCERPT) -> str:
    """The payload as compact JSON, cut to ``width`` characters."""
    return excerpt(json.dumps(payload, ensure_ascii=False, separators=(",", ":")), width)


def error_excerpt(error: str | None, width: int = ERROR_EXCERPT) -> str:
    """The first line of the last error, cut to ``width`` characters."""
    return excerpt((error or "").strip().splitlines()[0] if error and error.strip() else "", width)
