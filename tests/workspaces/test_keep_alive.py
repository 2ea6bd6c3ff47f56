"""Keep-alive: the owner keeps a running notebook from idle reclaim for the team's keep-alive length, as
often per run as the team's policy allows; beyond that, or for anything else, a clear refusal."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import TeamPolicy
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.factories import make_workspace
from workspaces import actions
from workspaces.models import Workspace, WorkspaceEvent


@pytest.fixture
def notebook(org: Org) -> Workspace:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    return make_workspace(org.alpha, org.member, offering, state="running", started_at=timezone.now())


def keep_alive(org: Org, who: str, workspace: Workspace) -> tuple[int, dict[str, object]]:
    response = api_client_for(getattr(org, who)).post(f"/api/v1/workspaces/{workspace.pk}/keep-alive/")
    return response.status_code, response.json()


def test_the_owner_keeps_a_notebook_alive_as_often_as_the_policy_allows(org: Org, notebook: Workspace) -> None:
    TeamPolicy.objects.create(team=org.alpha, keep_alive_hours=2, keep_alives_per_run=2)
    before = timezone.now()
    for left in (1, 0):
        status, _ = keep_alive(org, "member", notebook)
        assert status == 202
        assert WorkspaceEvent.objects.filter(workspace=notebook, reason__contains=f"({left} keep-alives left)").exists()
    notebook.refresh_from_db()
    assert notebook.keep_alives_used == 2
    assert notebook.kept_alive_until and notebook.kept_alive_until - before >= timedelta(hours=2)
    status, body = keep_alive(org, "member", notebook)
    assert status == 400
    assert "Alpha's policy allows 2 keep-alives per run and this one has had them" in str(body["detail"])
    notebook.refresh_from_db()
    assert notebook.keep_alives_used == 2  # the refusal changed nothing


def test_a_resume_starts_a_new_run_with_its_keep_alives(org: Org, notebook: Workspace) -> None:
    TeamPolicy.objects.create(team=org.alpha, keep_alives_per_run=1)
    set_quota(org.alpha, notebook.offering.flavour, 1)
    assert keep_alive(org, "member", notebook)[0] == 202
    Workspace.objects.filter(pk=notebook.pk).update(state="stopped")
    notebook.refresh_from_db()
    actions.do_resume(org.member, notebook)
    notebook.refresh_from_db()
    assert (notebook.keep_alives_used, notebook.kept_alive_until) == (0, None)


@pytest.mark.parametrize(("who", "status"), [("lead", 403), ("operator", 403), ("finance", 403), ("outsider", 404)])
def test_only_the_owner_may(org: Org, notebook: Workspace, who: str, status: int) -> None:
    assert keep_alive(org, who, notebook)[0] == status
    notebook.refresh_from_db()
    assert notebook.keep_alives_used == 0


@pytest.mark.parametrize(("kind", "state"), [("job", "running"), ("notebook", "stopped"), ("notebook", "queued")])
def test_only_running_notebooks_can_be_kept_alive(org: Org, notebook: Workspace, kind: str, state: str) -> None:
    Workspace.objects.filter(pk=notebook.pk).update(kind=kind, state=state)
    status, body = keep_alive(org, "member", notebook)
    assert status == 400 and "Only a running notebook can be kept alive" in str(body["detail"])
