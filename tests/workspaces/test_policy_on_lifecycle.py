"""The team's current rules hold at every step, not only at the first request: member caps at submit,
the team's longest runtime when extending, today's policy when resuming; and a lead or operator acting
on someone else's workspace is in the audit log."""

from __future__ import annotations

from decimal import Decimal

import pytest

from portal.models import AuditEvent
from scheduling.models import MemberCap, TeamPolicy
from scheduling.quota.rules import never_fits
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from workspaces.models import GpuOffering, Workspace

H100 = "H100-80GB-HBM3"


@pytest.fixture
def offerings(org: Org) -> dict[str, GpuOffering]:
    offerings = install_offerings()
    install_images()
    set_quota(org.alpha, H100, 8)
    return offerings


def job(**overrides: object) -> dict[str, object]:
    return {"kind": "job", "name": "train", "team": "alpha", "offering": "h100-80gb-hbm3", "gpu_count": 4,
            "image": "pytorch", "command": ["python", "train.py"]} | overrides  # fmt: skip


def test_a_request_over_the_members_cap_is_refused_at_submit(org: Org, offerings: dict[str, GpuOffering]) -> None:
    MemberCap.objects.create(team=org.alpha, user=org.member, flavour=H100, cap=Decimal(2))
    response = api_client_for(org.member).post("/api/v1/workspaces/", job(), format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["gpu_count"] == [
        f"Your lead caps you at 2 GPU-equivalents of {H100} in Alpha; this request needs 4, so it could never start."
    ]
    assert not Workspace.objects.exists()
    within = api_client_for(org.member).post("/api/v1/workspaces/", job(gpu_count=2), format="json")
    assert within.status_code == 202, within.json()


def test_quota_and_member_cap_are_read_in_one_query(org: Org, offerings: dict[str, GpuOffering],
                                                    django_assert_num_queries) -> None:  # fmt: skip
    """Every request checks them; neither a cap nor a missing quota row costs a second query."""
    needed = Decimal(4)
    with django_assert_num_queries(1):
        assert never_fits(org.alpha, H100, "job", needed, member_id=org.member.pk) is None
    MemberCap.objects.create(team=org.alpha, user=org.member, flavour=H100, cap=Decimal(2))
    with django_assert_num_queries(1):
        assert "caps you at 2" in (never_fits(org.alpha, H100, "job", needed, member_id=org.member.pk) or "")
    assert never_fits(org.alpha, H100, "job", needed, member_id=org.lead.pk) is None  # the cap is the member's
    with django_assert_num_queries(1):
        assert "could never start" in (never_fits(org.beta, H100, "job", needed, member_id=org.member.pk) or "")


def _policy(org: Org, max_hours: int, *allowed: GpuOffering) -> None:
    policy, _ = TeamPolicy.objects.update_or_create(
        team=org.alpha, defaults={"default_runtime_hours": 1, "max_runtime_hours": max_hours}
    )
    policy.allowed_offerings.set(allowed)


def test_extend_stops_at_the_teams_longest_runtime(org: Org, offerings: dict[str, GpuOffering]) -> None:
    _policy(org, 4)
    client = api_client_for(org.member)
    workspace_id = client.post("/api/v1/workspaces/", job(max_runtime_hours=4), format="json").json()["id"]
    response = client.post(f"/api/v1/workspaces/{workspace_id}/extend/", {"hours": 24}, format="json")
    assert response.status_code == 400
    assert "at most 4 hours; 0 more are allowed" in response.json()["detail"]
    assert Workspace.objects.get(pk=workspace_id).max_runtime_seconds == 4 * 3600


def test_resume_answers_to_todays_policy(org: Org, offerings: dict[str, GpuOffering]) -> None:
    client = api_client_for(org.member)
    workspace_id = client.post("/api/v1/workspaces/", job(max_runtime_hours=24), format="json").json()["id"]
    Workspace.objects.filter(pk=workspace_id).update(state="stopped")
    _policy(org, 1, offerings["cpu"])  # the lead now allows only CPU workspaces, for an hour
    refused = client.post(f"/api/v1/workspaces/{workspace_id}/resume/")
    assert refused.status_code == 400
    assert refused.json()["errors"]["offering"] == [
        f"Alpha's lead does not allow {offerings['h100-80gb-hbm3'].display_name}."
    ]
    assert Workspace.objects.get(pk=workspace_id).state == "stopped"
    _policy(org, 1)  # any offering again, still an hour at most
    resumed = client.post(f"/api/v1/workspaces/{workspace_id}/resume/")
    assert resumed.status_code == 202, resumed.json()
    workspace = Workspace.objects.get(pk=workspace_id)
    assert (workspace.state, workspace.max_runtime_seconds) == ("queued", 3600)
    assert workspace.reason.endswith("Runtime cut to 1 h, the team's longest.")


def test_acting_on_someone_elses_workspace_is_audited(org: Org, offerings: dict[str, GpuOffering]) -> None:
    own = api_client_for(org.member)
    workspace_id = own.post("/api/v1/workspaces/", job(), format="json").json()["id"]
    own.post(f"/api/v1/workspaces/{workspace_id}/extend/", {"hours": 1}, format="json")
    assert not AuditEvent.objects.exists()  # the owner's own actions are the workspace's timeline
    assert api_client_for(org.lead).post(f"/api/v1/workspaces/{workspace_id}/stop/").status_code == 202
    assert api_client_for(org.operator).delete(f"/api/v1/workspaces/{workspace_id}/").status_code == 202
    events = list(AuditEvent.objects.order_by("id").values_list("actor__username", "action", "before", "after"))
    assert events == [
        ("lena", "workspace.stop", {"state": "queued", "owner": "alice"}, {"state": "cancelled"}),
        ("oscar", "workspace.delete", {"state": "cancelled", "owner": "alice"}, {"state": "deleted"}),
    ]
