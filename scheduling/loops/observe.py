"""Read a workspace's state off its Kubernetes objects. Pure: dicts in, an observation out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workspaces.models import Workspace

State = Workspace.State

# Kubelet admission failures leave the pod Failed for good; it must be recreated (GPU-ON-KUBERNETES.md 9.4).
RECREATE_REASONS = ("UnexpectedAdmissionError", "Evicted", "Preempting", "NodeLost", "Terminated")


JOB_DONE = "Finished successfully."  # every worker of a training job ran to completion


@dataclass(frozen=True)
class Observation:
    state: str | None  # None: the objects are missing
    reason: str
    node: str = ""
    recreate: bool = False  # the pod is beyond repair where it is; delete it and provision again
    unschedulable_since: str = ""  # kube-scheduler's PodScheduled=False/Unschedulable time, if it says so


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    conditions: list[Mapping[str, Any]] = obj.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


def _waiting_reason(pod: Mapping[str, Any]) -> str:
    for status in pod.get("status", {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting")
        if waiting:
            return str(waiting.get("reason") or "starting")
    return "starting"


def _container_failure(pod: Mapping[str, Any]) -> str:
    """What a failed container left as its termination message (e.g. CUDA's out-of-memory error on an MPS
    share); the pod itself carries no reason when a container fails."""
    for status in pod.get("status", {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("exitCode") and terminated.get("message"):
            return str(terminated["message"])
    return ""


def _pending(pod: Mapping[str, Any]) -> Observation:
    node = pod.get("spec", {}).get("nodeName") or ""
    if not node:
        scheduled = _condition(pod, "PodScheduled") or {}
        message = scheduled.get("message") or "waiting for the scheduler"
        refused = scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable"
        since = str(scheduled.get("lastTransitionTime") or "") if refused else ""
        return Observation(State.PROVISIONING, f"Waiting for a node: {message}", unschedulable_since=since)
    return Observation(State.PROVISIONING, f"Starting on {node} ({_waiting_reason(pod)}).", node)


def observe_pod(pod: Mapping[str, Any] | None) -> Observation:
    """A notebook's state from its pod."""
    if pod is None:
        return Observation(None, "Its pod is missing.")
    status = pod.get("status", {})
    phase = status.get("phase")
    node = pod.get("spec", {}).get("nodeName") or ""
    if phase == "Pending":
        return _pending(pod)
    if phase == "Running":
        ready = _condition(pod, "Ready")
        if ready and ready.get("status") == "True":
            return Observation(State.RUNNING, f"Running on {node}.", node)
        return Observation(State.PROVISIONING, f"Started on {node}; waiting until it is ready.", node)
    if phase == "Succeeded":
        return Observation(State.STOPPED, "The notebook server exited.", node)
    reason = status.get("reason") or ""
    message = status.get("message") or _container_failure(pod) or reason or "the container failed"
    if reason == "DeadlineExceeded":
        return Observation(State.EXPIRED, "Reached the longest runtime the policy allows.", node)
    disrupted = _condition(pod, "DisruptionTarget")
    if reason in RECREATE_REASONS or (disrupted and disrupted.get("status") == "True"):
        return Observation(
            State.ADMITTED, f"Its pod was stopped by the cluster ({message}); starting it again.", node, True
        )
    return Observation(State.FAILED, f"Failed: {message}", node)


def observe_job(
    job: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]], workers: int, *, minimum: int | None = None
) -> Observation:
    """A training job's state from its Job and the Job's pods. An elastic job (``minimum``: its fewest workers)
    runs once that many are ready; the workers it grows by join as they start."""
    if job is None:
        return Observation(None, "Its job is missing.")
    for kind, state in (("Complete", State.SUCCEEDED), ("Failed", State.FAILED)):
        condition = _condition(job, kind)
        if condition and condition.get("status") == "True":
            if condition.get("reason") == "DeadlineExceeded":
                return Observation(State.EXPIRED, "Reached the longest runtime the policy allows.")
            if state == State.SUCCEEDED:
                return Observation(state, JOB_DONE)
            failure = next((m for p in pods if (m := _container_failure(p))), "")  # what the Job does not say
            return Observation(state, f"Failed: {condition.get('message')}" + (f" ({failure})" if failure else ""))
    live = [p for p in pods if p.get("status", {}).get("phase") in ("Pending", "Running")]
    nodes = sorted({p["spec"]["nodeName"] for p in live if p.get("spec", {}).get("nodeName")})
    ready = [p for p in live if (_condition(p, "Ready") or {}).get("status") == "True"]
    if minimum is not None and len(ready) >= minimum:
        running = f"Running {len(ready)} of {workers} worker(s) (elastic, at least {minimum}) on {', '.join(nodes)}."
        return Observation(State.RUNNING, running, ", ".join(nodes))
    if len(ready) >= workers:
        return Observation(State.RUNNING, f"Running {workers} worker(s) on {', '.join(nodes)}.", ", ".join(nodes))
    waiting = [p for p in live if p.get("status", {}).get("phase") == "Pending"]
    if waiting:
        first = _pending(waiting[0])
        return Observation(
            State.PROVISIONING,
            f"{len(ready)}/{workers} workers ready. {first.reason}",
            ", ".join(nodes),
            unschedulable_since=first.unschedulable_since,
        )
    return Observation(State.PROVISIONING, f"{len(ready)}/{workers} workers ready.", ", ".join(nodes))
