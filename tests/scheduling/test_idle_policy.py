"""A team's idle rules: set by its lead (or an operator) within the operators' bounds, refused in plain words
beyond them, audited, and read by the idle rule as set."""

from __future__ import annotations

from datetime import timedelta

import pytest

from portal.models import AuditEvent
from scheduling.quota.rules import idle_rules
from tests.conftest import Org, api_client_for

DEFAULTS = {
    "idle_threshold_percent": 5,
    "idle_window_minutes": 60,
    "idle_grace_minutes": 15,
    "keep_alive_hours": 4,
    "keep_alives_per_run": 2,
    "stuck_window_minutes": 120,
}


def url(org: Org) -> str:
    return f"/api/v1/teams/{org.alpha.pk}/idle-policy/"


def test_a_team_starts_with_the_defaults_and_its_members_may_read_them(org: Org) -> None:
    assert api_client_for(org.member).get(url(org)).json() == DEFAULTS
    rules = idle_rules(org.alpha.pk)
    assert (rules.policy.threshold, rules.policy.window, rules.keep_alives_per_run) == (0.05, timedelta(hours=1), 2)


def test_a_lead_changes_some_rules_and_the_rest_stay(org: Org) -> None:
    response = api_client_for(org.lead).put(
        url(org), {"idle_window_minutes": 90, "keep_alives_per_run": 0}, format="json"
    )
    assert response.status_code == 200, response.json()
    assert response.json() == DEFAULTS | {"idle_window_minutes": 90, "keep_alives_per_run": 0}
    rules = idle_rules(org.alpha.pk)
    assert rules.policy.window == timedelta(minutes=90) and rules.keep_alives_per_run == 0
    event = AuditEvent.objects.get(action="idle_policy.set")
    assert event.actor == org.lead and event.before and event.after
    assert (event.before["idle_window_minutes"], event.after["idle_window_minutes"]) == (60, 90)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("idle_window_minutes", 10, "The idle window must be between 30 and 1440"),
        ("idle_grace_minutes", 1, "The grace period must be between 5 and 1440"),
        ("idle_threshold_percent", 80, "The GPU-activity threshold must be between 1 and 30"),
        ("keep_alive_hours", 48, "One keep-alive must be between 1 and 12"),
        ("keep_alives_per_run", 9, "Keep-alives per start must be between 0 and 5"),
    ],
)
def test_rules_beyond_the_operators_bounds_are_refused_and_change_nothing(
    org: Org, field: str, value: int, words: str
) -> None:
    response = api_client_for(org.lead).put(url(org), {field: value}, format="json")
    assert response.status_code == 400
    assert words in response.json()["detail"]
    assert api_client_for(org.lead).get(url(org)).json() == DEFAULTS
    assert not AuditEvent.objects.filter(action="idle_policy.set").exists()


def test_the_bounds_are_the_operators_settings(org: Org, settings) -> None:
    settings.IDLE_WINDOW_MINUTES_MIN = 10
    assert api_client_for(org.lead).put(url(org), {"idle_window_minutes": 10}, format="json").status_code == 200


@pytest.mark.parametrize(("who", "status"), [("member", 403), ("finance", 403), ("outsider", 404), ("operator", 200)])
def test_only_leads_and_operators_set_them(org: Org, who: str, status: int) -> None:
    client = api_client_for(getattr(org, who))
    assert client.put(url(org), {"idle_grace_minutes": 30}, format="json").status_code == status
