"""The owner's detail page of a running notebook that the idle rule warned: the activity sparkline, the idle
banner counting down to the reclaim, and the keep-alive button that works; the lead sees the banner only."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from scheduling.models import ActivitySample
from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "activity-page-pw"


@pytest.fixture
def warned_notebook(org: Org, settings, quiet_cluster_loops: None) -> Workspace:
    settings.NOTEBOOK_PROXY_URL = "http://notebooks.test"  # the owner's link; no cluster needed here
    for user in (org.member, org.lead):
        user.set_password(PASSWORD)
        user.save()
    now = timezone.now()
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    notebook = make_workspace(
        org.alpha, org.member, offering, state="running", started_at=now - timedelta(hours=2),
        idle_warned_at=now - timedelta(minutes=2),
    )  # fmt: skip
    ActivitySample.objects.bulk_create(
        ActivitySample(
            workspace=notebook, at=now - timedelta(seconds=30 * i), seconds=30, gpu_seconds=30,
            source="prometheus", gpu_active=0.6 if i > 150 else 0.01, gpu_observed_at=now - timedelta(seconds=30 * i),
            fb_used_mib=2500.0, fb_total_mib=9984.0, kernels=1, busy_kernels=0, connections=0,
            last_activity=now - timedelta(minutes=76),
        )
        for i in range(240)
    )  # fmt: skip
    return notebook


def test_owner_sees_the_sparkline_and_countdown_and_keeps_it_alive(
    page: Page, live_server, org: Org, warned_notebook: Workspace
) -> None:
    log_in(page, live_server.url, org.member.username, PASSWORD)
    page.goto(f"{live_server.url}/workspaces/{warned_notebook.pk}/")
    banner = page.locator("#idle-banner")
    expect(banner).to_contain_text("it will be reclaimed at")
    countdown = page.locator("#idle-countdown")
    expect(countdown).to_contain_text("min")
    first = countdown.inner_text()
    page.wait_for_timeout(1500)
    assert countdown.inner_text() != first  # it counts down
    expect(page.locator("#activity-chart .main-svg").first).to_be_visible()  # Plotly drew the sparkline
    expect(page.locator("#gpu-active")).to_have_text("1 %")
    page.screenshot(path="/tmp/activity-owner.png", full_page=True)
    page.click("#keep-alive")
    expect(page.locator(".messages")).to_contain_text("Kept alive until")
    expect(page.locator("#kept-alive")).to_be_visible()
    expect(page.locator("#activity")).to_contain_text("1 keep-alive left this run")  # the default 2 per run
    assert Workspace.objects.get(pk=warned_notebook.pk).keep_alives_used == 1


def test_lead_sees_the_banner_without_a_keep_alive_button(
    page: Page, live_server, org: Org, warned_notebook: Workspace
) -> None:
    log_in(page, live_server.url, org.lead.username, PASSWORD)
    page.goto(f"{live_server.url}/workspaces/{warned_notebook.pk}/")
    expect(page.locator("#idle-banner")).to_be_visible()
    expect(page.locator("#keep-alive")).to_have_count(0)
    page.screenshot(path="/tmp/activity-lead.png", full_page=True)


def test_an_open_page_asks_for_the_workspace_every_2_s_for_events_and_logs_every_10_s_and_not_while_hidden(
    page: Page, live_server, org: Org, warned_notebook: Workspace
) -> None:
    # Each of the page's calls counts against its viewer's API rate (API_THROTTLE_USER).
    log_in(page, live_server.url, org.member.username, PASSWORD)
    api = f"/api/v1/workspaces/{warned_notebook.pk}/"
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url.split(live_server.url, 1)[-1]))
    page.goto(f"{live_server.url}/workspaces/{warned_notebook.pk}/")
    page.wait_for_timeout(11_000)
    assert 5 <= asked.count(api) <= 7  # at 0, 2, 4 ... 10 s
    for slow in ("cluster-events/", "logs/"):
        assert 2 <= asked.count(api + slow) <= 3  # at 0 and 10 s
    # A hidden tab asks for nothing.
    page.evaluate("Object.defineProperty(document, 'hidden', {value: true, configurable: true})")
    page.wait_for_timeout(500)
    before = len(asked)
    page.wait_for_timeout(4_500)
    assert asked[before:] == []
