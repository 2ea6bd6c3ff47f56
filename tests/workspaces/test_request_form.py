"""The request page offers what the member's team allows: its lead's offerings and runtimes, the quota left
to the member (their own cap included), the counts each offering comes in, job priorities; an outsider gets
no form. The queue suggests only what the team's policy and the member's cap allow."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from portal.models import User
from scheduling import queue_view, services
from scheduling.models import MemberCap, TeamPolicy
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org
from workspaces.models import GpuOffering, Workspace

MIG = "a100-sxm4-80gb-1g-10gb"
H100 = "h100-80gb-hbm3"


@pytest.fixture
def offerings(org: Org) -> dict[str, GpuOffering]:
    installed = install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 8)
    set_quota(org.alpha, "A100-SXM4-80GB", 2)
    set_quota(org.beta, "H100-80GB-HBM3", 4)
    return installed


def restrict(team: Any, slugs: list[str], *, default: int, longest: int) -> TeamPolicy:
    policy = TeamPolicy.objects.create(team=team, default_runtime_hours=default, max_runtime_hours=longest)
    policy.allowed_offerings.set(GpuOffering.objects.filter(slug__in=slugs))
    return policy


def page_for(user: User, data: dict[str, Any] | None = None) -> Any:
    client = Client()
    client.force_login(user)
    return client.post("/workspaces/new/", data) if data is not None else client.get("/workspaces/new/")


def embedded(response: Any) -> dict[str, Any]:
    match = re.search(rb'<script id="request-form-data" type="application/json">(.*?)</script>', response.content)
    assert match, "the form's data is embedded in the page"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def offering_inputs(html: str) -> dict[str, str]:
    """Offering radio buttons by slug, with their tag text (to see ``disabled``)."""
    radios = re.finditer(r'<input type="radio" name="offering" value="([^"]+)"[^>]*>', html)
    return {m.group(1): m.group(0) for m in radios}


def test_a_member_sees_only_the_offerings_and_runtimes_their_lead_allows(
    org: Org, offerings: dict[str, GpuOffering]
) -> None:
    restrict(org.alpha, [MIG, "cpu"], default=2, longest=4)
    response = page_for(org.member)
    html = response.content.decode()
    assert response.status_code == 200
    assert set(offering_inputs(html)) == {MIG, "cpu"}
    assert H100 not in html and "l40s-shared-4" not in html  # not even in the embedded data
    assert 'name="max_runtime_hours" min="1" max="4" value="2"' in html
    assert 'at most <span id="runtime-max">4</span>' in html
    assert embedded(response)["teams"] == [
        {
            "slug": "alpha",
            "name": "Alpha",
            "default_runtime_hours": 2,
            "max_runtime_hours": 4,
            "offerings": ["cpu", MIG],
            "quota_left": {"cpu": None, MIG: "2"},
        }
    ]


def test_a_member_of_two_teams_gets_each_teams_choices(org: Org, offerings: dict[str, GpuOffering]) -> None:
    restrict(org.alpha, [MIG], default=2, longest=4)  # the lead is in alpha (restricted) and beta (not)
    response = page_for(org.lead)
    teams = {t["slug"]: t for t in embedded(response)["teams"]}
    assert teams["alpha"]["offerings"] == [MIG]
    assert (teams["alpha"]["default_runtime_hours"], teams["alpha"]["max_runtime_hours"]) == (2, 4)
    assert set(teams["beta"]["offerings"]) == set(offerings)
    assert (teams["beta"]["default_runtime_hours"], teams["beta"]["max_runtime_hours"]) == (8, 72)
    inputs = offering_inputs(response.content.decode())
    assert "disabled" not in inputs[MIG]  # alpha (first) is selected: beta-only offerings are hidden, disabled
    assert "disabled" in inputs[H100]
    beta = page_for(org.lead, {"team": "beta", "kind": "notebook"})  # sent back with errors, for beta
    assert 'max="72" value="8"' in beta.content.decode()
    assert "disabled" not in offering_inputs(beta.content.decode())[H100]


def test_quota_left_counts_the_members_own_cap(org: Org, offerings: dict[str, GpuOffering]) -> None:
    MemberCap.objects.create(team=org.alpha, user=org.member, flavour="H100-80GB-HBM3", cap=Decimal(3))
    Workspace.objects.create(name="mine", kind="notebook", team=org.alpha, owner=org.member, offering=offerings[H100],
                             image="x/y:1", cpu_millis=1000, memory_mib=1024, max_runtime_seconds=3600,
                             gpu_equivalents=Decimal(2), state="running")  # fmt: skip
    member = {t["slug"]: t for t in embedded(page_for(org.member))["teams"]}
    assert member["alpha"]["quota_left"][H100] == "1"  # cap 3 less own 2 (the team has 6 of 8 left)
    lead = {t["slug"]: t for t in embedded(page_for(org.lead))["teams"]}
    assert lead["alpha"]["quota_left"][H100] == "6"  # uncapped: the team's guarantee less its use
    assert lead["beta"]["quota_left"][H100] == "4"
    assert lead["beta"]["quota_left"][MIG] == "0"  # beta has no A100 quota


def test_gpu_counts_and_name_length_follow_the_offering_and_the_server(
    org: Org, offerings: dict[str, GpuOffering]
) -> None:
    response = page_for(org.member)
    data = embedded(response)
    assert data["offerings"][H100]["counts"] == [1, 2, 4, 8]
    assert data["offerings"][MIG]["counts"] == [1]
    assert data["offerings"]["cpu"]["counts"] == [0]
    assert 'maxlength="40"' in response.content.decode()
    sent_back = page_for(org.member, {"kind": "notebook", "team": "alpha", "offering": MIG}).content.decode()
    select = re.search(r'<select id="id_gpu_count" name="gpu_count">(.*?)</select>', sent_back, re.S)
    assert select and re.findall(r'value="(\d+)"', select.group(1)) == ["1"]


def test_a_job_given_a_notebook_image_is_told_which_images_jobs_run(
    org: Org, offerings: dict[str, GpuOffering]
) -> None:
    response = page_for(
        org.member,
        {"kind": "job", "name": "train", "team": "alpha", "offering": H100, "gpu_count": "1", "image": "scipy",
         "command": "python train.py", "workers": "1"},
    )  # fmt: skip
    assert response.status_code == 400
    assert "scipy is a notebook image; a training job needs a training job image: pytorch." in response.content.decode()


def test_a_job_priority_can_be_chosen_and_notebooks_stay_interactive(
    org: Org, offerings: dict[str, GpuOffering]
) -> None:
    html = page_for(org.member).content.decode()
    select = re.search(r'<select id="id_priority" name="priority">(.*?)</select>', html, re.S)
    assert select and re.findall(r'value="(\w+)"', select.group(1)) == ["high", "normal", "batch"]
    job = {"kind": "job", "name": "train", "team": "alpha", "offering": H100, "gpu_count": "1", "image": "pytorch",
           "command": "python train.py", "workers": "1", "priority": "batch"}  # fmt: skip
    assert page_for(org.member, job).status_code == 302
    assert Workspace.objects.get(name="train").priority == "batch"
    notebook = {
        "kind": "notebook",
        "name": "nb",
        "team": "alpha",
        "offering": MIG,
        "gpu_count": "1",
        "image": "scipy",
        "workers": "1",
        "priority": "normal",
    }  # the hidden job field is ignored
    assert page_for(org.member, notebook).status_code == 302  # fmt: skip
    assert Workspace.objects.get(name="nb").priority == "interactive"


def test_the_form_says_plainly_that_multi_worker_jobs_keep_nothing(org: Org, offerings: dict[str, GpuOffering]) -> None:
    html = page_for(org.member).content.decode()
    assert 'id="multi-worker-storage"' in html
    assert "Workers spread over several nodes run with no home volume" in html


def test_an_outsider_is_told_they_are_in_no_team_and_who_can_add_them(
    org: Org, offerings: dict[str, GpuOffering]
) -> None:
    response = page_for(org.outsider)
    html = response.content.decode()
    assert response.status_code == 200
    assert "You are in no team" in html
    assert "The lead of the team you work with can add you" in html and "oscar" in html
    assert 'id="request-form"' not in html
    refused = page_for(org.outsider, {"kind": "notebook", "name": "nb", "team": "alpha", "offering": MIG})
    assert refused.status_code == 403
    assert not Workspace.objects.exists()


def test_the_queue_suggests_only_what_the_policy_and_the_members_cap_allow(
    org: Org, offerings: dict[str, GpuOffering], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(services, "free_units", lambda offs: {o.slug: 8 for o in offs})
    set_quota(org.alpha, "L40S", 2)
    set_quota(org.alpha, "H200-141GB", 2)
    restrict(org.alpha, [H100, MIG, "l40s-shared-4"], default=2, longest=4)  # no H200, no 2g/3g MIG
    MemberCap.objects.create(team=org.alpha, user=org.member, flavour="L40S", cap=Decimal("0.1"))  # < 0.25
    Workspace.objects.create(name="waits", kind="notebook", team=org.alpha, owner=org.member, offering=offerings[H100],
                             image="x/y:1", cpu_millis=1000, memory_mib=1024, max_runtime_seconds=3600,
                             gpu_equivalents=Decimal(1), reason="Waiting.")  # fmt: skip
    [entry] = queue_view.queue_entries(org.member)
    assert entry["alternatives"] == ["NVIDIA A100-SXM4-80GB MIG 1g.10gb is free now"]
