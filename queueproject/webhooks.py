"""Signed webhooks: HMAC-SHA256 signing, verification and a signed JSON POST.

The signature covers ``f"{timestamp}.".encode() + body`` under a shared secret and
travels in two headers::

    X-Webhook-Timestamp: 1767225600
    X-Webhook-Signature: sha256=<hex digest>

Receivers call :func:`verify` with the raw body and both headers; a timestamp
outside ``tolerance`` seconds is refused so a captured request cannot be replayed
later. Shared by every engine that calls app endpoints (session dispatcher,
group-queue HTTP handlers).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any

import httpx

from queueproject import clock

TIMESTAMP_HEADER = "X-Webhook-Timestamp"
SIGNATURE_HEADER = "X-Webhook-Signature"
SIGNATURE_PREFIX = "sha256="
DEFAULT_TOLERANCE = 300
SUMMARY_LIMIT = 200


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The header value signing ``body`` sent at ``timestamp`` (Unix seconds)."""
    message = f"{timestamp}.".encode() + body
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_PREFIX}{digest}"


def verify(
    secret: str,
    body: bytes,
    timestamp: int | str,
    signature: str,
    *,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> bool:
    """True when ``signature`` signs ``body`` at ``timestamp`` under ``secret``
    and the timestamp is within ``tolerance`` seconds of ``now``."""
    try:
        stamp = int(timestamp)
    except (TypeError, ValueError):
        return False
    current = clock.now().timestamp() if now is None else now
    if abs(current - stamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, body, stamp), signature or "")


@dataclass(frozen=True)
class WebhookResult:
    """What a signed POST achieved.

    ``ok``: a 2xx answer. ``status``: the HTTP status (None without an answer).
    ``uncertain``: the request may have reached the receiver although no answer
    came (a read timeout or a dropped connection after sending), so at-most-once
    callers must treat it as delivered-or-lost rather than retry blindly.
    ``data``: the decoded JSON answer, when there is one.
    """

    ok: bool
    status: int | None
    summary: str
    uncertain: bool = False
    data: Any = None


def encode(payload: Any) -> bytes:
    """The exact bytes that are signed and sent (compact, key order kept)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def post_signed(url: str, secret: str, payload: Any, timeout: float = 10.0) -> WebhookResult:
    """POST ``payload`` as JSON to ``url`` with the signature headers. Never raises
    for network trouble: the result says what happened."""
    body = encode(payload)
    timestamp = int(clock.now().timestamp())
    headers = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, body, timestamp),
    }
    try:
        response = httpx.post(url, content=body, headers=headers, timeout=timeout)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
        return WebhookResult(False, None, f"not sent: {exc}"[:SUMMARY_LIMIT])
    except httpx.HTTPError as exc:
        return WebhookResult(False, None, f"no answer: {exc}"[:SUMMARY_LIMIT], uncertain=True)
    return WebhookResult(
        ok=200 <= response.status_code < 300,
        status=response.status_code,
        summary=f"HTTP {response.status_code} {response.text[:SUMMARY_LIMIT]}".strip(),
        data=_json_or_none(response),
    )


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
