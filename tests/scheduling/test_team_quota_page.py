"""The team quota page's chart: used, borrowed and lent per flavour, its window, and its query count."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.models import Team, User
from scheduling.models import TeamQuota
from tests import factories
from tests.catalogue import install_offerings
from tests.conftest import Org
from workspaces.models import GpuOffering, Workspace

H100 = "H100-80GB-HBM3"
A100 = "A100-SXM4-80GB"


def hold(team: Team, owner: User, offering: GpuOffering, units: str, *, borrowing: bool = False) -> Workspace:
    """A running workspace admitted two hours ago."""
    since = timezone.now() - timedelta(hours=2)
    return Workspace.objects.create(
        name=f"w{Workspace.objects.count()}", kind="job" if borrowing else "notebook", team=team, owner=owner,
        offering=offering, image="x/y:1", cpu_millis=1, memory_mib=1, max_runtime_seconds=3600,
        gpu_equivalents=Decimal(units), borrowing=borrowing, state="running", admitted_at=since, started_at=since,
    )  # fmt: skip


def quota(team: Team, flavour: str, guaranteed: int, borrow_limit: int = 0) -> None:
    TeamQuota.objects.create(
        team=team, flavour=flavour, guaranteed=Decimal(guaranteed), borrow_limit=Decimal(borrow_limit)
    )


def figures(html: str) -> list[dict[str, Any]]:
    found = re.search(r'<script id="quota-figures" type="application/json">(.*?)</script>', html, re.S)
    assert found, "the page carries no figures"
    return list(json.loads(found.group(1)))


def last(figure: dict[str, Any], name: str) -> float:
    return float(next(t for t in figure["data"] if t["name"] == name)["y"][-1])


@pytest.fixture
def borrowing_department(org: Org) -> dict[str, GpuOffering]:
    """Alpha uses its whole guarantee of 2 and borrows 1 more; beta, of the same department, uses 1 of its 4."""
    offerings = install_offerings()
    h100 = offerings["h100-80gb-hbm3"]
    quota(org.alpha, H100, 2, borrow_limit=2)
    quota(org.beta, H100, 4)
    hold(org.alpha, org.member, h100, "2")
    hold(org.alpha, org.member, h100, "1", borrowing=True)
    hold(org.beta, org.beta_lead, h100, "1")
    return offerings


def test_the_chart_shows_used_borrowed_and_lent(org: Org, borrowing_department: dict[str, GpuOffering]) -> None:
    client = Client()
    client.force_login(org.lead)  # leads alpha, member of beta
    alpha = figures(client.get(f"/teams/{org.alpha.pk}/quota/").content.decode())
    beta = figures(client.get(f"/teams/{org.beta.pk}/quota/").content.decode())
    names = {t["name"] for t in alpha[0]["data"]}
    assert {"used", "borrowed", "lent", "guaranteed"} <= names
    assert (last(alpha[0], "used"), last(alpha[0], "borrowed"), last(alpha[0], "lent")) == (3.0, 1.0, 0.0)
    assert (last(beta[0], "used"), last(beta[0], "borrowed"), last(beta[0], "lent")) == (1.0, 0.0, 1.0)


def test_teams_of_other_departments_borrow_nothing_from_this_one(
    org: Org, borrowing_department: dict[str, GpuOffering]
) -> None:
    elsewhere = factories.make_team()
    quota(elsewhere, H100, 0, borrow_limit=4)
    hold(elsewhere, org.outsider, borrowing_department["h100-80gb-hbm3"], "3", borrowing=True)
    client = Client()
    client.force_login(org.beta_lead)
    assert last(figures(client.get(f"/teams/{org.beta.pk}/quota/").content.decode())[0], "lent") == 1.0


@pytest.mark.parametrize(("query", "days"), [("", 7), ("?days=1", 1), ("?days=7", 7), ("?days=30", 30)])
def test_the_lead_picks_the_window(
    org: Org, borrowing_department: dict[str, GpuOffering], query: str, days: int
) -> None:
    client = Client()
    client.force_login(org.lead)
    response = client.get(f"/teams/{org.alpha.pk}/quota/{query}")
    assert response.status_code == 200
    html = response.content.decode()
    assert f"Last {days} day" in html
    x = figures(html)[0]["data"][0]["x"]
    span = datetime.fromisoformat(x[-1]) - datetime.fromisoformat(x[0])
    assert span == timedelta(days=days)


@pytest.mark.parametrize("bad", ["2", "abc", "-7", "7.5", "", "1e3"])
def test_a_bad_window_is_explained_and_the_default_shown(org: Org, bad: str) -> None:
    client = Client()
    client.force_login(org.lead)
    response = client.get(f"/teams/{org.alpha.pk}/quota/", {"days": bad})
    assert response.status_code == 400
    html = response.content.decode()
    assert "The chart covers 1, 7 or 30 days" in html
    assert "Last 7 days" in html


def test_saving_a_policy_keeps_the_window(org: Org) -> None:
    client = Client()
    client.force_login(org.lead)
    response = client.post(
        f"/teams/{org.alpha.pk}/quota/?days=30",
        {"form": "policy", "default_runtime_hours": "4", "max_runtime_hours": "24"},
    )
    assert response.status_code == 302
    assert response["Location"] == f"/teams/{org.alpha.pk}/quota/?days=30"


def page_queries(client: Client, team: Team) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/teams/{team.pk}/quota/?days=30").status_code == 200
    return len(queries)


def test_the_page_queries_do_not_grow_with_teams_workspaces_or_flavours(
    org: Org, borrowing_department: dict[str, GpuOffering]
) -> None:
    client = Client()
    client.force_login(org.lead)
    page_queries(client, org.alpha)  # warm-up: per-process caches (content types, sessions)
    before = page_queries(client, org.alpha)
    h100, mig = borrowing_department["h100-80gb-hbm3"], borrowing_department["a100-sxm4-80gb-1g-10gb"]
    quota(org.alpha, A100, 1, borrow_limit=1)
    for _ in range(8):
        team = factories.make_team(org.alpha.department)
        quota(team, H100, 1, borrow_limit=2)
        quota(team, A100, 1, borrow_limit=2)
        for _ in range(3):
            hold(team, org.outsider, h100, "1", borrowing=True)
            hold(team, org.outsider, mig, "0.1429", borrowing=True)
        hold(org.alpha, org.member, mig, "0.1429")
        hold(org.alpha, org.member, h100, "0.5", borrowing=True)
    after = page_queries(client, org.alpha)
    assert after == before
    assert len(figures(client.get(f"/teams/{org.alpha.pk}/quota/").content.decode())) == 2
