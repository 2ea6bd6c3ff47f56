"""An elastic training job on the full stack (issue 18, part 4): team beta's job of 2 to 8 workers starts at
2, grows to 8 on the idle H100s (6 of them alpha's guarantee), then alpha asks for its guarantee: beta's job
gets the notice, shrinks back to 2 (never preempted whole) and alpha's job runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from kubernetes import client

from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_images, install_offerings
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import Worker, wait_for
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)
H100 = "H100-80GB-HBM3"


def _request(api: Any, team: str, name: str, **shape: Any) -> Workspace:
    payload = {"kind": "job", "name": name, "team": team, "offering": "h100-80gb-hbm3", "gpu_count": 1,
               "image": "pytorch", "command": ["python", "train.py"], "priority": "normal"} | shape  # fmt: skip
    response = api.post("/api/v1/workspaces/", payload, format="json")
    assert response.status_code == 202, response.json()
    return Workspace.objects.get(pk=response.json()["id"])


def _fresh(workspace: Workspace) -> Workspace:
    workspace.refresh_from_db()
    return workspace


def test_an_elastic_job_grows_on_idle_capacity_and_shrinks_for_the_lender(
    org: Org, stack: SimCluster, dedicated_worker: Callable[..., Worker]
) -> None:
    dedicated_worker(SIMCLUSTER_JOB_SECONDS="600", PREEMPTION_NOTICE_SECONDS="2")  # jobs outlive the test
    install_offerings()
    install_images()
    operator = api_client_for(org.operator)
    for team, guaranteed, borrow in (("alpha", "6", "0"), ("beta", "2", "6")):
        payload = {"team": team, "flavour": H100, "guaranteed": guaranteed, "borrow_limit": borrow}
        assert operator.put("/api/v1/quotas/", payload, format="json").status_code == 200

    elastic = _request(api_client_for(org.beta_lead), "beta", "elastic", workers=8, min_workers=2)
    assert (elastic.workers, elastic.min_workers, elastic.max_workers) == (2, 2, 8)
    grown = wait_for(lambda: (w := _fresh(elastic)).state == "running" and w.workers == 8, timeout=30,
                     what="the elastic job to run and grow to its maximum of 8")  # fmt: skip
    assert grown
    batch = client.BatchV1Api(stack.api_client())
    namespace, name = "team-beta", f"ws-{elastic.pk}-elastic"
    wait_for(lambda: batch.read_namespaced_job(name, namespace).spec.parallelism == 8, what="its Job scaled to 8")
    assert batch.read_namespaced_job(name, namespace).spec.completions == 8

    lender = _request(api_client_for(org.member), "alpha", "lender", workers=6)
    noticed = wait_for(lambda: _fresh(elastic).shrink_to, what="the notice to shrink")
    assert noticed == 2  # to its minimum: alpha takes back its 6
    assert elastic.preempt_at is None and elastic.workers == 8  # the notice period: it keeps them for now
    wait_for(lambda: _fresh(lender).state == "running", timeout=30, what="the lender's job to run")

    elastic = _fresh(elastic)
    assert (elastic.state, elastic.workers, elastic.shrink_to) == ("running", 2, None)
    assert batch.read_namespaced_job(name, namespace).spec.parallelism == 2
    states = set(elastic.events.values_list("to_state", flat=True))
    assert "preempted" not in states  # it shrank instead
    sizes = [size for _, size, _ in elastic.size_history()]
    assert sizes[0] == 2 and 8 in sizes and sizes[-1] == 2
    assert any("Will shrink to 2 workers" in why for _, _, why in elastic.size_history())
    held = Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES, offering__gpu_model=H100)
    assert sum(w.gpu_equivalents for w in held) <= 8

    browser = Client()
    browser.force_login(org.beta_lead)
    page = browser.get(f"/workspaces/{elastic.pk}/").content.decode()
    assert 'id="size-history"' in page and "Grew to 8 of at most 8 workers" in page and "Shrank to 2 workers" in page
