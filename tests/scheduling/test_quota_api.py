"""Who may change quotas, caps and policies, within which bounds, and the audit trail of every change."""

from __future__ import annotations

from decimal import Decimal

import pytest

from portal.models import AuditEvent
from scheduling.models import DepartmentCap, MemberCap, TeamQuota
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org, api_client_for

H100 = "H100-80GB-HBM3"


def put_quota(org: Org, persona: str, team: str = "alpha", guaranteed: str = "4", borrow: str = "2") -> int:
    payload = {"team": team, "flavour": H100, "guaranteed": guaranteed, "borrow_limit": borrow}
    return int(api_client_for(org.persona(persona)).put("/api/v1/quotas/", payload, format="json").status_code)


@pytest.mark.parametrize(
    ("persona", "status"),
    [("operator", 200), ("lead", 403), ("member", 403), ("finance", 403), ("outsider", 403), ("anonymous", 401)],
)
def test_only_operators_set_team_quotas(org: Org, persona: str, status: int) -> None:
    assert put_quota(org, persona) == status
    assert TeamQuota.objects.filter(team=org.alpha, flavour=H100).exists() == (status == 200)
    assert AuditEvent.objects.filter(action="quota.set").exists() == (status == 200)


def test_a_department_cap_bounds_the_sum_of_guarantees(org: Org) -> None:
    operator = api_client_for(org.operator)
    department = org.alpha.department
    response = operator.put(f"/api/v1/departments/{department.pk}/caps/", {"flavour": H100, "cap": "6"}, format="json")
    assert response.status_code == 200
    assert put_quota(org, "operator", "alpha", "4") == 200
    response = operator.put(
        "/api/v1/quotas/", {"team": "beta", "flavour": H100, "guaranteed": "3", "borrow_limit": "0"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["detail"] == (
        "guaranteed: Research may guarantee at most 6 H100-80GB-HBM3 in all; its other teams hold 4, "
        "so Beta can have at most 2."
    )
    assert not TeamQuota.objects.filter(team=org.beta).exists()
    response = operator.put(f"/api/v1/departments/{department.pk}/caps/", {"flavour": H100, "cap": "3"}, format="json")
    assert response.status_code == 400
    assert DepartmentCap.objects.get().cap == 6


def test_a_lead_sets_member_caps_within_the_team_quota_only_for_their_team(org: Org) -> None:
    set_quota(org.alpha, H100, 4)
    set_quota(org.beta, H100, 4)
    lead = api_client_for(org.lead)
    ok = lead.put(f"/api/v1/teams/{org.alpha.pk}/member-caps/", {"username": "alice", "flavour": H100, "cap": "2"},
                  format="json")  # fmt: skip
    assert ok.status_code == 200
    too_much = lead.put(f"/api/v1/teams/{org.alpha.pk}/member-caps/",
                        {"username": "alice", "flavour": H100, "cap": "9"}, format="json")  # fmt: skip
    assert too_much.status_code == 400
    assert too_much.json()["detail"] == (
        "cap: Alpha may use at most 4 H100-80GB-HBM3 (guarantee plus borrowing); a member's cap cannot exceed that."
    )
    other_team = lead.put(f"/api/v1/teams/{org.beta.pk}/member-caps/", {"username": "bert", "flavour": H100,
                          "cap": "1"}, format="json")  # fmt: skip
    assert other_team.status_code == 403  # lena is a plain member of beta
    payload = {"username": "alice", "flavour": H100, "cap": "4"}
    member = api_client_for(org.member).put(f"/api/v1/teams/{org.alpha.pk}/member-caps/", payload, format="json")
    assert member.status_code == 403
    assert MemberCap.objects.get().cap == 2


def test_a_lead_sets_team_policy_within_operator_bounds(org: Org) -> None:
    install_offerings()
    lead = api_client_for(org.lead)
    url = f"/api/v1/teams/{org.alpha.pk}/policy/"
    response = lead.put(url, {"default_runtime_hours": 4, "max_runtime_hours": 12,
                              "allowed_offerings": ["a100-sxm4-80gb-1g-10gb"]}, format="json")  # fmt: skip
    assert response.status_code == 200
    assert response.json() == {"default_runtime_hours": 4, "max_runtime_hours": 12,
                               "allowed_offerings": ["a100-sxm4-80gb-1g-10gb"]}  # fmt: skip
    beyond = lead.put(url, {"default_runtime_hours": 4, "max_runtime_hours": 500}, format="json")
    assert beyond.status_code == 400
    assert beyond.json()["detail"] == "max_runtime_hours: Operators allow at most 72 hours; choose 1 to 72."
    assert api_client_for(org.member).put(url, {"default_runtime_hours": 1, "max_runtime_hours": 1},
                                          format="json").status_code == 403  # fmt: skip
    assert api_client_for(org.outsider).get(url).status_code == 404
    # The policy now applies to requests.
    request = {"kind": "notebook", "name": "nb", "team": "alpha", "offering": "h100-80gb-hbm3", "image": "x/y:1"}
    refused = api_client_for(org.member).post("/api/v1/workspaces/", request, format="json")
    assert "offering: Alpha's lead does not allow NVIDIA H100 80GB HBM3 (whole GPU)." in refused.json()["detail"]


def test_every_change_is_in_the_audit_log(org: Org) -> None:
    set_quota(org.alpha, H100, 4)
    put_quota(org, "operator", "alpha", "5", "1")
    api_client_for(org.lead).put(f"/api/v1/teams/{org.alpha.pk}/member-caps/",
                                 {"username": "alice", "flavour": H100, "cap": "1"}, format="json")  # fmt: skip
    log = api_client_for(org.operator).get("/api/v1/audit/").json()["results"]
    assert [(e["action"], e["actor"]) for e in log] == [("member_cap.set", "lena"), ("quota.set", "oscar")]
    assert log[1]["before"] == {"flavour": H100, "guaranteed": "4.0000", "borrow_limit": "0.0000"}
    assert log[1]["after"] == {"flavour": H100, "guaranteed": "5.0000", "borrow_limit": "1.0000"}
    lead_view = api_client_for(org.lead).get("/api/v1/audit/").json()["results"]
    assert len(lead_view) == 2  # both concern alpha, which lena leads
    assert api_client_for(org.member).get("/api/v1/audit/").json()["results"] == []


def test_the_quota_list_is_two_queries_whatever_the_number_of_teams(org: Org, django_assert_max_num_queries) -> None:
    from tests import factories

    for _ in range(10):
        team = factories.make_team(org.alpha.department)
        set_quota(team, H100, 2)
    set_quota(org.alpha, H100, 4)
    client = api_client_for(org.operator)
    with django_assert_max_num_queries(8):  # auth, org roles, teams, quotas, usage
        response = client.get("/api/v1/quotas/")
    rows = response.json()["results"]
    assert len(rows) == 11
    assert {
        "team": "alpha",
        "flavour": H100,
        "guaranteed": "4.0000",
        "borrow_limit": "0.0000",
        "used": "0.0000",
    } in rows


def test_the_audit_log_is_paginated_past_its_first_page(org: Org) -> None:
    for guaranteed in range(1, 8):
        put_quota(org, "operator", "alpha", str(guaranteed), "0")
    operator = api_client_for(org.operator)
    first = operator.get("/api/v1/audit/?limit=3").json()
    assert first["count"] == 7
    assert [e["after"]["guaranteed"] for e in first["results"]] == ["7.0000", "6.0000", "5.0000"]
    rest = operator.get(first["next"]).json()
    assert [e["after"]["guaranteed"] for e in rest["results"]] == ["4.0000", "3.0000", "2.0000"]
    assert operator.get("/api/v1/audit/?limit=3&offset=6").json()["next"] is None


@pytest.mark.parametrize(
    "path", ["/api/v1/quotas/", "/api/v1/queue/", "/api/v1/teams/{team}/member-caps/", "/api/v1/audit/"]
)
def test_every_scheduling_list_has_the_api_pagination(org: Org, path: str) -> None:
    set_quota(org.alpha, H100, 4)
    body = api_client_for(org.lead).get(path.format(team=org.alpha.pk)).json()
    assert set(body) == {"count", "next", "previous", "results"}


@pytest.mark.parametrize(("persona", "status"), [("operator", 200), ("member", 200), ("outsider", 404)])
def test_a_department_is_seen_by_operators_and_its_teams_members_only(org: Org, persona: str, status: int) -> None:
    DepartmentCap.objects.create(department=org.alpha.department, flavour=H100, cap=Decimal(6))
    response = api_client_for(org.persona(persona)).get(f"/api/v1/departments/{org.alpha.department.pk}/caps/")
    assert response.status_code == status
    if status == 200:
        assert response.json()["results"] == [{"flavour": H100, "cap": "6.0000"}]
