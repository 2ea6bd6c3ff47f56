"""Billing pages in Chromium, offline: finance's chargeback draws its charts and its export buttons
download files that hold the totals; a lead's cost page draws the members and the budget burn-down; a
researcher sees prices on the request form and costs on the workspace pages."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlparse

import openpyxl  # type: ignore[import-untyped]
import pytest
from django.utils import timezone
from playwright.sync_api import Page, Route, expect

from portal.billing import actions
from portal.billing.ledger import RunningPod, record_capacity, record_pods, zone
from portal.billing.models import RateCardEntry
from portal.billing.periods import month_of
from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "billing-pages-pw"


@pytest.fixture
def billed(org: Org, settings, quiet_cluster_loops: None) -> Workspace:
    """This month alice held an H100 for two hours (8.00 at 4.00/h) and lena an A100 slice; a budget."""
    settings.NOTEBOOK_PROXY_URL = "http://notebooks.test"  # the owner's notebook link; no cluster needed here
    now = timezone.now()
    if month_of(now - timedelta(hours=2), zone()) != month_of(now, zone()):
        pytest.skip("the first two hours of a month: the figures below are for two hours inside this month")
    for user in (org.member, org.lead, org.finance):
        user.set_password(PASSWORD)
        user.save()
    offerings = install_offerings()
    actions.set_price(org.finance, gpu_model="H100-80GB-HBM3", hourly_price="4.00")
    actions.set_price(org.finance, gpu_model="A100-SXM4-80GB", hourly_price="2.80")
    # Prices apply from now on; move them back so that the two hours below are priced.
    RateCardEntry.objects.update(effective_from=now - timedelta(days=40))
    mine = make_workspace(org.alpha, org.member, offerings["h100-80gb-hbm3"], state="running")
    theirs = make_workspace(org.alpha, org.lead, offerings["a100-sxm4-80gb-1g-10gb"], state="running")
    pods = [RunningPod(f"uid-{w.pk}", f"ws-{w.pk}", w.pk) for w in (mine, theirs)]
    record_pods(now - timedelta(hours=2), pods)
    record_pods(now, pods)
    record_capacity(now - timedelta(hours=2), {"H100-80GB-HBM3": 2, "A100-SXM4-80GB": 1})
    record_capacity(now, {"H100-80GB-HBM3": 2, "A100-SXM4-80GB": 1})
    actions.set_budget(org.finance, org.alpha, amount="50", unit="money", policy="block_batch")
    return mine


def offline(page: Page, base_url: str) -> list[str]:
    """Refuse every request that leaves the live server; the list of what was refused."""
    host = urlparse(base_url).netloc
    refused: list[str] = []

    def route(r: Route) -> None:
        if urlparse(r.request.url).netloc == host:
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return refused


def test_finance_sees_the_charts_and_downloads_every_export(
    page: Page, live_server, org: Org, billed: Workspace
) -> None:
    refused = offline(page, live_server.url)
    log_in(page, live_server.url, org.finance.username, PASSWORD)
    page.goto(f"{live_server.url}/chargeback/?mode=full")
    expect(page.locator("#billing-charts .main-svg").first).to_be_visible()
    assert page.locator("#billing-charts .js-plotly-plot").count() >= 3
    held = Decimal(page.locator("#totals tr").first.locator("td").inner_text())
    assert held == Decimal("8.00") + (Decimal("2.80") * Decimal("0.1429") * 2).quantize(Decimal("0.01"))
    files = {}
    for name in ("CSV", "XLSX", "PDF"):
        with page.expect_download() as download:
            page.get_by_role("link", name=name, exact=True).click()
        files[name] = download.value.path().read_bytes()
        assert download.value.suggested_filename.startswith("chargeback-")
    rows = list(csv.DictReader(io.StringIO(files["CSV"].decode())))
    total = next(r for r in rows if r["section"] == "total")
    assert Decimal(total["total"]) == Decimal(page.locator("#total").inner_text())
    book = openpyxl.load_workbook(io.BytesIO(files["XLSX"]))
    assert "Chargeback" in book.sheetnames
    assert files["PDF"].startswith(b"%PDF")
    assert refused == []


def test_a_lead_sees_members_and_the_budget_burn_down(page: Page, live_server, org: Org, billed: Workspace) -> None:
    refused = offline(page, live_server.url)
    log_in(page, live_server.url, org.lead.username, PASSWORD)
    page.goto(f"{live_server.url}/teams/{org.alpha.pk}/")
    page.click("#team-costs-link")
    expect(page.locator("#member-costs")).to_contain_text("Alice")
    expect(page.locator("#member-costs")).to_contain_text("Lena")
    expect(page.locator("#budget-status")).to_contain_text("of 50.00 EUR")
    expect(page.locator("#cost-charts .main-svg").first).to_be_visible()
    assert page.locator("#cost-charts .js-plotly-plot").count() == 2  # members, burn-down
    assert refused == []


def test_a_researcher_sees_prices_and_costs(page: Page, live_server, org: Org, billed: Workspace) -> None:
    refused = offline(page, live_server.url)
    log_in(page, live_server.url, org.member.username, PASSWORD)
    page.goto(f"{live_server.url}/workspaces/new/")
    expect(page.locator('#offerings tr[data-slug="h100-80gb-hbm3"] .price')).to_have_text("4.00")
    page.goto(f"{live_server.url}/workspaces/")
    expect(page.locator("#month-total")).to_contain_text("8.00 EUR")
    page.goto(f"{live_server.url}/workspaces/{billed.pk}/")
    expect(page.locator("#cost")).to_contain_text("8.00 EUR")
    page.goto(f"{live_server.url}/teams/{org.alpha.pk}/costs/")
    expect(page.locator("#member-costs")).to_contain_text("Alice")
    expect(page.locator("#member-costs")).not_to_contain_text("Lena")  # a member sees only their own line
    page.goto(f"{live_server.url}/chargeback/")
    expect(page.locator("h1")).not_to_contain_text("Chargeback")  # not finance's page
    assert refused == []
