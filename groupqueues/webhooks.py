"""Signed webhook delivery (the ``webhook`` handler of the group queue workers).

The receiver checks ``X-Queue-Signature: sha256=<hex>`` where the hex is the
HMAC-SHA256, under the app's secret, of ``f"{timestamp}.".encode() + body``
and ``X-Queue-Timestamp`` is that timestamp (Unix seconds; reject old ones to
stop replays). The same scheme is meant to serve every webhook of the
project (one module once the branches merge).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from typing import Any

import httpx

TIMESTAMP_HEADER = "X-Queue-Timestamp"
SIGNATURE_HEADER = "X-Queue-Signature"
SUMMARY_MAX = 500


_local = threading.local()


def _client() -> httpx.Client:
    """This thread's HTTP client: connections to an endpoint are kept alive
    between deliveries (a worker slot posts many messages in a row)."""
    client = getattr(_local, "client", None)
    if client is None:
        client = _local.client = httpx.Client(follow_redirects=False)
    return client


def sign(secret: bytes | str, body: bytes, timestamp: int) -> str:
    """Hex HMAC-SHA256 of ``f"{timestamp}.".encode() + body`` under ``secret``."""
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def verify(secret: bytes | str, body: bytes, timestamp: int, signature_header: str) -> bool:
    """Whether ``signature_header`` (``sha256=<hex>``) signs ``body`` at ``timestamp``."""
    expected = f"sha256={sign(secret, body, timestamp)}"
    return hmac.compare_digest(expected, signature_header)


def post_signed(
    url: str, secret: bytes | str, payload: dict[str, Any], timeout: float
) -> tuple[bool, int | None, str]:
    """POST ``payload`` as JSON, signed. Returns (ok, status, summary): ok for a
    2xx answer; status None when no answer came (timeout, connection error);
    summary is a short text for logs and ``last_error``. Never raises for
    network trouble."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: f"sha256={sign(secret, body, timestamp)}",
    }
    try:
        response = _client().post(url, content=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return False, None, f"webhook timed out after {timeout:g}s: {url}"
    except httpx.HTTPError as exc:
        return False, None, f"webhook failed: {type(exc).__name__}: {exc}"[:SUMMARY_MAX]
    ok = 200 <= response.status_code < 300
    text = response.text.strip().replace("\n", " ")
    summary = f"webhook answered HTTP {response.status_code}: {text}"[:SUMMARY_MAX]
    return ok, response.status_code, summary
