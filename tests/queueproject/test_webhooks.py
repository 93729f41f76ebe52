"""Signed webhooks: sign/verify and the signed POST helper."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from queueproject import webhooks


def test_verify__accepts_the_signature_within_tolerance():
    body = b'{"a":1}'
    signature = webhooks.sign("s", body, 1000)
    assert webhooks.verify("s", body, "1000", signature, now=1100)


def test_verify__refuses_tampering_wrong_secret_and_old_timestamps():
    body = b'{"a":1}'
    signature = webhooks.sign("s", body, 1000)
    assert not webhooks.verify("s", b'{"a":2}', 1000, signature, now=1000)
    assert not webhooks.verify("other", body, 1000, signature, now=1000)
    assert not webhooks.verify("s", body, 1000, signature, now=1000 + 301)
    assert not webhooks.verify("s", body, "not-a-number", signature, now=1000)
    assert not webhooks.verify("s", body, 1001, signature, now=1000)


def test_post_signed__unreachable_is_not_sent_and_not_uncertain():
    result = webhooks.post_signed("http://127.0.0.1:9/", "s", {"a": 1}, timeout=2)
    assert not result.ok and result.status is None and not result.uncertain


def test_post_signed__sends_a_verifiable_request_and_reads_the_answer():
    seen = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen["valid"] = webhooks.verify(
                "s",
                body,
                self.headers[webhooks.TIMESTAMP_HEADER],
                self.headers[webhooks.SIGNATURE_HEADER],
            )
            seen["payload"] = json.loads(body)
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"ready": true}')

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.handle_request, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        result = webhooks.post_signed(url, "s", {"a": 1}, timeout=5)
    finally:
        server.server_close()
    assert result.ok and result.status == 202 and result.data == {"ready": True}
    assert seen == {"valid": True, "payload": {"a": 1}}
