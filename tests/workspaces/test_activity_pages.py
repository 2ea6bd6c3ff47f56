"""Telemetry on the pages and in the API: the detail page's figures, idle banner with its reclaim time,
stale notice and keep-alive (its owner only); the list's activity column; the lead's idle rules and idle
offenders on the team page; allocated against active on the operator's cluster page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from scheduling.kube.client import reset_client
from scheduling.models import ActivitySample, TeamPolicy
from tests.catalogue import install_offerings
from tests.conftest import Org, api_client_for
from tests.factories import make_workspace
from workspaces.models import Workspace


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def sample(workspace: Workspace, *, ago: float, gpu: float | None) -> None:
    at = timezone.now() - timedelta(seconds=ago)
    ActivitySample.objects.create(
        workspace=workspace, at=at, seconds=30, gpu_seconds=30 if gpu is not None else 0,
        idle_gpu_seconds=30 if gpu is not None and gpu < 0.05 else 0, source="scrape", gpu_active=gpu,
        gpu_observed_at=at if gpu is not None else None, fb_used_mib=3072.0, fb_total_mib=10240.0, kernels=1,
        busy_kernels=0, connections=0, last_activity=at - timedelta(hours=2),
    )  # fmt: skip


@pytest.fixture(autouse=True)
def _notebook_links(settings) -> None:
    settings.NOTEBOOK_PROXY_URL = "http://notebooks.test"  # the owner's link needs no cluster


@pytest.fixture
def notebook(org: Org) -> Workspace:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    return make_workspace(org.alpha, org.member, offering, state="running", started_at=timezone.now())


def test_detail_shows_figures_sparkline_and_the_idle_banner_with_keep_alive(org: Org, notebook: Workspace) -> None:
    for i in range(5):
        sample(notebook, ago=30 * (4 - i) + 5, gpu=0.02)
    Workspace.objects.filter(pk=notebook.pk).update(idle_warned_at=timezone.now() - timedelta(minutes=3))
    page = client_for(org.member).get(f"/workspaces/{notebook.pk}/").content.decode()
    assert 'id="idle-banner"' in page and "it will be reclaimed at" in page and 'data-countdown="' in page
    assert 'id="gpu-active">2 %' in page and "3.0 of 10.0 GiB" in page
    assert 'id="activity-figure"' in page and 'id="keep-alive"' in page
    assert "0 busy of 1, 0 browser connections" in page
    lead_page = client_for(org.lead).get(f"/workspaces/{notebook.pk}/").content.decode()
    assert 'id="idle-banner"' in lead_page and 'id="keep-alive"' not in lead_page  # only its owner keeps it alive


def test_keep_alive_from_the_page_lifts_nothing_but_sets_the_mark(org: Org, notebook: Workspace) -> None:
    TeamPolicy.objects.create(team=org.alpha, keep_alives_per_run=1)
    client = client_for(org.member)
    response = client.post(f"/workspaces/{notebook.pk}/keep-alive/", follow=True)
    assert "Kept alive until" in response.content.decode()
    notebook.refresh_from_db()
    assert notebook.kept_alive_until is not None and notebook.keep_alives_used == 1
    page = client.get(f"/workspaces/{notebook.pk}/").content.decode()
    assert 'id="keep-alive"' not in page and 'id="no-keep-alive"' in page
    refused = client.post(f"/workspaces/{notebook.pk}/keep-alive/", follow=True).content.decode()
    assert "allows 1 keep-alive per run" in refused
    assert Workspace.objects.get(pk=notebook.pk).keep_alives_used == 1
    client_for(org.lead).post(f"/workspaces/{notebook.pk}/keep-alive/")
    assert Workspace.objects.get(pk=notebook.pk).keep_alives_used == 1  # a lead cannot


def test_stale_telemetry_is_said_on_the_page_and_in_the_api(org: Org, notebook: Workspace) -> None:
    sample(notebook, ago=600, gpu=0.0)
    page = client_for(org.member).get(f"/workspaces/{notebook.pk}/").content.decode()
    assert 'id="stale-telemetry"' in page and "Telemetry is stale" in page
    data = api_client_for(org.member).get(f"/api/v1/workspaces/{notebook.pk}/").json()
    assert data["activity"]["stale"].startswith("Telemetry is stale")
    listed = api_client_for(org.member).get("/api/v1/workspaces/").json()["results"]
    assert listed[0]["activity"]["gpu_active"] == 0.0


def test_list_shows_activity_and_the_idle_mark(org: Org, notebook: Workspace) -> None:
    sample(notebook, ago=5, gpu=0.37)
    Workspace.objects.filter(pk=notebook.pk).update(idle_warned_at=timezone.now())
    page = client_for(org.member).get("/workspaces/").content.decode()
    assert "GPU 37 %" in page and "idle ·" in page


def test_activity_series_api(org: Org, notebook: Workspace) -> None:
    sample(notebook, ago=60, gpu=None)
    sample(notebook, ago=30, gpu=0.5)
    api = api_client_for(org.member)
    data = api.get(f"/api/v1/workspaces/{notebook.pk}/activity/?hours=2").json()
    assert [p["gpu_active"] for p in data["points"]] == [None, 0.5]  # missing stays missing
    assert api.get(f"/api/v1/workspaces/{notebook.pk}/activity/?hours=99").status_code == 400
    assert api_client_for(org.outsider).get(f"/api/v1/workspaces/{notebook.pk}/activity/").status_code == 404


def test_lead_sets_idle_rules_within_bounds_on_the_team_page(org: Org) -> None:
    client = client_for(org.lead)
    url = f"/teams/{org.alpha.pk}/quota/"
    ok = client.post(url, {"form": "idle", "idle_window_minutes": "45", "idle_grace_minutes": "10"})
    assert ok.status_code == 302
    policy = TeamPolicy.objects.get(team=org.alpha)
    assert (policy.idle_window_minutes, policy.idle_grace_minutes) == (45, 10)
    refused = client.post(url, {"form": "idle", "idle_window_minutes": "2"})
    assert refused.status_code == 400 and "The idle window must be between" in refused.content.decode()
    assert TeamPolicy.objects.get(team=org.alpha).idle_window_minutes == 45
    member_page = client_for(org.member).get(url).content.decode()
    assert 'id="idle-policy"' in member_page and 'id="idle-form"' not in member_page
    assert 'id="idle-offenders"' not in member_page  # the members' idle time is for leads
    assert client_for(org.member).post(url, {"form": "idle", "idle_window_minutes": "45"}).status_code == 403


def test_idle_offenders_for_the_lead_page_and_api(org: Org, notebook: Workspace) -> None:
    for i in range(4):
        sample(notebook, ago=30 * i + 5, gpu=0.0)
    page = client_for(org.lead).get(f"/teams/{org.alpha.pk}/quota/").content.decode()
    assert 'id="idle-offenders"' in page and org.member.username in page
    data = api_client_for(org.lead).get(f"/api/v1/teams/{org.alpha.pk}/idle-offenders/").json()
    [row] = data["members"]
    assert row["user"] == org.member.username and row["observed_gpu_hours_7d"] > 0
    assert api_client_for(org.member).get(f"/api/v1/teams/{org.alpha.pk}/idle-offenders/").status_code == 403


def test_cluster_page_and_api_show_allocated_against_active(org: Org, notebook: Workspace) -> None:
    sample(notebook, ago=5, gpu=0.5)
    page = client_for(org.operator).get("/cluster/").content.decode()
    assert 'id="allocated-active"' in page
    data = api_client_for(org.operator).get("/api/v1/cluster/activity/").json()
    [row] = data["models"]
    assert row["flavour"] == notebook.offering.flavour and row["active"] == pytest.approx(
        0.5 * float(notebook.gpu_equivalents), abs=1e-3
    )
    assert api_client_for(org.lead).get("/api/v1/cluster/activity/").status_code == 403


def test_a_running_notebook_without_a_cluster_to_link_through_shows_no_link(
    org: Org, notebook: Workspace, settings
) -> None:
    settings.NOTEBOOK_PROXY_URL = ""
    settings.NOTEBOOK_INGRESS_HOST = ""
    settings.KUBECONFIG = ""
    settings.KUBE_IN_CLUSTER = False
    reset_client()
    response = client_for(org.member).get(f"/workspaces/{notebook.pk}/")
    assert response.status_code == 200
    assert 'id="open-notebook"' not in response.content.decode()
    api = api_client_for(org.member).get(f"/api/v1/workspaces/{notebook.pk}/")
    assert api.status_code == 200 and api.json()["notebook_url"] is None
