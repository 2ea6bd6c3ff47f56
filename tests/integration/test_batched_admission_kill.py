"""A worker killed in the middle of a batched admission, on the full stack (PostgreSQL, Redis, a real worker,
the simulated cluster): the scheduling cycle writes all its admissions at its end, in one transaction that
holds the team's quota row. This test stops that cycle exactly there, kills the worker, and shows that
nothing of the half-done batch was kept, and that a new worker admits exactly what the quota allows: no
admission beyond the guarantee, no request lost, no second pod for any workspace, no admission logged twice.

Where the cycle stops: the test holds a row lock on the first queued workspace (a second connection, as
another writer would), so the cycle, having decided its batch, waits on that row when it locks the batch's
rows for writing. PostgreSQL shows that wait (``pg_stat_activity``); the test kills the worker then.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection

from scheduling.simcluster.testing import SimCluster
from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import Worker, _database_url, managed_pods, wait_for
from workspaces.models import Workspace, WorkspaceEvent

pytestmark = pytest.mark.django_db(transaction=True)
GUARANTEE = 4  # whole H100s for team alpha; each notebook asks for one
REQUESTS = 8


def request(api: Any, name: str) -> int:
    payload = {"kind": "notebook", "name": name, "team": "alpha", "offering": "h100-80gb-hbm3", "gpu_count": 1}
    response = api.post("/api/v1/workspaces/", payload | {"image": "scipy"}, format="json")
    assert response.status_code == 202, response.json()
    return int(response.json()["id"])


def cycle_waits_on_a_workspace_row() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND query ILIKE %s AND query ILIKE %s",
            ["%workspaces_workspace%", "%FOR UPDATE%"],
        )
        return bool(cursor.fetchone()[0])


def test_a_worker_killed_mid_batch_admits_nothing_twice_and_loses_nothing(
    org: Org, stack: SimCluster, dedicated_worker: Callable[..., Worker]
) -> None:
    offerings = install_offerings()
    install_images()
    set_quota(org.alpha, offerings["h100-80gb-hbm3"].flavour, GUARANTEE)
    api = api_client_for(org.member)
    worker = dedicated_worker()
    worker.kill()  # the requests queue up with nobody to admit them: the next cycle takes them in one batch
    ids = [request(api, f"batch{i}") for i in range(REQUESTS)]

    with psycopg.connect(_database_url()) as blocker:
        blocker.execute("SELECT id FROM workspaces_workspace WHERE id = %s FOR UPDATE", [ids[0]])
        worker.start()
        wait_for(cycle_waits_on_a_workspace_row, timeout=60, what="the cycle to wait on a row of its batch")
        worker.kill()
        blocker.rollback()  # the killed worker's transaction can now only roll back

    # Nothing of the killed batch was kept: every request is still queued, none logged as admitted.
    assert sorted(Workspace.objects.filter(pk__in=ids, state="queued").values_list("pk", flat=True)) == ids
    assert not WorkspaceEvent.objects.filter(workspace__in=ids, to_state="admitted").exists()

    worker.start()

    def settled() -> bool:
        states = Counter(Workspace.objects.filter(pk__in=ids).values_list("state", flat=True))
        return states["running"] == GUARANTEE and sum(managed_pods(stack, "team-alpha").values()) == GUARANTEE

    wait_for(settled, timeout=90, what=f"{GUARANTEE} notebooks to run")
    running = set(Workspace.objects.filter(pk__in=ids, state="running").values_list("pk", flat=True))
    assert Workspace.objects.filter(pk__in=ids, state="queued").count() == REQUESTS - GUARANTEE  # none lost
    assert all(reason.startswith("Waiting for team quota") for reason in
               Workspace.objects.filter(pk__in=ids, state="queued").values_list("reason", flat=True))  # fmt: skip
    assert managed_pods(stack, "team-alpha") == Counter(dict.fromkeys(running, 1))  # one pod each, none for the queued
    admissions = Counter(
        WorkspaceEvent.objects.filter(workspace__in=ids, to_state="admitted").values_list("workspace", flat=True)
    )
    assert admissions == Counter(dict.fromkeys(running, 1))  # admitted once each, and only those
