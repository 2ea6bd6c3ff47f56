"""Role matrix for /api/v1/me/ and /api/v1/teams/: each persona gets exactly what it should."""

from __future__ import annotations

import pytest

from portal.models import AuditEvent, Membership
from tests.conftest import Org, api_client_for

PERSONAS = ("member", "lead", "beta_lead", "finance", "operator", "outsider", "anonymous")

# Which teams each persona sees in the list, and whether it may manage alpha / beta.
VISIBLE = {
    "member": {"alpha"},
    "lead": {"alpha", "beta"},
    "beta_lead": {"beta"},
    "finance": {"alpha", "beta"},
    "operator": {"alpha", "beta"},
    "outsider": set(),
}
# Status for adding a member to each team: 201 allowed, 403 visible but not allowed, 404 not visible.
ADD_STATUS = {
    "member": {"alpha": 403, "beta": 404},
    "lead": {"alpha": 201, "beta": 403},
    "beta_lead": {"alpha": 404, "beta": 201},
    "finance": {"alpha": 403, "beta": 403},
    "operator": {"alpha": 201, "beta": 201},
    "outsider": {"alpha": 404, "beta": 404},
    "anonymous": {"alpha": 401, "beta": 401},
}


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_answers_me_per_role(org: Org, persona: str) -> None:
    user = org.persona(persona)
    response = api_client_for(user).get("/api/v1/me/")
    if user is None:
        assert response.status_code == 401
        assert response.json()["code"] == "not_authenticated"
        return
    assert response.status_code == 200
    body = response.json()
    assert body["username"] == user.username
    assert body["org_roles"] == sorted(user.org_roles())
    expected_teams = {(m.team.slug, m.role) for m in Membership.objects.filter(user=user).select_related("team")}
    assert {(t["slug"], t["role"]) for t in body["teams"]} == expected_teams


@pytest.mark.parametrize("persona", PERSONAS)
def test_it_lists_only_visible_teams(org: Org, persona: str) -> None:
    response = api_client_for(org.persona(persona)).get("/api/v1/teams/")
    if persona == "anonymous":
        assert response.status_code == 401
        return
    assert response.status_code == 200
    assert {team["slug"] for team in response.json()["results"]} == VISIBLE[persona]


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("team_name", ["alpha", "beta"])
def test_it_shows_team_detail_or_404(org: Org, persona: str, team_name: str) -> None:
    team = getattr(org, team_name)
    response = api_client_for(org.persona(persona)).get(f"/api/v1/teams/{team.pk}/")
    if persona == "anonymous":
        assert response.status_code == 401
    elif team_name in VISIBLE[persona]:
        assert response.status_code == 200
        assert response.json()["slug"] == team_name
    else:
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("team_name", ["alpha", "beta"])
def test_it_lets_only_leads_and_operators_add_members(org: Org, persona: str, team_name: str) -> None:
    team = getattr(org, team_name)
    response = api_client_for(org.persona(persona)).post(
        f"/api/v1/teams/{team.pk}/members/", {"username": "charlie"}, format="json"
    )
    expected = ADD_STATUS[persona][team_name]
    assert response.status_code == expected, response.json()
    added = Membership.objects.filter(team=team, user=org.outsider).exists()
    assert added == (expected == 201)
    assert AuditEvent.objects.filter(action="membership.add").exists() == (expected == 201)


def test_it_lets_a_lead_change_roles_and_remove_members_of_their_team(org: Org) -> None:
    client = api_client_for(org.lead)
    response = client.patch(f"/api/v1/teams/{org.alpha.pk}/members/alice/", {"role": "lead"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"username": "alice", "full_name": "Alice", "role": "lead"}
    response = client.delete(f"/api/v1/teams/{org.alpha.pk}/members/alice/")
    assert response.status_code == 204
    assert not Membership.objects.filter(team=org.alpha, user=org.member).exists()
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor__username", "before", "after"))
    assert actions == [
        (
            "membership.role",
            "lena",
            {"team": "alpha", "user": "alice", "role": "member"},
            {"team": "alpha", "user": "alice", "role": "lead"},
        ),
        ("membership.remove", "lena", {"team": "alpha", "user": "alice", "role": "lead"}, None),
    ]


def test_it_stops_a_lead_from_changing_another_team(org: Org) -> None:
    client = api_client_for(org.lead)  # lena leads alpha and is a plain member of beta
    response = client.delete(f"/api/v1/teams/{org.beta.pk}/members/bert/")
    assert response.status_code == 403
    assert "leads" in response.json()["detail"]
    response = client.patch(f"/api/v1/teams/{org.beta.pk}/members/lena/", {"role": "lead"}, format="json")
    assert response.status_code == 403
    assert Membership.objects.get(team=org.beta, user=org.lead).role == "member"
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"username": "nobody"}, "username: No active user named 'nobody'."),
        ({"username": "alice"}, "username: alice is already a member of Alpha."),
        ({"username": "charlie", "role": "boss"}, 'role: "boss" is not a valid choice.'),
        ({}, "username: This field is required."),
    ],
)
def test_it_rejects_bad_member_input_with_a_clear_message(org: Org, payload: dict[str, str], message: str) -> None:
    before = Membership.objects.count()
    response = api_client_for(org.lead).post(f"/api/v1/teams/{org.alpha.pk}/members/", payload, format="json")
    assert response.status_code == 400
    assert response.json()["detail"] == message
    assert response.json()["code"] == "invalid"
    assert Membership.objects.count() == before


def test_it_keeps_at_least_one_lead(org: Org) -> None:
    client = api_client_for(org.lead)
    response = client.delete(f"/api/v1/teams/{org.alpha.pk}/members/lena/")
    assert response.status_code == 400
    assert response.json()["detail"] == "username: lena is the last lead of Alpha; appoint another first."
    response = client.patch(f"/api/v1/teams/{org.alpha.pk}/members/lena/", {"role": "member"}, format="json")
    assert response.status_code == 400
    assert Membership.objects.get(team=org.alpha, user=org.lead).role == "lead"


def test_it_returns_404_for_a_non_numeric_or_missing_team(org: Org) -> None:
    client = api_client_for(org.operator)
    assert client.get("/api/v1/teams/999999/").status_code == 404
    assert client.post("/api/v1/teams/999999/members/", {"username": "charlie"}, format="json").status_code == 404


def test_it_lists_teams_without_n_plus_one_queries(org: Org, django_assert_max_num_queries) -> None:
    from tests import factories

    for _ in range(10):
        team = factories.make_team(org.alpha.department)
        factories.add_member(team, factories.make_user())
    client = api_client_for(org.operator)
    with django_assert_max_num_queries(8):
        response = client.get("/api/v1/teams/")
    assert response.json()["count"] == 12
