"""The black-box layer itself: a production-configured server over HTTP."""

from __future__ import annotations


def test_server__runs_with_debug_off(server):
    with server.client() as http:
        response = http.get("/no-such-page/")
    assert response.status_code == 404
    assert "URLconf" not in response.text  # Django's DEBUG 404 page lists the URLconf


def test_server__enqueue_and_claim_over_http(world):
    with world.client(world.app_token) as http:
        sent = http.post("/api/apps/shop/queues/jobs/messages/", json={"payload": {"n": 1}})
        assert sent.status_code == 201, sent.text
    with world.client(world.editor_token) as http:
        claimed = http.post(
            "/api/groups/acme/queues/jobs/claim/", json={"worker_id": "bb", "max_messages": 10}
        )
        assert claimed.status_code == 200, claimed.text
        messages = claimed.json()["messages"]
        assert sent.json()["id"] in [m["id"] for m in messages]
        acks = [{"id": m["id"], "claim_token": m["claim_token"]} for m in messages]
        acked = http.post("/api/groups/acme/queues/jobs/ack/", json={"acks": acks})
    assert acked.status_code == 200 and acked.json()["acked"] == len(acks)
