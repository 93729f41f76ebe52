"""The OpenAPI document the server serves is valid OpenAPI 3 (issue 12 point 4)."""

from __future__ import annotations

from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError


def test_served_schema__validates_as_openapi_3(server):
    with server.client() as http:
        response = http.get("/api/schema/", params={"format": "json"})
    assert response.status_code == 200, response.text[:500]
    spec = response.json()
    assert spec["openapi"].startswith("3.")
    try:
        validate(spec)
    except OpenAPIValidationError as exc:
        raise AssertionError(f"invalid OpenAPI document: {exc}") from None
