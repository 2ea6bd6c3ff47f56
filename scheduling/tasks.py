"""Celery tasks: thin wrappers that take ids, call the scheduling code, and retry only transient errors."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from portal.queue import enqueue_coalesced, mark_started
from scheduling.kube.calls import TransientKubeError
from scheduling.kube.client import kube
from scheduling.loops import cycle, provisioning, reconcile
from scheduling.loops.locks import single_flight

# Transient cluster errors (timeouts, 5xx, 429) retry with exponential backoff; anything else is a bug
# or a permanent refusal and must surface, not loop.
RETRY: dict[str, Any] = {
    "autoretry_for": (TransientKubeError,),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": 8,
}


@shared_task(name="scheduling.run_cycle", **RETRY)
def run_cycle() -> int:
    mark_started("scheduling.run_cycle")  # requests arriving from now on trigger a further cycle
    return cycle.run_cycle(kube())


@shared_task(name="scheduling.provision_workspace", **RETRY)
def provision_workspace(workspace_id: int) -> None:
    provisioning.provision(kube(), workspace_id)


@shared_task(name="scheduling.teardown_workspace", **RETRY)
def teardown_workspace(workspace_id: int, delete_volume: bool) -> None:
    provisioning.teardown(kube(), workspace_id, delete_volume=delete_volume)
    # A release may let queued workspaces start.
    enqueue_coalesced("scheduling.run_cycle")


@shared_task(name="scheduling.reconcile", **RETRY)
def reconcile_cluster() -> dict[str, int]:
    # Safe to run concurrently, but two passes at once only double the work.
    with single_flight("reconcile") as acquired:
        return reconcile.reconcile(kube()) if acquired else {}
