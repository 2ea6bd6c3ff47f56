"""Borrowing and reclaiming on the full stack: team B borrows team A's idle H100s, A asks for its
guarantee back, two of B's borrowers get the notice, are preempted and queue again, A runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_images, install_offerings
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import Worker, wait_for
from workspaces.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)
H100 = "H100-80GB-HBM3"


def test_a_team_reclaims_its_guarantee_from_borrowers_after_notice(
    org: Org, stack: SimCluster, dedicated_worker: Callable[..., Worker]
) -> None:
    dedicated_worker(SIMCLUSTER_JOB_SECONDS="600", PREEMPTION_NOTICE_SECONDS="2")  # jobs outlive the test
    install_offerings()
    install_images()
    operator = api_client_for(org.operator)
    for team, borrow in (("alpha", "0"), ("beta", "4")):
        payload = {"team": team, "flavour": H100, "guaranteed": "4", "borrow_limit": borrow}
        assert operator.put("/api/v1/quotas/", payload, format="json").status_code == 200
    beta = api_client_for(org.beta_lead)
    alpha = api_client_for(org.member)

    def request(client: Any, team: str, name: str, kind: str = "job") -> int:
        payload: dict[str, Any] = {"kind": kind, "name": name, "team": team, "offering": "h100-80gb-hbm3",
                                   "gpu_count": 1, "image": "pytorch" if kind == "job" else "scipy"}  # fmt: skip
        if kind == "job":
            payload |= {"command": ["python", "train.py"], "priority": "batch"}
        response = client.post("/api/v1/workspaces/", payload, format="json")
        assert response.status_code == 202, response.json()
        return int(response.json()["id"])

    borrowers = [request(beta, "beta", f"b{i}") for i in range(8)]
    wait_for(lambda: Workspace.objects.filter(pk__in=borrowers, state="running").count() == 8, timeout=30,
             what="B's eight jobs (four borrowed) to run")  # fmt: skip
    assert Workspace.objects.filter(pk__in=borrowers, borrowing=True).count() == 4

    mine = [request(alpha, "alpha", f"a{i}", kind="notebook") for i in range(2)]

    def two_noticed() -> list[Workspace] | None:
        noticed = list(Workspace.objects.filter(pk__in=borrowers, preempt_at__isnull=False))
        return noticed if len(noticed) == 2 else None

    noticed = wait_for(two_noticed, what="the notice to two borrowers")
    assert len(noticed) == 2 and all(w.borrowing for w in noticed)
    for victim in noticed:
        assert any("Will be preempted at" in reason for reason in victim.events.values_list("reason", flat=True))
    wait_for(lambda: Workspace.objects.filter(pk__in=mine, state="running").count() == 2, timeout=30,
             what="A's notebooks to run")  # fmt: skip
    for victim in noticed:
        states = list(victim.events.values_list("to_state", flat=True))
        assert "preempted" in states, states
        victim.refresh_from_db()
        assert victim.state in ("queued", "admitted", "provisioning", "running")  # it queued again
    running = Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES, offering__gpu_model=H100)
    assert sum(w.gpu_equivalents for w in running) <= 8  # the department's guarantees: nothing over any limit
    assert sum(w.gpu_equivalents for w in running.filter(team=org.beta)) <= 8
