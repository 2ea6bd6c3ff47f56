"""Schemathesis over the live OpenAPI schema, in-process through Django's WSGI handler, as a member and as an
operator: every operation, with schema-conforming and malformed input, answers without a server error.

Each generated case runs inside a savepoint that is rolled back afterwards, so destructive operations (deletes,
quota changes) cannot leak into the next case or test, and a database error cannot poison the test's
transaction. Bounded: few examples per operation, no shrinking, no deadline (shared 2-core machine)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error

from tests import catalogue, factories
from tests.conftest import Org

pytestmark = pytest.mark.slow


@pytest.fixture
def wsgi_app() -> Iterator[WSGIHandler]:
    """Django's own handler, with per-request connection closing switched off as Django's test client does:
    the test's transaction must survive every request (pytest-django rolls it back after the test)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield WSGIHandler()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture(params=["member", "operator"])
def auth_headers(request: pytest.FixtureRequest, org: Org) -> dict[str, str]:
    user = getattr(org, request.param)
    return {"Authorization": f"Token {factories.token_for(user)}"}


@pytest.fixture
def api_schema(org: Org, wsgi_app: WSGIHandler, auth_headers: dict[str, str]) -> Any:
    # Something to find: the demo catalogue, so slugs and deletes meet real, referenced rows.
    catalogue.install_offerings()
    catalogue.install_images()
    return schemathesis.openapi.from_wsgi("/api/schema/?format=json", wsgi_app, headers=auth_headers)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=5,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_a_server_error(case: Any, auth_headers: dict[str, str]) -> None:
    savepoint = transaction.savepoint()
    try:
        case.call_and_validate(headers=auth_headers, checks=[not_a_server_error])
    finally:
        transaction.savepoint_rollback(savepoint)
