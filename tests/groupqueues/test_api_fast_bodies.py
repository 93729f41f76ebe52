"""The hot endpoints' bodies built without a serializer instance (claim,
ack; issue 21) render exactly what their documented serializers render, and
the ack's fast path validates exactly as the per-entry serializers do."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from groupqueues import serializers as s
from groupqueues import services
from groupqueues.services import AckBatchResult, AckResult, ClaimedMessage
from tests.factories import GroupFactory

NOW = datetime(2026, 12, 2, 16, 45, 1, 123456, tzinfo=UTC)


def claimed(**overrides: Any) -> ClaimedMessage:
    fields: dict[str, Any] = {
        "id": uuid.uuid4(), "collection_id": 1, "payload": {"n": [1, "x", None]},
        "priority": -3, "attempt": 2, "max_attempts": 5, "claim_token": uuid.uuid4(),
        "claimed_by": "w", "lease_expires_at": NOW + timedelta(seconds=30),
        "enqueued_at": NOW, "deliver_after": NOW, "expires_at": None,
        "enqueued_by": "app:a", "last_error": None,
    }  # fmt: skip
    return ClaimedMessage(**(fields | overrides))


@pytest.mark.parametrize(
    "when",
    [NOW, NOW.replace(microsecond=0), NOW.astimezone(timezone(timedelta(hours=5, minutes=30)))],
)
def test_claimed__same_body_as_the_serializer(when):
    messages = [claimed(lease_expires_at=when, enqueued_at=when), claimed(payload="text")]
    assert s.ClaimedSerializer.of(messages) == s.ClaimedSerializer({"messages": messages}).data
    assert s.ClaimedSerializer.of([]) == s.ClaimedSerializer({"messages": []}).data


def test_acked__same_body_as_the_serializer():
    result = AckBatchResult(
        acked=1,
        results=[
            AckResult(id=uuid.uuid4(), acked=True, reason=None),
            AckResult(id=uuid.uuid4(), acked=False, reason="lease_lost"),
        ],
    )
    assert s.AckedSerializer.of(result) == s.AckedSerializer(result).data


GOOD = str(uuid.uuid4())


@pytest.mark.parametrize(
    "entries",
    [
        [{"id": GOOD, "claim_token": GOOD}],
        [{"id": GOOD, "claim_token": GOOD}, {"id": GOOD}],
        [{"id": GOOD, "claim_token": GOOD, "extra": 1}],
        [{"id": GOOD, "token": GOOD}],
        [{"id": GOOD.upper(), "claim_token": GOOD}],
        [{"id": "{" + GOOD + "}", "claim_token": GOOD}],
        [{"id": 1, "claim_token": GOOD}],
        [{"id": None, "claim_token": GOOD}],
        [[GOOD, GOOD]],
        ["x"],
        [],
    ],
)
def test_ack_entries__fast_path_validates_as_the_serializers(entries):
    from rest_framework.exceptions import ValidationError

    from groupqueues.exceptions import InvalidQueueInput
    from groupqueues.serializers import HeldSerializer, validate_entries

    def slow():
        try:
            done = validate_entries(entries, HeldSerializer, field="acks", limit=500)
            return [(e["id"], e["claim_token"]) for e in done]
        except InvalidQueueInput as exc:
            return ("invalid", exc.details)

    def fast():
        serializer = s.AckSerializer(data={"acks": entries})
        try:
            serializer.is_valid(raise_exception=True)
            return serializer.validated_data["acks"]
        except InvalidQueueInput as exc:
            return ("invalid", exc.details)
        except ValidationError as exc:
            return ("invalid", exc.detail)

    assert fast() == slow() or (fast()[0] == slow()[0] == "invalid")
    if s.plain_pairs(entries) is not None:
        assert s.plain_pairs(entries) == slow()


@pytest.mark.django_db
def test_claim_and_ack_over_rest_answer_what_the_serializers_would(api, app_token):
    group = GroupFactory(slug="fast")
    queue = services.collection_create(group=group, name="jobs")
    services.message_enqueue(collection=queue, payload={"a": 1}, enqueued_by="t")
    from principals.services import app_create

    _, secret = app_token(app_create(slug="fast-app", group=group), "queue:consume")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    got = api.post("/api/groups/fast/queues/jobs/claim/", {"worker_id": "w"}, format="json")
    assert got.status_code == 200, got.content
    (message,) = got.json()["messages"]
    assert message["lease_expires_at"].endswith("Z") and message["payload"] == {"a": 1}
    acked = api.post(
        "/api/groups/fast/queues/jobs/ack/",
        {"acks": [{"id": message["id"], "claim_token": message["claim_token"]}]},
        format="json",
    )
    assert acked.json() == {
        "acked": 1, "results": [{"id": message["id"], "acked": True, "reason": None}]
    }  # fmt: skip
