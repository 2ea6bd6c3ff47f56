"""The alerts page in headless Chromium, per demo role: operators see every alert and the live stalled-loop
banner (also on the cluster page), a lead their teams' alerts only, nobody else a menu entry or the page; no
button on it. Screenshots go to /tmp/shots/alerts-*.png."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from portal.alerts.models import OpsAlert, OpsAlertNotice
from portal.demo import PEOPLE, seed_demo_organisation
from portal.models import Team
from scheduling.models import LoopStat
from tests.browser_fixtures import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORDS = {person.username: person.password for person in PEOPLE}
SHOTS = Path("/tmp/shots")


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"alerts-{name}.png"), full_page=True)


@pytest.fixture
def demo(live_server: object, quiet_cluster_loops: None) -> None:
    seed_demo_organisation()
    now = timezone.now()
    vision, platform, language = (Team.objects.get(slug=s) for s in ("vision", "platform-ml", "language"))

    def alert(key: str, kind: str, severity: str, team: Team | None, message: str, **times: object) -> OpsAlert:
        return OpsAlert.objects.create(
            key=key, kind=kind, severity=severity, team=team, checked_at=now, message=message, **times
        )

    firing = {"pending_since": now - timedelta(minutes=25), "firing_since": now - timedelta(minutes=20)}
    alert("within_quota:H100:vision", "within_quota", "critical", vision,
          "2 request(s) of Vision for H100-80GB-HBM3 within the team's guarantee waiting, the oldest for 25 min "
          "(threshold 15 min): the cluster lacks the capacity the guarantees promise.", **firing)  # fmt: skip
    alert("idle_team:platform", "idle_team", "warning", platform,
          "55% of the 4 measured GPU-equivalents Platform ML holds are idle (threshold 40 %).", **firing)  # fmt: skip
    alert("contention:H100", "contention", "warning", None,
          "Demand for H100-80GB-HBM3 is 19 GPU-equivalents (held plus queued) against 16 GPUs in the cluster.",
          **firing)  # fmt: skip
    old = alert("idle_team:language", "idle_team", "warning", language, "",
                firing_since=now - timedelta(hours=5), resolved_at=now - timedelta(hours=4))  # fmt: skip
    OpsAlertNotice.objects.create(
        alert=old, change="resolved", episode=now - timedelta(hours=5), at=now - timedelta(hours=4),
        message="62% of the 2 measured GPU-equivalents Language holds are idle (threshold 40 %).",
    )  # fmt: skip
    # A loop that another test's in-process worker left running may have written its row already.
    stalled = now - timedelta(minutes=9)
    LoopStat.objects.update_or_create(loop="scheduling_cycle", defaults={"last_finished_at": stalled})
    LoopStat.objects.update_or_create(loop="reconcile", defaults={"last_finished_at": now})


def test_operators_see_every_alert_and_the_stalled_loop(page: Page, live_server, demo: None) -> None:
    log_in(page, live_server.url, "oscar", PASSWORDS["oscar"])
    page.click("[data-nav=alerts]")
    expect(page.locator("h1")).to_have_text("Alerts")
    expect(page.locator(".stalled-loop[data-loop=scheduling_cycle]")).to_contain_text("9 min ago")
    rows = page.locator("#firing tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("Critical")  # critical first
    expect(rows.first).to_contain_text("Vision")
    expect(page.locator("#firing tr[data-kind=contention]")).to_contain_text("Portal")
    expect(page.locator("#resolved tbody tr")).to_contain_text("Language")
    expect(page.locator("main button, main form")).to_have_count(0)
    shot(page, "operator")
    page.click("[data-nav=cluster]")
    expect(page.locator(".stalled-loop[data-loop=scheduling_cycle]")).to_be_visible()
    shot(page, "operator-cluster")


def test_a_lead_sees_only_their_teams(page: Page, live_server, demo: None) -> None:
    log_in(page, live_server.url, "lena", PASSWORDS["lena"])  # lead of Vision and Language
    page.click("[data-nav=alerts]")
    expect(page.locator("#firing tbody tr")).to_have_count(1)
    expect(page.locator("#firing tbody tr")).to_contain_text("Vision")
    expect(page.locator("#resolved tbody tr")).to_contain_text("Language")
    expect(page.locator("main")).not_to_contain_text("Platform ML")
    expect(page.locator("main")).not_to_contain_text("Demand for")
    expect(page.locator(".stalled-loop")).to_have_count(0)  # the platform's health is the operators'
    expect(page.locator("main button, main form")).to_have_count(0)
    shot(page, "lead")


@pytest.mark.parametrize("username", ["alice", "fiona"])
def test_others_have_no_alerts(page: Page, live_server, demo: None, username: str) -> None:
    log_in(page, live_server.url, username, PASSWORDS[username])
    expect(page.locator("#main-nav")).to_be_visible()
    expect(page.locator("[data-nav=alerts]")).to_have_count(0)
    response = page.goto(f"{live_server.url}/alerts/")
    assert response is not None and response.status == 403
    shot(page, f"{username}-refused")
