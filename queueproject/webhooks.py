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
import threading
from dataclasses import dataclass
from typing import Any

import httpx

from queueproject import clock

TIMESTAMP_HEADER = "X-Webhook-Timestamp"
SIGNATURE_HEADER = "X-Webhook-Signature"
SIGNATURE_PREFIX = "sha256="
DEFAULT_TOLERANCE = 300
SUMMARY_LIMIT = 200


_local = threading.local()


def _client() -> httpx.Client:
    """This thread's HTTP client: connections to an endpoint stay alive between
    deliveries (a worker slot or the dispatcher posts many in a row)."""
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = httpx.Client(follow_redirects=False)
    return client


def sign(secret: str | bytes, body: bytes, timestamp: int) -> str:
    """The header value signing ``body`` sent at ``timestamp`` (Unix seconds)."""
    key = secret.encode() if isinstance(secret, str) else secret
    message = f"{timestamp}.".encode() + body
    digest = hmac.new(key, message, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_PREFIX}{digest}"


def verify(
    secret: str | bytes,
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


def post_signed(
    url: str,
    secret: str | bytes,
    payload: Any,
    timeout: float = 10.0,
    headers: dict[str, str] | None = None,
) -> WebhookResult:
    """POST ``payload`` as JSON to ``url`` with the signature headers (and any
    extra ``headers``, e.g. the outbox's ``X-Outbox-Id``). Never raises for
    network trouble: the result says what happened."""
    body = encode(payload)
    timestamp = int(clock.now().timestamp())
    signed = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(secret, body, timestamp),
    }
    headers = {**(headers or {}), **signed}  # extra headers never replace the signed ones
    try:
        response = _client().post(url, content=body, headers=headers, timeout=timeout)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
        return WebhookResult(False, None, _failure("not sent", exc, url, timeout))
    except httpx.HTTPError as exc:
        return WebhookResult(False, None, _failure("no answer", exc, url, timeout), uncertain=True)
    text = response.text.strip().replace("\n", " ")
    return WebhookResult(
        ok=200 <= response.status_code < 300,
        status=response.status_code,
        summary=f"HTTP {response.status_code}: {text}"[:SUMMARY_LIMIT].rstrip(": "),
        data=_json_or_none(response),
    )


def _failure(what: str, exc: Exception, url: str, timeout: float) -> str:
    """A short line for logs and ``last_error``."""
    if isinstance(exc, httpx.TimeoutException):
        return f"{what}: timed out after {timeout:g}s: {url}"[:SUMMARY_LIMIT]
    return f"{what}: {type(exc).__name__}: {exc}"[:SUMMARY_LIMIT]


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
