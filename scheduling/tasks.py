"""Celery tasks: thin wrappers that take ids, call the scheduling code, and retry only transient errors."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from portal.queue import enqueue_coalesced
from scheduling.kube.calls import TransientKubeError
from scheduling.kube.client import kube
from scheduling.loops import (
    cycle,
    elastic,
    idle,
    mig_repartition,
    passes,
    provisioning,
    reconcile,
    runtime_warning,
    tasknames,
    telemetry,
    telemetry_retention,
)
from scheduling.loops.locks import single_flight

# Transient cluster errors (timeouts, 5xx, 429) retry with exponential backoff; anything else is a bug
# or a permanent refusal and must surface, not loop.
RETRY: dict[str, Any] = {
    "autoretry_for": (TransientKubeError,),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": settings.KUBE_TASK_MAX_RETRIES,
}


@shared_task(name=tasknames.RUN_CYCLE, **RETRY)
def run_cycle() -> int:
    return cycle.run_cycle(kube())


@shared_task(name=tasknames.PROVISION, **RETRY)
def provision_workspace(workspace_id: int) -> None:
    provisioning.provision(kube(), workspace_id)


# No autoretry: a transient failure sends that workspace to a task of its own, which retries; the rest of
# the batch is done.
@shared_task(name=tasknames.PROVISION_MANY)
def provision_workspaces(workspace_ids: list[int]) -> int:
    return provisioning.provision_many(kube(), workspace_ids)


@shared_task(name=tasknames.SCALE_JOB, **RETRY)
def scale_job(workspace_id: int) -> int | None:
    return elastic.scale(kube(), workspace_id)


@shared_task(name=tasknames.TEARDOWN, **RETRY)
def teardown_workspace(workspace_id: int, delete_volume: bool) -> None:
    provisioning.teardown(kube(), workspace_id, delete_volume=delete_volume)
    # A release may let queued workspaces start.
    enqueue_coalesced(tasknames.RUN_CYCLE)


@shared_task(name=tasknames.RECONCILE, **RETRY)
def reconcile_cluster() -> dict[str, int]:
    # Safe to run concurrently, but two passes at once only double the work.
    with single_flight("reconcile") as acquired:
        if not acquired:
            return {}
        with passes.timed("reconcile"):
            return reconcile.reconcile(kube())


@shared_task(name=tasknames.COLLECT_TELEMETRY, **RETRY)
def collect_telemetry() -> int:
    with single_flight("telemetry") as acquired:
        if not acquired:
            return 0
        with passes.timed("telemetry"):
            collected = telemetry.collect(kube(), timezone.now())
            idle.apply_idle_rules(timezone.now())  # judged on what was just collected
        return collected.samples


@shared_task(name=tasknames.COMPACT_TELEMETRY)
def compact_telemetry() -> dict[str, int]:
    now = timezone.now()
    return {"compacted": telemetry_retention.compact(now), "expired": telemetry_retention.expire(now)}


@shared_task(name=tasknames.WARN_RUNTIME)
def warn_runtime() -> int:
    with single_flight("runtime-warning") as acquired:
        return runtime_warning.warn_near_deadline(timezone.now()) if acquired else 0


@shared_task(name=tasknames.REPARTITION_MIG, **RETRY)
def repartition_mig() -> dict[str, list[str]]:
    if not settings.MIG_REPARTITION_ENABLED:
        return {}
    with single_flight("mig-repartition") as acquired:
        if not acquired:
            return {}
        done = mig_repartition.run_pass(kube(), timezone.now())
        return {k: list(v) for k, v in asdict(done).items() if v}
