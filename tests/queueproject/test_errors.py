"""The error envelope for every error, and the strict JSON parser."""

import json

import pytest
from django.test import Client, override_settings
from rest_framework.test import APIClient

from principals.models import Role
from tests.conftest import ApiResponse, bearer
from tests.factories import make_token, member

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.queueproject.urls_echo")]

ECHO = "/api/test-echo/"


def assert_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], dict)
    return body["error"]


def post_raw(body: bytes, content_type: str = "application/json") -> ApiResponse:
    # Django's generic() sends bytes as they are; the DRF stubs type ``data`` as str only.
    return APIClient().generic("POST", ECHO, body, content_type=content_type)  # type: ignore[arg-type]


def test_echo_accepts_valid_json():
    response = post_raw(b'{"a": [1, 2, {"b": "c"}]}')
    assert response.status_code == 200
    assert response.json() == {"data": {"a": [1, 2, {"b": "c"}]}}


def test_routing_404_is_the_envelope(api):
    assert_error(api.get("/api/no/such/thing/"), 404, "not_found")


def test_csrf_failure_under_api_is_the_envelope():
    response = Client(enforce_csrf_checks=True).post("/api/test-plain/", {})
    error = assert_error(response, 403, "permission_denied")
    assert "CSRF" in error["message"]


def test_csrf_failure_elsewhere_is_djangos_page():
    response = Client(enforce_csrf_checks=True).post("/test-plain/", {})
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")


def test_routing_404_for_writes_skips_the_csrf_check():
    response = Client(enforce_csrf_checks=True).delete("/api/no/such/thing/")
    assert_error(response, 404, "not_found")


def test_405_is_the_envelope(tree):
    user = member(tree["root"], Role.VIEWER)
    client = APIClient()
    client.force_authenticate(user)
    assert_error(client.delete("/api/groups/"), 405, "method_not_allowed")


def test_401_has_www_authenticate(api):
    response = api.get("/api/groups/")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("secret", ["nope", "dq_" + "x" * 43, ""])
def test_bad_tokens_are_401(secret):
    response = bearer(secret).get("/api/groups/")
    assert_error(response, 401, "not_authenticated")


def test_revoked_and_expired_tokens_are_401(tree):
    from django.utils import timezone

    from principals.services import token_revoke

    user = member(tree["root"], Role.VIEWER)
    token, secret = make_token(user=user, scopes=["queue:read"])
    assert bearer(secret).get("/api/groups/").status_code == 200
    token_revoke(tokens=[token])
    assert_error(bearer(secret).get("/api/groups/"), 401, "not_authenticated")
    token2, secret2 = make_token(user=user, scopes=["queue:read"])
    token2.expires_at = timezone.now()
    token2.save()
    assert_error(bearer(secret2).get("/api/groups/"), 401, "not_authenticated")


def test_malformed_json_is_400():
    assert_error(post_raw(b'{"a": '), 400, "invalid")


def test_invalid_utf8_is_400():
    assert_error(post_raw(b'{"a": "\xff\xfe"}'), 400, "invalid")


@pytest.mark.parametrize(
    "body", [b'{"a": NaN}', b"[Infinity]", b"[1e400]", b'{"a": "x\\u0000"}', b'["\\ud800"]']
)
def test_values_a_database_cannot_store_are_400(body):
    assert_error(post_raw(body), 400, "invalid")


def test_huge_integer_is_400():
    assert_error(post_raw(b"[" + b"9" * 5000 + b"]"), 400, "invalid")


def test_nesting_is_limited_to_64_levels():
    ok = "[" * 64 + "]" * 64
    assert post_raw(ok.encode()).status_code == 200
    deep = "[" * 65 + "]" * 65
    assert_error(post_raw(deep.encode()), 400, "invalid")
    nested_objects = '{"a":' * 65 + "1" + "}" * 65
    assert_error(post_raw(nested_objects.encode()), 400, "invalid")


def test_hostile_nesting_does_not_crash():
    assert_error(post_raw(b"[" * 100000), 400, "invalid")
    assert_error(post_raw(b"[" * 100000 + b"]" * 100000), 400, "invalid")


def test_non_json_content_type_is_415():
    assert_error(
        post_raw(b"a=1", content_type="application/x-www-form-urlencoded"),
        415,
        "unsupported_media_type",
    )


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_body_over_the_limit_is_413():
    body = json.dumps({"a": "x" * 2000}).encode()
    assert_error(post_raw(body), 413, "payload_too_large")


def test_server_error_on_api_path_is_the_envelope(rf):
    from queueproject.exceptions import server_error

    response = server_error(rf.get("/api/x/"))
    assert response.status_code == 500
    assert json.loads(response.content)["error"]["code"] == "internal_error"


@override_settings(
    REST_FRAMEWORK={
        "DEFAULT_AUTHENTICATION_CLASSES": ["principals.authentication.BearerTokenAuthentication"],
        "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
        "DEFAULT_PARSER_CLASSES": ["queueproject.parsers.StrictJSONParser"],
        "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
        "EXCEPTION_HANDLER": "queueproject.exceptions.api_exception_handler",
        "DEFAULT_THROTTLE_CLASSES": ["principals.throttling.PrincipalRateThrottle"],
        "DEFAULT_THROTTLE_RATES": {"principal": "3/min"},
    }
)
def test_throttling_is_429_with_retry_after(tree):
    user = member(tree["root"], Role.VIEWER)
    _, secret = make_token(user=user, scopes=["queue:read"])
    client = bearer(secret)
    for _ in range(3):
        assert client.get("/api/groups/").status_code == 200
    response = client.get("/api/groups/")
    error = assert_error(response, 429, "throttled")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert error["details"]["retry_after_seconds"] == int(response["Retry-After"])
    # another principal has its own budget
    _, other = make_token(user=member(tree["root"], Role.VIEWER), scopes=["queue:read"])
    assert bearer(other).get("/api/groups/").status_code == 200
