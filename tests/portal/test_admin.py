"""The Django admin shows workspaces, quotas, caps, policies, offerings and images to operators only,
with lifecycle, quota and catalogue shapes read-only; audit events stay append-only there."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from portal.models import AuditEvent, User
from scheduling.models import DepartmentCap, MemberCap, TeamPolicy, TeamQuota
from tests import factories
from tests.catalogue import install_images, install_offerings
from tests.conftest import Org
from workspaces.models import GpuOffering, Image, Workspace

MODELS = [
    "workspaces/workspace",
    "workspaces/gpuoffering",
    "workspaces/image",
    "workspaces/allowedregistry",
    "scheduling/teamquota",
    "scheduling/departmentcap",
    "scheduling/membercap",
    "scheduling/teampolicy",
]


@pytest.fixture
def rows(org: Org) -> dict[str, object]:
    offerings = install_offerings()
    install_images()
    offering = offerings["h100-80gb-hbm3"]
    workspace = Workspace.objects.create(
        name="train", kind="job", team=org.alpha, owner=org.member, offering=offering, gpu_count=1,
        image="nvcr.io/nvidia/pytorch:25.05-py3", command=["python", "t.py"], cpu_millis=1000, memory_mib=1024,
        max_runtime_seconds=3600, gpu_equivalents=Decimal(1), state=Workspace.State.RUNNING,
        started_at=timezone.now() - timedelta(minutes=5),
    )  # fmt: skip
    quota = TeamQuota.objects.create(team=org.alpha, flavour="H100-80GB-HBM3", guaranteed=Decimal(4))
    cap = DepartmentCap.objects.create(department=org.alpha.department, flavour="H100-80GB-HBM3", cap=Decimal(8))
    member_cap = MemberCap.objects.create(team=org.alpha, user=org.member, flavour="H100-80GB-HBM3", cap=Decimal(2))
    policy = TeamPolicy.objects.create(team=org.alpha, default_runtime_hours=2, max_runtime_hours=8)
    AuditEvent.record(actor=org.operator, action="quota.set", target=quota, team=org.alpha)
    return {"workspaces/workspace": workspace, "workspaces/gpuoffering": offering,
            "workspaces/image": Image.objects.first(), "scheduling/teamquota": quota,
            "scheduling/departmentcap": cap, "scheduling/membercap": member_cap,
            "scheduling/teampolicy": policy}  # fmt: skip


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", MODELS)
def test_an_operator_opens_each_admin_page(org: Org, rows: dict[str, object], model: str) -> None:
    client = client_for(org.operator)
    assert f'href="/admin/{model}/"' in client.get("/admin/").content.decode()
    assert client.get(f"/admin/{model}/").status_code == 200
    assert client.get(f"/admin/{model}/?q=alpha").status_code == 200
    if model in rows:
        assert client.get(f"/admin/{model}/{rows[model].pk}/change/").status_code == 200  # type: ignore[attr-defined]


@pytest.mark.parametrize("model", MODELS)
def test_staff_who_are_not_operators_are_refused(org: Org, rows: dict[str, object], model: str) -> None:
    staff = factories.make_user("sam", is_staff=True, is_superuser=True)  # even a superuser: operators only
    client = client_for(staff)
    assert f'href="/admin/{model}/"' not in client.get("/admin/").content.decode()
    assert client.get(f"/admin/{model}/").status_code == 403


@pytest.mark.parametrize("who", ["member", "lead", "finance"])
def test_people_without_staff_are_sent_to_the_admin_login(org: Org, who: str) -> None:
    response = client_for(getattr(org, who)).get("/admin/workspaces/workspace/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def assert_read_only_field(client: Client, url: str, field: str, why: str) -> None:
    """The change form shows no input for ``field`` and says why it is read-only."""
    html = client.get(url).content.decode()
    assert f'name="{field}"' not in html
    assert why in html


def test_a_workspaces_state_is_read_only_and_says_why(org: Org, rows: dict[str, object]) -> None:
    workspace = rows["workspaces/workspace"]
    assert isinstance(workspace, Workspace)
    client = client_for(org.operator)
    assert_read_only_field(client, f"/admin/workspaces/workspace/{workspace.pk}/change/", "state", "would bypass them")
    assert "Add workspace" not in client.get("/admin/workspaces/workspace/").content.decode()
    response = client.post(f"/admin/workspaces/workspace/{workspace.pk}/change/", {"state": "stopped"})
    assert response.status_code == 403
    assert client.post(f"/admin/workspaces/workspace/{workspace.pk}/delete/", {"post": "yes"}).status_code == 403
    workspace.refresh_from_db()
    assert workspace.state == Workspace.State.RUNNING


def test_quotas_are_read_only_in_the_admin(org: Org, rows: dict[str, object]) -> None:
    quota = rows["scheduling/teamquota"]
    assert isinstance(quota, TeamQuota)
    client = client_for(org.operator)
    why = "so that the bounds are checked and the change is audited"
    assert_read_only_field(client, f"/admin/scheduling/teamquota/{quota.pk}/change/", "guaranteed", why)
    response = client.post(f"/admin/scheduling/teamquota/{quota.pk}/change/", {"guaranteed": "99"})
    assert response.status_code == 403
    quota.refresh_from_db()
    assert quota.guaranteed == Decimal(4)


def test_an_operator_may_disable_an_offering_but_not_change_its_shape(org: Org, rows: dict[str, object]) -> None:
    offering = rows["workspaces/gpuoffering"]
    assert isinstance(offering, GpuOffering)
    client = client_for(org.operator)
    html = client.get(f"/admin/workspaces/gpuoffering/{offering.pk}/change/").content.decode()
    assert 'name="enabled"' in html
    assert 'name="gpu_equivalents"' not in html
    data = {"display_name": offering.display_name, "description": "", "gpu_equivalents": "-8"}  # enabled unticked
    response = client.post(f"/admin/workspaces/gpuoffering/{offering.pk}/change/", data)
    assert response.status_code == 302
    offering.refresh_from_db()
    assert offering.enabled is False
    assert offering.gpu_equivalents == Decimal(1)


def test_audit_events_stay_append_only_in_the_admin(org: Org, rows: dict[str, object]) -> None:
    event = AuditEvent.objects.get()
    org.operator.is_superuser = True  # as the demo's operator: every permission the admin can grant
    org.operator.save()
    client = client_for(org.operator)
    assert client.get(f"/admin/portal/auditevent/{event.pk}/change/").status_code == 200
    assert 'name="action"' not in client.get(f"/admin/portal/auditevent/{event.pk}/change/").content.decode()
    assert client.post(f"/admin/portal/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    changelist = {"action": "delete_selected", "_selected_action": [event.pk], "post": "yes"}
    client.post("/admin/portal/auditevent/", changelist)
    assert AuditEvent.objects.filter(pk=event.pk).exists()
