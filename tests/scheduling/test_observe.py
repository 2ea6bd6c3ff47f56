"""Workspace states read off pod and job objects (pure)."""

from __future__ import annotations

from typing import Any

from scheduling.loops.observe import observe_job, observe_pod


def pod(phase: str, node: str = "gpu-a100-0", **status: Any) -> dict[str, Any]:
    return {"spec": {"nodeName": node}, "status": {"phase": phase, **status}}


def ready(value: str) -> dict[str, Any]:
    return {"conditions": [{"type": "Ready", "status": value}]}


def test_it_reads_a_pending_unscheduled_pod_with_the_scheduler_message() -> None:
    message = "0/7 nodes are available: 2 Insufficient nvidia.com/gpu."
    seen = observe_pod(
        {
            "spec": {},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
                ],
            },
        }
    )
    assert (seen.state, seen.reason) == ("provisioning", f"Waiting for a node: {message}")


def test_it_marks_when_the_scheduler_refuses_a_pod_for_the_pinned_placement_check() -> None:
    refused = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/7 nodes",
               "lastTransitionTime": "2026-12-02T10:00:00Z"}  # fmt: skip
    pending = {"spec": {}, "status": {"phase": "Pending", "conditions": [refused]}}
    assert observe_pod(pending).unschedulable_since == "2026-12-02T10:00:00Z"
    gated = {**refused, "reason": "SchedulingGated"}
    assert observe_pod({"spec": {}, "status": {"phase": "Pending", "conditions": [gated]}}).unschedulable_since == ""
    job: dict[str, Any] = {"status": {}}
    assert observe_job(job, [pending], workers=1).unschedulable_since == "2026-12-02T10:00:00Z"


def test_it_reads_running_and_ready() -> None:
    assert observe_pod(pod("Running", **ready("True"))).state == "running"
    assert observe_pod(pod("Running", **ready("False"))).state == "provisioning"


def test_it_reads_deadline_and_failures() -> None:
    assert observe_pod(pod("Failed", reason="DeadlineExceeded")).state == "expired"
    failed = observe_pod(pod("Failed", message="OOMKilled"))
    assert (failed.state, failed.reason, failed.recreate) == ("failed", "Failed: OOMKilled", False)


def test_it_recreates_pods_rejected_at_admission_or_evicted() -> None:
    rejected = observe_pod(pod("Failed", reason="UnexpectedAdmissionError", message="Allocate failed"))
    assert rejected.recreate and rejected.state == "admitted"
    evicted = observe_pod(pod("Failed", conditions=[{"type": "DisruptionTarget", "status": "True"}]))
    assert evicted.recreate


def test_it_reports_a_missing_pod() -> None:
    assert observe_pod(None).state is None


def test_it_reads_jobs() -> None:
    job = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert observe_job(job, [], 2).state == "succeeded"
    failed = {
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ]
        }
    }
    assert observe_job(failed, [], 2).reason == "Failed: Job has reached the specified backoff limit"
    deadline = {"status": {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}}
    assert observe_job(deadline, [], 1).state == "expired"
    running: dict[str, Any] = {"status": {}}
    workers = [pod("Running", "n1", **ready("True")), pod("Running", "n2", **ready("True"))]
    seen = observe_job(running, workers, 2)
    assert (seen.state, seen.node) == ("running", "n1, n2")
    assert observe_job(running, workers[:1], 2).state == "provisioning"
