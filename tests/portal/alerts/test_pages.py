"""Who sees alerts: operators all of them, a lead their teams' only, nobody else any; the live stalled-loop
banner on the cluster and alerts pages; the notification settings offer operations kinds only to those who
get them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.alerts.models import OpsAlert, OpsAlertNotice
from portal.models import Team, User
from portal.navigation import menu_for
from scheduling.models import LoopStat
from tests.conftest import Org, api_client_for
from workspaces.notifications import delivery
from workspaces.notifications.kinds import Kind
from workspaces.notifications.models import NotificationPreference


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alerts(org: Org) -> dict[str, OpsAlert]:
    now = timezone.now()

    def firing(key: str, kind: str, severity: str, team: Team | None, message: str) -> OpsAlert:
        return OpsAlert.objects.create(
            key=key, kind=kind, severity=severity, team=team, pending_since=now - timedelta(minutes=20),
            firing_since=now - timedelta(minutes=15), checked_at=now, message=message,
        )  # fmt: skip

    made = {
        "alpha": firing("within_quota:H100:alpha", "within_quota", "critical", org.alpha, "Alpha waits."),
        "beta": firing("idle_team:beta", "idle_team", "warning", org.beta, "Beta idles."),
        "portal": firing("contention:H100", "contention", "warning", None, "Demand is high."),
    }
    old = OpsAlert.objects.create(
        key="within_quota:A100:alpha", kind="within_quota", severity="critical", team=org.alpha,
        firing_since=now - timedelta(hours=3), resolved_at=now - timedelta(hours=2), checked_at=now,
    )  # fmt: skip
    OpsAlertNotice.objects.create(
        alert=old, change="resolved", episode=now - timedelta(hours=3), at=now - timedelta(hours=2),
        message="Alpha waited for A100.",
    )  # fmt: skip
    return made


def test_operators_see_every_alert_firing_and_resolved(org: Org, alerts: dict[str, OpsAlert]) -> None:
    page = client_for(org.operator).get("/alerts/").content.decode()
    for text in ("Alpha waits.", "Beta idles.", "Demand is high.", "Alpha waited for A100.", "<td>60 min</td>"):
        assert text in page
    assert page.index("Alpha waits.") < page.index("Beta idles.")  # critical first
    assert "<button" not in page.split("<main>")[1]  # nothing to press


def test_a_lead_sees_only_the_teams_they_lead(org: Org, alerts: dict[str, OpsAlert]) -> None:
    page = client_for(org.lead).get("/alerts/").content.decode()  # lead of alpha, member of beta
    assert "Alpha waits." in page and "Alpha waited for A100." in page
    assert "Beta idles." not in page and "Demand is high." not in page
    beta = client_for(org.beta_lead).get("/alerts/").content.decode()
    assert "Beta idles." in beta and "Alpha waits." not in beta


@pytest.mark.parametrize("persona", ["member", "finance", "outsider"])
def test_nobody_else_sees_alerts(org: Org, alerts: dict[str, OpsAlert], persona: str) -> None:
    user = org.persona(persona)
    assert user is not None
    assert client_for(user).get("/alerts/").status_code == 403
    assert "alerts" not in [item["key"] for item in menu_for(user)]


def test_the_menu_offers_alerts_to_operators_and_leads(org: Org) -> None:
    assert "alerts" in [item["key"] for item in menu_for(org.operator)]
    assert "alerts" in [item["key"] for item in menu_for(org.lead)]
    assert Client().get("/alerts/").status_code == 302  # to the login page


def test_the_cluster_page_shows_a_stalled_loop_live(org: Org) -> None:
    operator = client_for(org.operator)
    LoopStat.objects.create(loop="reconcile", last_finished_at=timezone.now() - timedelta(seconds=10))
    LoopStat.objects.create(loop="scheduling_cycle", last_finished_at=timezone.now() - timedelta(seconds=20))
    assert 'class="error stalled-loop"' not in operator.get("/cluster/").content.decode()
    LoopStat.objects.filter(loop="reconcile").update(last_finished_at=timezone.now() - timedelta(minutes=12))
    page = operator.get("/cluster/").content.decode()  # no check has run: it is computed for the page
    assert 'data-loop="reconcile"' in page and "12 min ago" in page
    assert 'data-loop="scheduling_cycle"' not in page
    assert 'data-loop="reconcile"' in operator.get("/alerts/").content.decode()
    assert 'data-loop="reconcile"' not in client_for(org.lead).get("/alerts/").content.decode()


def test_an_operations_notification_in_the_api(org: Org, alerts: dict[str, OpsAlert]) -> None:
    notice = OpsAlertNotice.objects.create(
        alert=alerts["portal"], change="fired", episode=timezone.now(), at=timezone.now(), message="Demand is high."
    )
    delivery.deliver_ops_alert(notice.pk)
    found = api_client_for(org.operator).get("/api/v1/notifications/").json()["results"]
    assert [(n["kind"], n["team"], n["workspace"]) for n in found] == [(Kind.OPS_WARNING, None, None)]
    assert found[0]["link"].endswith("/alerts/")
    assert api_client_for(org.lead).get("/api/v1/notifications/").json()["results"] == []
    page = client_for(org.operator).get("/notifications/").content.decode()
    assert "Warning: Demand above capacity. Demand is high." in page and ">Portal</a>" in page


def test_settings_offer_operations_kinds_only_to_who_gets_them(org: Org) -> None:
    assert Kind.OPS_CRITICAL.value in client_for(org.operator).get("/notifications/settings/").content.decode()
    assert Kind.OPS_CRITICAL.value in client_for(org.lead).get("/notifications/settings/").content.decode()
    member = client_for(org.member)
    assert Kind.OPS_CRITICAL.value not in member.get("/notifications/settings/").content.decode()
    response = member.post("/notifications/settings/", {"email_kinds": ["failed"]})
    assert response.status_code == 302
    saved = NotificationPreference.objects.get(user=org.member)
    assert saved.email_kinds == ["failed"]  # an unsaved default is not kept: like a kind added later
    NotificationPreference.objects.filter(pk=saved.pk).update(email_kinds=["failed", Kind.OPS_WARNING.value])
    member.post("/notifications/settings/", {"email_kinds": ["reclaimed"]})  # a former lead's choice
    saved.refresh_from_db()
    assert saved.email_kinds == ["reclaimed", Kind.OPS_WARNING.value]  # kept: they could not untick it here
