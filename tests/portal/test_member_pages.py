"""A team's leads (and operators) manage its members on the team page: add by username, change a role,
remove; each change audited as the API's are, bad input answered in plain words, everyone else refused."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.models import AuditEvent, Membership, User
from tests import factories
from tests.conftest import Org


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(client: Client, org: Org, **data: str) -> str:
    response = client.post(f"/teams/{org.alpha.pk}/members/", data, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def role_of(org: Org, user: User) -> str | None:
    membership = Membership.objects.filter(team=org.alpha, user=user).first()
    return membership.role if membership else None


@pytest.mark.parametrize(("who", "sees"), [("lead", True), ("operator", True), ("member", False), ("finance", False)])
def test_only_leads_and_operators_see_the_controls(org: Org, who: str, sees: bool) -> None:
    html = client_for(getattr(org, who)).get(f"/teams/{org.alpha.pk}/").content.decode()
    assert ('id="add-member"' in html) == sees
    assert ('class="member-remove"' in html) == sees
    assert ('class="member-role"' in html) == sees


def test_a_lead_adds_re_roles_and_removes_a_member_each_audited(org: Org) -> None:
    newcomer = factories.make_user("nina")
    client = client_for(org.lead)
    html = post(client, org, op="add", username="nina", role="member")
    assert "Added nina to Alpha as member." in html
    assert role_of(org, newcomer) == "member"
    html = post(client, org, op="role", username="nina", role="lead")
    assert "nina is now a lead of Alpha." in html
    assert role_of(org, newcomer) == "lead"
    html = post(client, org, op="remove", username="nina")
    assert "Removed nina from Alpha." in html
    assert role_of(org, newcomer) is None
    events = list(AuditEvent.objects.filter(team=org.alpha).order_by("at", "id"))
    assert [(e.action, e.actor) for e in events] == [
        ("membership.add", org.lead), ("membership.role", org.lead), ("membership.remove", org.lead),
    ]  # fmt: skip
    assert events[1].before == {"team": "alpha", "user": "nina", "role": "member"}
    assert events[1].after == {"team": "alpha", "user": "nina", "role": "lead"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"op": "add", "username": "nobody"}, "No active user named &#x27;nobody&#x27;."),
        ({"op": "add", "username": "alice"}, "alice is already a member of Alpha."),
        ({"op": "add", "username": ""}, "Give the username of the person."),
        ({"op": "add", "username": "charlie", "role": "boss"}, "Role must be one of: member, lead."),
        ({"op": "remove", "username": "lena"}, "lena is the last lead of Alpha; appoint another first."),
        ({"op": "role", "username": "lena", "role": "member"}, "Alpha must keep at least one lead."),
        ({"op": "remove", "username": "charlie"}, "charlie is not a member of Alpha."),
        ({"op": "promote", "username": "alice"}, "Unknown change"),
    ],
)
def test_bad_changes_are_refused_with_a_clear_message(org: Org, data: dict[str, str], message: str) -> None:
    before = sorted(Membership.objects.filter(team=org.alpha).values_list("user__username", "role"))
    html = post(client_for(org.lead), org, **data)
    assert message in html
    assert 'class="error"' in html
    assert sorted(Membership.objects.filter(team=org.alpha).values_list("user__username", "role")) == before
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(("who", "status"), [("member", 403), ("finance", 403), ("beta_lead", 404), ("outsider", 404)])
def test_others_cannot_change_members(org: Org, who: str, status: int) -> None:
    factories.make_user("nina")
    response = client_for(getattr(org, who)).post(f"/teams/{org.alpha.pk}/members/", {"op": "add", "username": "nina"})
    assert response.status_code == status
    assert not Membership.objects.filter(user__username="nina").exists()
    assert not AuditEvent.objects.exists()


def test_an_operator_manages_any_team(org: Org) -> None:
    factories.make_user("nina")
    html = post(client_for(org.operator), org, op="add", username="nina", role="lead")
    assert "Added nina to Alpha as lead." in html
    assert AuditEvent.objects.get().actor == org.operator


def test_members_page_refuses_get(org: Org) -> None:
    assert client_for(org.lead).get(f"/teams/{org.alpha.pk}/members/").status_code == 405


def test_the_only_lead_is_offered_neither_remove_nor_demote(org: Org) -> None:
    # The actions refuse both (a team keeps a lead); the page does not offer what would be refused.
    def controls_of(username: str) -> str:
        html = client_for(org.lead).get(f"/teams/{org.alpha.pk}/").content.decode()
        return html.split(f'data-user="{username}"', 1)[1].split("</tr>", 1)[0]

    assert "member-remove" not in controls_of(org.lead.username)
    assert "the only lead" in controls_of(org.lead.username)
    assert "member-remove" in controls_of(org.member.username)
    post(client_for(org.lead), org, op="role", username=org.member.username, role="lead")
    assert "member-remove" in controls_of(org.lead.username)  # two leads now: either may go
