"""A lead looks at the team's quota chart and sets policy and member caps within bounds."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from portal.demo import PEOPLE, seed_demo_organisation
from portal.models import AuditEvent, Team, User
from scheduling.demo import seed_demo_catalogue
from scheduling.models import MemberCap
from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = {p.username: p.password for p in PEOPLE}


def test_a_lead_reads_the_chart_and_sets_policy_and_caps(page: Page, live_server, quiet_cluster_loops: None) -> None:
    seed_demo_organisation()
    seed_demo_catalogue()
    offerings = install_offerings()
    vision = Team.objects.get(slug="vision")
    Workspace.objects.create(
        name="nb", kind="notebook", team=vision, owner=User.objects.get(username="alice"),
        offering=offerings["h100-80gb-hbm3"], gpu_count=2, image="x/y:1", cpu_millis=1, memory_mib=1,
        max_runtime_seconds=3600, gpu_equivalents=Decimal(2), state="running",
        admitted_at=timezone.now() - timedelta(days=1), started_at=timezone.now() - timedelta(days=1),
    )  # fmt: skip
    log_in(page, live_server.url, "lena", PASSWORD["lena"])
    page.goto(f"{live_server.url}/teams/{vision.pk}/")
    page.click("#team-quota-link")
    expect(page.locator("#quota")).to_contain_text("H100-80GB-HBM3")
    expect(page.locator("#quota-charts .main-svg").first).to_be_visible()  # plotly drew it, offline
    page.click("#chart-window >> text=30 days")
    expect(page.locator("#chart-heading")).to_have_text("Last 30 days")
    legend = page.locator("#quota-charts .chart").first.locator(".legendtext")
    expect(legend).to_contain_text(["used", "borrowed", "lent", "guaranteed"])
    page.fill("#id_max_runtime_hours", "500")
    page.click("#policy-form button")
    expect(page.locator("[role=alert]")).to_contain_text("Operators allow at most 72 hours")
    page.fill("#id_default_runtime_hours", "4")
    page.fill("#id_max_runtime_hours", "24")
    page.click("#policy-form button")
    expect(page.locator("text=Default runtime 4 h, longest 24 h")).to_be_visible()
    page.select_option("#cap-form select[name=username]", "alice")
    page.select_option("#cap-form select[name=flavour]", "H100-80GB-HBM3")
    page.fill("#cap-form input[name=cap]", "2")
    page.click("#cap-form button")
    expect(page.locator("#member-caps")).to_contain_text("alice")
    assert MemberCap.objects.get().cap == 2
    assert set(AuditEvent.objects.values_list("action", flat=True)) == {"policy.set", "member_cap.set"}
    page.screenshot(path="/tmp/team_quota.png", full_page=True)


def test_a_member_sees_but_cannot_change(page: Page, live_server) -> None:
    seed_demo_organisation()
    vision = Team.objects.get(slug="vision")
    log_in(page, live_server.url, "alice", PASSWORD["alice"])
    page.goto(f"{live_server.url}/teams/{vision.pk}/quota/")
    expect(page.locator("#quota")).to_be_visible()
    expect(page.locator("#policy-form")).to_have_count(0)
    response = page.request.post(f"{live_server.url}/teams/{vision.pk}/quota/", form={"form": "policy"})
    assert response.status == 403
