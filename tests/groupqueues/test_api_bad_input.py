"""Bad input never reaches a 500: each kind is refused with its status and code,
in the error envelope, and nothing is written."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from groupqueues import services
from groupqueues.models import Message
from tests.conftest import ApiResponse
from tests.groupqueues.api_helpers import EDITOR, assert_error, q_url, user_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(tree):
    return services.collection_create(group=tree["child"], name="jobs", max_payload_bytes=1000)


@pytest.fixture
def editor(tree):
    return user_client(tree["child"], EDITOR)


@pytest.fixture
def enqueue_url(tree, queue):
    return q_url(tree["child"], rest="messages/")


def raw(
    client: APIClient, url: str, body: bytes, content_type: str = "application/json"
) -> ApiResponse:
    # Django's generic() sends bytes as they are; the DRF stubs type ``data`` as str only.
    return client.generic("POST", url, body, content_type=content_type)  # type: ignore[arg-type]


def nested(depth):
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"payload": ' + nested(64).encode() + b"}", id="nesting-65"),
        pytest.param(b'{"payload": "\xff\xfe"}', id="invalid-utf8"),
        pytest.param(b'{"payload": ', id="malformed"),
        pytest.param(b"payload=1", id="not-json"),
        pytest.param(b'{"payload": NaN}', id="nan"),
        pytest.param(b'{"payload": "a\\u0000b"}', id="nul"),
        pytest.param(b'{"payload": "\\ud800"}', id="lone-surrogate"),
        pytest.param(b'{"payload": ' + nested(100000).encode() + b"}", id="nesting-hostile"),
    ],
)
def test_enqueue__unparseable_body_is_400(editor, enqueue_url, body):
    assert_error(raw(editor, enqueue_url, body), 400, "invalid")
    assert not Message.objects.exists()


def test_enqueue__nesting_of_64_is_accepted(editor, enqueue_url):
    response = raw(editor, enqueue_url, b'{"payload": ' + nested(63).encode() + b"}")
    assert response.status_code == 201, response.content


def test_enqueue__body_over_the_request_limit_is_413(editor, enqueue_url):
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000):
        body = json.dumps({"payload": "x" * 3000}).encode()
        assert_error(raw(editor, enqueue_url, body), 413, "payload_too_large")
    assert not Message.objects.exists()


def test_enqueue__payload_over_the_collection_cap_is_413(editor, enqueue_url):
    response = editor.post(enqueue_url, {"payload": "é" * 600}, format="json")  # 1202 bytes
    error = assert_error(response, 413, "payload_too_large")
    assert error["details"]["max_payload_bytes"] == 1000
    assert not Message.objects.exists()


def test_enqueue__batch_entry_over_the_cap_is_413_with_its_index(editor, enqueue_url):
    body = {"messages": [{"payload": 1}, {"payload": "x" * 2000}]}
    error = assert_error(editor.post(enqueue_url, body, format="json"), 413, "payload_too_large")
    assert error["details"]["index"] == 1
    assert not Message.objects.exists()


def test_enqueue__form_content_type_is_415(editor, enqueue_url):
    response = raw(editor, enqueue_url, b"payload=1", "application/x-www-form-urlencoded")
    assert_error(response, 415, "unsupported_media_type")
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({}, "payload"),
        ({"payload": None}, "payload"),
        ({"payload": 1, "priority": "high"}, "priority"),
        ({"payload": 1, "priority": "5"}, "priority"),
        ({"payload": 1, "priority": True}, "priority"),
        ({"payload": 1, "priority": 1.5}, "priority"),
        ({"payload": 1, "priority": 1001}, "priority"),
        ({"payload": 1, "priority": -1001}, "priority"),
        ({"payload": 1, "priority": 10**30}, "priority"),
        ({"payload": 1, "delay_seconds": -1}, "delay_seconds"),
        ({"payload": 1, "delay_seconds": "5"}, "delay_seconds"),
        ({"payload": 1, "delay_seconds": 1e300}, "delay_seconds"),
        ({"payload": 1, "expires_in_seconds": -0.5}, "expires_in_seconds"),
        ({"payload": 1, "max_attempts": 0}, "max_attempts"),
        ({"payload": 1, "max_attempts": 10**9}, "max_attempts"),
        ({"payload": 1, "idempotency_key": 5}, "idempotency_key"),
        ({"payload": 1, "idempotency_key": ""}, "idempotency_key"),
        ({"payload": 1, "idempotency_key": "k" * 201}, "idempotency_key"),
        ({"messages": "nope"}, "messages"),
        ({"messages": []}, "messages"),
    ],
)
def test_enqueue__bad_fields_are_400_with_the_field(editor, enqueue_url, body, field):
    error = assert_error(editor.post(enqueue_url, body, format="json"), 400, "invalid")
    assert field in error["details"], error
    assert not Message.objects.exists()


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"42", b"null"])
def test_enqueue__a_body_that_is_not_an_object_is_400(editor, enqueue_url, body):
    assert_error(raw(editor, enqueue_url, body), 400, "invalid")
    assert not Message.objects.exists()


def test_enqueue__batch_entry_that_is_not_an_object_is_400_with_its_index(editor, enqueue_url):
    body = {"messages": [{"payload": 1}, 7]}
    error = assert_error(editor.post(enqueue_url, body, format="json"), 400, "invalid")
    assert error["details"]["index"] == 1
    assert not Message.objects.exists()


def test_claim__hostile_numbers_are_400(tree, queue, editor):
    url = q_url(tree["child"], rest="claim/")
    for body in ({"worker_id": "w", "visibility_timeout": 10**30},
                 {"worker_id": "w", "wait_seconds": 1e309}):  # fmt: skip
        assert_error(raw(editor, url, json.dumps(body).encode()), 400, "invalid")


def test_unknown_collection_is_404_and_writes_nothing(tree, queue, editor):
    response = editor.post(q_url(tree["child"], "nope", "messages/"), {"payload": 1}, format="json")
    assert_error(response, 404, "collection_not_found")
    assert not Message.objects.exists()


@pytest.mark.parametrize("method", ["put", "delete"])
def test_wrong_method_is_405(tree, queue, editor, method):
    response = getattr(editor, method)(q_url(tree["child"], rest="claim/"))
    assert_error(response, 405, "method_not_allowed")


@pytest.mark.parametrize(
    "url",
    [
        "/api/groups/a%00b/queues/jobs/stats/",
        "/api/groups/child/queues/j%00/stats/",
        "/api/groups/x%00/queues/",
        "/api/groups/child/queues/jobs/messages/%00/",
        "/api/apps/a%00/queues/jobs/stats/",
        "/api/apps/app-child/queues/j%00/messages/",
    ],
)
def test_nul_in_a_path_segment_is_404_not_a_database_error(tree, queue, editor, url):
    response = editor.get(url) if url.endswith("stats/") else editor.post(url, {}, format="json")
    assert response.status_code == 404, response.content
    assert response.json()["error"]["code"] == "not_found"


def test_enqueue__payload_and_messages_together_is_400(editor, enqueue_url):
    body = {"payload": 1, "messages": [{"payload": 2}]}
    error = assert_error(editor.post(enqueue_url, body, format="json"), 400, "invalid")
    assert "messages" in error["details"]
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    "query, field",
    [("page=", "page"), ("page=x", "page"), ("page=0", "page"), ("page=1&page=2", "page"),
     ("page_size=", "page_size"), ("page_size=-1", "page_size"), ("page_size=null", "page_size")],
)  # fmt: skip
def test_pagination__bad_page_parameters_are_400(tree, queue, editor, query, field):
    response = editor.get(q_url(tree["child"], rest="dead/") + "?" + query)
    assert field in assert_error(response, 400, "invalid")["details"]


def test_pagination__a_page_past_the_end_is_404(tree, queue, editor):
    assert_error(editor.get(q_url(tree["child"], rest="dead/") + "?page=9"), 404, "not_found")
