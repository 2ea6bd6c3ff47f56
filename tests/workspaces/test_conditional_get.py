"""The self-refreshing answers (the list page's rows, the API's list and a workspace) carry an ETag: asked
again with it, an unchanged answer is 304 with no body, a changed one is 200 with a new tag. Asking costs
the same number of queries whatever the number of rows, and the rows page keeps to its size."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token

from portal import conditional
from portal.billing.models import UsageInterval
from portal.models import User
from tests import factories
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.portal.billing.test_report import interval
from tests.scheduling.test_activity import sample
from workspaces import views
from workspaces.models import GpuOffering, Workspace, WorkspaceEvent

ROWS = "/workspaces/?rows=1&show=50"


@pytest.fixture(autouse=True)
def _still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock's step is part of every tag: held still, so that a test never straddles a step's end."""
    monkeypatch.setattr(conditional, "clock_step", lambda salt=0: 0)


def _offering() -> GpuOffering:
    return next(iter(install_offerings().values()))


def _browser(user: User) -> Client:
    client = Client()
    client.force_login(user)
    client.get("/workspaces/")  # the page, then its refreshes (the page leaves the CSRF cookie they carry)
    return client


def _api(user: User) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")


def _again(client: Client, path: str) -> tuple[int, str, int]:
    """Ask twice, the second time with the first answer's ETag: (status, tag, body length) of the second."""
    first = client.get(path)
    assert first.status_code == 200 and first["ETag"].startswith('W/"')
    assert "no-cache" in first["Cache-Control"] and "private" in first["Cache-Control"]
    second = client.get(path, HTTP_IF_NONE_MATCH=first["ETag"])
    return second.status_code, first["ETag"], len(second.content)


def test_an_unchanged_list_answers_304_and_a_change_answers_200(db: None, org: Org) -> None:
    offering = _offering()
    workspace = factories.make_workspace(org.alpha, org.member, offering)
    browser = _browser(org.member)
    status, tag, length = _again(browser, ROWS)
    assert (status, length) == (304, 0)
    Workspace.objects.filter(pk=workspace.pk).update(reason="Waiting for an A100 slice.")  # no signal, no save()
    changed = browser.get(ROWS, HTTP_IF_NONE_MATCH=tag)
    assert changed.status_code == 200 and changed["ETag"] != tag
    assert "Waiting for an A100 slice." in changed.content.decode()


def test_the_api_list_and_a_workspace_answer_304_until_they_change(db: None, org: Org) -> None:
    offering = _offering()
    workspace = factories.make_workspace(org.alpha, org.member, offering)
    api = _api(org.member)
    for path in ("/api/v1/workspaces/", "/api/v1/workspaces/?mine=1", f"/api/v1/workspaces/{workspace.pk}/"):
        status, _, length = _again(api, path)
        assert (status, length) == (304, 0), path
    listed = api.get("/api/v1/workspaces/")
    detail = api.get(f"/api/v1/workspaces/{workspace.pk}/")
    factories.make_workspace(org.alpha, org.member, offering)  # a new row in the list
    assert api.get("/api/v1/workspaces/", HTTP_IF_NONE_MATCH=listed["ETag"]).status_code == 200
    WorkspaceEvent.objects.create(workspace=workspace, from_state="queued", to_state="queued", reason="Still waiting.")
    assert api.get(f"/api/v1/workspaces/{workspace.pk}/", HTTP_IF_NONE_MATCH=detail["ETag"]).status_code == 200


def test_a_tag_is_the_viewers_own(db: None, org: Org) -> None:
    """The lead is offered actions the member is not: the member's tag never answers the lead's 304."""
    factories.make_workspace(org.alpha, org.member, _offering())
    member_tag = _browser(org.member).get(ROWS)["ETag"]
    assert _browser(org.lead).get(ROWS, HTTP_IF_NONE_MATCH=member_tag).status_code == 200


def test_someone_who_may_not_see_a_workspace_gets_no_304_for_it(db: None, org: Org) -> None:
    workspace = factories.make_workspace(org.alpha, org.member, _offering())
    tag = _api(org.member).get(f"/api/v1/workspaces/{workspace.pk}/")["ETag"]
    assert _api(org.outsider).get(f"/api/v1/workspaces/{workspace.pk}/", HTTP_IF_NONE_MATCH=tag).status_code == 404


def _queries(client: Client, path: str) -> tuple[int, int]:
    """Queries of a full answer, and of a revalidation that answers 304."""
    first = client.get(path)
    with CaptureQueriesContext(connection) as full:
        client.get(path)
    with CaptureQueriesContext(connection) as revalidated:
        assert client.get(path, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    return len(full), len(revalidated)


def test_query_counts_do_not_grow_with_the_rows(db: None, org: Org) -> None:
    offering = _offering()
    browser, api = _browser(org.lead), _api(org.lead)
    paths = [(browser, ROWS), (api, "/api/v1/workspaces/"), (api, "/api/v1/workspaces/?mine=1")]
    for _ in range(3):
        factories.make_workspace(org.alpha, org.lead, offering, state=Workspace.State.RUNNING)
    few = [_queries(client, path) for client, path in paths]
    for n in range(30):
        running = Workspace.State.RUNNING if n % 2 else Workspace.State.QUEUED
        factories.make_workspace(org.alpha, org.lead, offering, state=running)
    many = [_queries(client, path) for client, path in paths]
    assert few == many
    queue = [_queries_plain(api, "/api/v1/queue/")]
    for n in range(10):  # more queued requests, from more people
        owner = factories.make_user(f"queued{n}")
        factories.add_member(org.alpha, owner)
        factories.make_workspace(org.alpha, owner, offering)
    assert queue == [_queries_plain(api, "/api/v1/queue/")]
    # Other GPU models queued and running: their runtime estimates are read in the same queries.
    models = {o.gpu_model: o for o in GpuOffering.objects.exclude(gpu_model__in=("", offering.gpu_model))}
    assert len(models) >= 2
    for other in models.values():
        factories.make_workspace(org.alpha, org.lead, other)
        factories.make_workspace(org.alpha, org.lead, other, state=Workspace.State.RUNNING)
    assert queue == [_queries_plain(api, "/api/v1/queue/")]


def _queries_plain(client: Client, path: str) -> int:
    client.get(path)
    with CaptureQueriesContext(connection) as asked:
        assert client.get(path).status_code == 200
    return len(asked)


def test_the_list_page_shows_a_first_screen_and_more_on_asking(db: None, org: Org) -> None:
    offering = _offering()
    for _ in range(views.LIST_ROWS + 3):
        factories.make_workspace(org.alpha, org.member, offering)
    browser = _browser(org.member)
    page = browser.get("/workspaces/").content.decode()
    assert page.count("<tr data-id=") == views.LIST_ROWS
    assert f'href="?show={views.LIST_ROWS * 2}"' in page and f"show={views.LIST_ROWS}" in page
    more = browser.get(f"/workspaces/?show={views.LIST_ROWS * 2}").content.decode()
    assert more.count("<tr data-id=") == views.LIST_ROWS + 3 and 'id="show-more"' not in more
    for bad in ("0", "x", "1001", "²"):
        refused = browser.get(f"/workspaces/?show={bad}")
        assert refused.status_code == 400 and "whole number of rows from 1 to 1000" in refused.content.decode()


def test_a_running_workspaces_cost_moves_the_rows_tag_once_a_step_not_at_every_ledger_pass(
    db: None, org: Org, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The ledger advances an open interval at every reconcile pass (5 s); the list shows the cost as of the
    # start of the viewer's clock step, so an unchanged list stays 304 until the step ends.
    browser = _browser(org.lead)
    workspace = factories.make_workspace(org.alpha, org.lead, _offering(), state=Workspace.State.RUNNING)
    began = timezone.now() - timedelta(seconds=10)
    monkeypatch.setattr(conditional, "step_began", lambda salt=0: began)
    open_interval = interval(workspace, began - timedelta(hours=2), began + timedelta(seconds=5), "36.00")
    UsageInterval.objects.filter(pk=open_interval.pk).update(ended_at=None)  # still running
    first = browser.get(ROWS)
    assert "72.00" in first.content.decode()  # 2 h at 36.00 an hour (a cent a second), as of the step's start
    UsageInterval.objects.filter(pk=open_interval.pk).update(last_seen_at=began + timedelta(seconds=9))
    assert browser.get(ROWS, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304
    # The next step shows what the ledger has seen since.
    monkeypatch.setattr(conditional, "clock_step", lambda salt=0: 1)
    monkeypatch.setattr(conditional, "step_began", lambda salt=0: began + timedelta(hours=1))
    UsageInterval.objects.filter(pk=open_interval.pk).update(last_seen_at=began + timedelta(hours=2))
    later = browser.get(ROWS, HTTP_IF_NONE_MATCH=first["ETag"])
    assert later.status_code == 200 and "108.00" in later.content.decode()  # 3 h, as of the new step's start


def test_new_telemetry_moves_a_lists_tag_at_the_viewers_next_step_not_as_soon_as_it_lands(
    db: None, org: Org, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A telemetry pass lands every 30 s: a list showing a running workspace would otherwise miss for it and
    # again at its clock step's end. Lists show the telemetry collected by the start of the viewer's step.
    browser, api = _browser(org.lead), _api(org.lead)
    workspace = factories.make_workspace(org.alpha, org.lead, _offering(), state=Workspace.State.RUNNING)
    began = timezone.now() - timedelta(seconds=10)
    monkeypatch.setattr(conditional, "step_began", lambda salt=0: began)
    sample(workspace, began - timedelta(seconds=20), gpu=0.25)
    first = {path: client.get(path) for client, path in ((browser, ROWS), (api, "/api/v1/workspaces/"))}
    assert "GPU 25 %" in first[ROWS].content.decode()
    sample(workspace, began + timedelta(seconds=5), gpu=0.75)  # landed during the step
    for (client, path), answer in zip(((browser, ROWS), (api, "/api/v1/workspaces/")), first.values(), strict=True):
        assert client.get(path, HTTP_IF_NONE_MATCH=answer["ETag"]).status_code == 304, path
    # The next step shows it.
    monkeypatch.setattr(conditional, "clock_step", lambda salt=0: 1)
    monkeypatch.setattr(conditional, "step_began", lambda salt=0: began + timedelta(seconds=30))
    later = browser.get(ROWS, HTTP_IF_NONE_MATCH=first[ROWS]["ETag"])
    assert later.status_code == 200 and "GPU 75 %" in later.content.decode()
    listed = api.get("/api/v1/workspaces/", HTTP_IF_NONE_MATCH=first["/api/v1/workspaces/"]["ETag"])
    assert listed.status_code == 200 and listed.json()["results"][0]["activity"]["gpu_active"] == 0.75
