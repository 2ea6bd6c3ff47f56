"""Shared fixtures: personas in two teams, API clients that authenticate for real."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from portal.models import Membership, OrgRole, Team, User
from portal.queue import mark_started
from scheduling.benchmarks.measuring import SentTask, unsent_task_calls
from tests import factories
from tests.db_quiet import flush_through_deadlocks

# Fixtures shared across folders: headless Chromium, a real Prometheus, and the full stack (simulated
# cluster + worker).
pytest_plugins = ("tests.browser_fixtures", "tests.prometheus_fixtures", "tests.stack_fixtures")

flush_through_deadlocks()


@dataclass
class Org:
    """Alpha and beta are teams of one department. Charlie the outsider has no access to anything."""

    alpha: Team
    beta: Team
    member: User  # alpha member
    lead: User  # alpha lead, beta member
    beta_lead: User
    finance: User
    operator: User
    outsider: User

    def persona(self, name: str) -> User | None:
        return None if name == "anonymous" else getattr(self, name)


@pytest.fixture
def sent_tasks() -> Iterator[list[SentTask]]:
    """The tasks enqueued meanwhile, kept from the broker (and not run, even where tasks run eagerly)."""
    with unsent_task_calls() as calls:
        yield calls


@pytest.fixture(autouse=True)
def _no_pending_cycle() -> None:
    """Each test starts with no scheduling cycle marked as already requested (the mark lives in the cache,
    which in CI is Redis and outlives a test; clearing the whole cache would also drop the broker's queues)."""
    mark_started("scheduling.run_cycle")


@pytest.fixture(autouse=True)
def _without_the_session_workers_rows(request: pytest.FixtureRequest) -> None:
    """Each database test starts without what the session's Celery worker (the full-stack tests') commits to
    the test database between tests: the ledger's cursor at the real time (a test recording observations at
    earlier instants would find them stale), the open fleet rows, the loops' pass counts and the API error
    counts (a test making its own would collide with them). Deleted in the test's transaction, so back
    after it."""
    if "db" in request.fixturenames and "transactional_db" not in request.fixturenames:
        from portal.billing.models import CapacityInterval, LedgerCursor
        from scheduling.models import KubeApiErrorCount, LoopStat

        request.getfixturevalue("db")
        LedgerCursor.objects.all().delete()
        CapacityInterval.objects.filter(ended_at=None).delete()
        LoopStat.objects.all().delete()
        KubeApiErrorCount.objects.all().delete()


@pytest.fixture
def org(db: None) -> Org:
    department = factories.make_department(name="Research", slug="research", cost_centre="RES-1")
    alpha = factories.make_team(department, name="Alpha", slug="alpha")
    beta = factories.make_team(department, name="Beta", slug="beta")
    member = factories.make_user("alice", first_name="Alice")
    lead = factories.make_user("lena", first_name="Lena")
    beta_lead = factories.make_user("bert")
    finance = factories.grant(factories.make_user("fiona"), OrgRole.Role.FINANCE)
    operator = factories.grant(factories.make_user("oscar", is_staff=True), OrgRole.Role.OPERATOR)
    outsider = factories.make_user("charlie")
    factories.add_member(alpha, member)
    factories.add_member(alpha, lead, Membership.Role.LEAD)
    factories.add_member(beta, lead)
    factories.add_member(beta, beta_lead, Membership.Role.LEAD)
    return Org(alpha, beta, member, lead, beta_lead, finance, operator, outsider)


def api_client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {factories.token_for(user)}")
    return client
