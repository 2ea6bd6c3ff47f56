"""/metrics on the full stack, scraped by a real Prometheus server: the queue, the admission-wait histogram
and the allocation series carry the expected values, and the counters keep counting, without a reset,
when the work moves to another worker process (one killed, a new one started)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import cache

from portal.metrics import events
from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_images, install_offerings
from tests.conftest import Org, api_client_for
from tests.prometheus_fixtures import Prometheus, query
from tests.stack_fixtures import Worker, wait_for
from workspaces.models import Workspace

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
H100 = "H100-80GB-HBM3"
TOKEN = "scrape-me-0123456789"


def test_prometheus_reads_the_queue_waits_and_allocation_across_worker_processes(
    org: Org,
    stack: SimCluster,
    dedicated_worker: Callable[..., Worker],
    prometheus: Callable[..., Prometheus],
    live_server: Any,
    settings: Any,
) -> None:
    settings.PORTAL_METRICS_TOKEN = TOKEN
    settings.METRICS_EVENT_SETTLE_SECONDS = 0.5
    cache.delete(events.CACHE_KEY)  # totals of an earlier test's database
    first = dedicated_worker(SIMCLUSTER_JOB_SECONDS="600")
    install_offerings()
    install_images()
    operator = api_client_for(org.operator)
    quota = {"team": "alpha", "flavour": H100, "guaranteed": "2", "borrow_limit": "0"}
    assert operator.put("/api/v1/quotas/", quota, format="json").status_code == 200
    alice = api_client_for(org.member)
    asked = []
    for i in range(3):
        payload = {"kind": "notebook", "name": f"nb{i}", "team": "alpha", "offering": "h100-80gb-hbm3",
                   "gpu_count": 1, "image": "scipy"}  # fmt: skip
        response = alice.post("/api/v1/workspaces/", payload, format="json")
        assert response.status_code == 202, response.json()
        asked.append(int(response.json()["id"]))
    running = Workspace.objects.filter(pk__in=asked, state="running")
    wait_for(lambda: running.count() == 2, timeout=30, what="two notebooks within the guarantee to run")

    server = prometheus(live_server.url.removeprefix("http://"), job="gpu-portal", bearer_token=TOKEN)
    alpha = (("gpu_model", H100), ("team", "alpha"))

    def scraped(expr: str, labels: tuple[tuple[str, str], ...] = ()) -> float | None:
        return query(server, expr).get(tuple(sorted(labels)))

    # Prometheus's first scrape waits for its discovery's first update (5 s).
    wait_for(lambda: scraped("gpu_portal_gpus_allocated", alpha) == 2.0, timeout=30, what="two GPUs allocated")
    assert scraped("gpu_portal_queue_requests", alpha) == 1.0
    assert (scraped("gpu_portal_queue_oldest_wait_seconds", alpha) or 0) > 0
    # The third waits for alpha's quota, not for capacity: nothing waits within quota.
    assert query(server, "gpu_portal_queue_within_quota_requests") == {}
    waits = (("gpu_model", H100), ("kind", "notebook"), ("priority", "interactive"))
    wait_for(lambda: scraped("gpu_portal_admission_wait_seconds_count", waits) == 2.0, what="two admissions counted")
    assert scraped('gpu_portal_admission_wait_seconds_bucket{le="60.0"}', (*waits, ("le", "60.0"))) == 2.0
    admitted = (("gpu_model", H100), ("kind", "notebook"), ("state", "admitted"))
    assert scraped("gpu_portal_workspace_transitions_total", admitted) == 2.0
    passes = 'gpu_portal_loop_duration_seconds_count{loop="reconcile"}'
    before = scraped(passes, (("loop", "reconcile"),)) or 0.0
    assert before > 0

    # The work moves to another process: the first worker dies, a new one takes over and admits the third
    # once a GPU is released.
    first.kill()
    dedicated_worker(SIMCLUSTER_JOB_SECONDS="600")
    assert alice.post(f"/api/v1/workspaces/{asked[0]}/stop/").status_code in (200, 202)
    wait_for(lambda: Workspace.objects.filter(pk=asked[2], state="running").exists(), timeout=40,
             what="the third notebook to run after a release")  # fmt: skip
    wait_for(lambda: scraped("gpu_portal_workspace_transitions_total", admitted) == 3.0, timeout=20,
             what="the new process's admission counted with the first two")  # fmt: skip
    assert scraped("gpu_portal_admission_wait_seconds_count", waits) == 3.0
    # The pass that saw the third running is counted when it ends, which may be after the scrape above.
    wait_for(lambda: (scraped(passes, (("loop", "reconcile"),)) or 0.0) > before, timeout=20,
             what="the new process's reconcile passes counted on top of the first's")  # fmt: skip
    assert query(server, f"resets({passes}[10m])") == {(("loop", "reconcile"),): 0.0}
    assert query(server, 'resets(gpu_portal_workspace_transitions_total{state="admitted"}[10m])') == {admitted: 0.0}
    # Allocation follows the pods: the stopped one is gone, the third holds its GPU.
    wait_for(lambda: scraped("gpu_portal_gpus_allocated", alpha) == 2.0 and scraped("gpu_portal_queue_requests", alpha)
             is None, timeout=20, what="allocation after the release")  # fmt: skip
