from __future__ import annotations

from openapi_spec_validator import validate

from tests.conftest import Org, api_client_for


def test_it_serves_a_valid_openapi_3_schema(org: Org) -> None:
    response = api_client_for(org.member).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    validate(schema)
    assert {"/api/v1/me/", "/api/v1/teams/", "/api/v1/teams/{id}/members/"} <= set(schema["paths"])
