"""The list and detail pages offer each viewer only the actions the actions themselves allow, ask before
deleting, show when a running workspace ends, and hide "New workspace" from people in no team."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from portal.models import User
from tests import factories
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org
from workspaces import access, actions
from workspaces.models import GpuOffering, Workspace

MIG = "a100-sxm4-80gb-1g-10gb"
ROLES = ("owner", "teammate", "lead", "finance", "operator", "outsider")
# What each role may do to alice's running workspace in Alpha (extend only shows on the detail page).
RUNNING = {
    "owner": {"stop", "delete"},
    "teammate": set(),
    "lead": {"stop", "delete"},
    "finance": set(),
    "operator": {"stop", "delete"},
}


def make_workspace(org: Org, offering: GpuOffering, **fields: object) -> Workspace:
    defaults: dict[str, object] = {
        "name": "ws", "kind": "notebook", "team": org.alpha, "owner": org.member, "offering": offering,
        "gpu_count": 1, "image": "quay.io/jupyter/scipy-notebook:x", "cpu_millis": 1000, "memory_mib": 1024,
        "max_runtime_seconds": 4 * 3600, "gpu_equivalents": offering.gpu_equivalents,
    }  # fmt: skip
    return Workspace.objects.create(**(defaults | fields))


@pytest.fixture
def people(org: Org) -> dict[str, User]:
    teammate = factories.make_user("tom")
    factories.add_member(org.alpha, teammate)
    return {"owner": org.member, "teammate": teammate, "lead": org.lead, "finance": org.finance,
            "operator": org.operator, "outsider": org.outsider}  # fmt: skip


@pytest.fixture
def running(org: Org) -> Workspace:
    offering = install_offerings()[MIG]
    return make_workspace(
        org,
        offering,
        name="vision-nb",
        kind="job",  # a job: an owner's running notebook would ask the cluster for its notebook link
        command=["python", "train.py"],
        state=Workspace.State.RUNNING,
        started_at=timezone.now() - timedelta(hours=1),
    )


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def row_verbs(html: str, workspace: Workspace) -> set[str]:
    row = re.search(rf'<tr data-id="{workspace.pk}".*?</tr>', html, re.S)
    assert row, "the workspace has no row"
    return set(re.findall(r'data-verb="(\w+)"', row.group(0)))


def detail_buttons(html: str) -> set[str]:
    return {verb for verb in ("stop", "resume", "extend", "delete") if f'id="{verb}"' in html}


@pytest.mark.parametrize("role", ROLES)
def test_the_list_offers_each_role_only_what_it_may_do(people: dict[str, User], running: Workspace, role: str) -> None:
    html = client_for(people[role]).get("/workspaces/").content.decode()
    if role == "outsider":
        assert f'data-id="{running.pk}"' not in html
        return
    assert row_verbs(html, running) == RUNNING[role]
    fresh = client_for(people[role]).get("/workspaces/?rows=1").content.decode()  # what the page's script redraws
    assert row_verbs(fresh, running) == RUNNING[role]
    assert "<html" not in fresh


@pytest.mark.parametrize("role", ROLES)
def test_the_detail_page_offers_each_role_only_what_it_may_do(
    people: dict[str, User], running: Workspace, role: str
) -> None:
    response = client_for(people[role]).get(f"/workspaces/{running.pk}/")
    if role == "outsider":
        assert response.status_code == 404
        return
    expected = RUNNING[role] | ({"extend"} if RUNNING[role] else set())
    assert detail_buttons(response.content.decode()) == expected


@pytest.mark.parametrize("role", ["teammate", "finance"])
def test_what_a_page_does_not_offer_the_action_refuses(people: dict[str, User], running: Workspace, role: str) -> None:
    client = client_for(people[role])
    assert "confirm-delete-button" not in client.get(f"/workspaces/{running.pk}/?confirm=delete").content.decode()
    for verb in ("stop", "delete"):
        assert client.post(f"/workspaces/{running.pk}/{verb}/").status_code == 403
    running.refresh_from_db()
    assert running.state == Workspace.State.RUNNING


@pytest.mark.parametrize("state", Workspace.State.values)
def test_pages_and_actions_share_one_state_rule(org: Org, state: str) -> None:
    """For every state, a page offers a verb exactly when the action accepts it (within the team's quota and
    policy, which refuse a resume with their own reason whatever the page shows)."""
    offering = install_offerings()[MIG]
    set_quota(org.alpha, offering.flavour, 8)

    def extend(user: User, workspace: Workspace) -> Workspace:
        return actions.do_extend(user, workspace, 1)

    calls: dict[str, Callable[[User, Workspace], Workspace]] = {
        "stop": actions.do_stop,
        "resume": actions.do_resume,
        "delete": actions.do_delete,
        "extend": extend,
    }
    for verb, call in calls.items():
        workspace = make_workspace(org, offering, name=f"ws-{verb}", state=state)
        offered = verb in access.allowed_actions(org.member, workspace)
        try:
            call(org.member, workspace)
            accepted = True
        except ValidationError:
            accepted = False
        assert offered == accepted, (state, verb)


def test_delete_asks_for_confirmation_first(people: dict[str, User], running: Workspace) -> None:
    client = client_for(people["owner"])
    page = client.get(f"/workspaces/{running.pk}/").content.decode()
    assert re.search(r'<a [^>]*id="delete"[^>]*href="\?confirm=delete', page), "Delete is a link to a confirmation"
    assert "confirm-delete-button" not in page
    confirm = client.get(f"/workspaces/{running.pk}/?confirm=delete").content.decode()
    assert "Delete vision-nb?" in confirm
    assert f'action="/workspaces/{running.pk}/delete/"' in confirm
    assert 'id="cancel-delete"' in confirm
    client.post(f"/workspaces/{running.pk}/delete/")
    running.refresh_from_db()
    assert running.state == Workspace.State.DELETED


def test_a_running_workspace_shows_when_it_ends(people: dict[str, User], running: Workspace) -> None:
    assert running.started_at is not None
    ends = running.started_at + timedelta(seconds=running.max_runtime_seconds)
    client = client_for(people["teammate"])
    detail = client.get(f"/workspaces/{running.pk}/").content.decode()
    assert f'datetime="{ends.isoformat()}"' in detail
    assert re.search(r"\(2\xa0hours, 59\xa0minutes left|\(3\xa0hours left", detail), detail
    listing = client.get("/workspaces/").content.decode()
    assert f'<time class="ends" datetime="{ends.isoformat()}"' in listing
    assert "left</time>" in listing


def test_new_workspace_is_offered_only_to_people_in_a_team(people: dict[str, User], running: Workspace) -> None:
    for role, shown in [("owner", True), ("teammate", True), ("finance", False), ("outsider", False)]:
        html = client_for(people[role]).get("/workspaces/").content.decode()
        assert ('id="new-workspace"' in html) == shown, role
        assert ("/workspaces/new/" in html) == shown, role
