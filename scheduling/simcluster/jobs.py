"""The batch/v1 Job controller as a pure reconcile function, with Kubernetes 1.34 semantics.

reconcile_job() looks at a Job and the pods it owns and says which pods to create and delete, the
Job's new status and whether the Job's time to live has run out. Supported: parallelism,
completions (or none: a work queue), Indexed and NonIndexed completion, backoffLimit (failed pods,
plus container restarts under restartPolicy OnFailure), activeDeadlineSeconds, suspend,
ttlSecondsAfterFinished, pod-failure back-off (10 s doubling to 10 min) and the two-step finish
(SuccessCriteriaMet then Complete, FailureTarget then Failed once no pod is terminating).
Elastic Indexed Jobs (1.27+): an Indexed Job whose completions equal its parallelism may change both
together; scaling up creates the new indexes, scaling down removes the pods of the highest indexes.
Not supported: podFailurePolicy, backoffLimitPerIndex, successPolicy, managedBy.

Counters are derived from the pods present and never go down, so a caller that deletes pods
immediately (no finalizers) gets the same counts as one that keeps terminated pods.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduling.simcluster.defaults import FieldError, default_pod_spec, format_time, parse_time
from scheduling.simcluster.patch import clone
from scheduling.simcluster.scheduler import make_event

Obj = dict[str, Any]

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
BACKOFF_REASON, BACKOFF_MESSAGE = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
DEADLINE_REASON, DEADLINE_MESSAGE = "DeadlineExceeded", "Job was active longer than specified deadline"
COMPLETE_REASON, COMPLETE_MESSAGE = "CompletionsReached", "Reached expected number of succeeded pods"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand: no vowels, no look-alikes
_BACKOFF_BASE, _BACKOFF_MAX = 10, 600
_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class JobActions:
    """What the caller applies: create create_pods (names already chosen), delete the pods named in
    delete_pods, replace the Job's status with status, delete the Job (and its pods) if delete_job,
    and record events ((type, reason, message) about the Job, see job_events())."""

    create_pods: list[Obj]
    delete_pods: list[str]
    status: Obj
    delete_job: bool = False
    events: tuple[tuple[str, str, str], ...] = ()


# ---------------------------------------------------------------------------------------------
# Create-time defaults and validation


def default_job(job: Mapping[str, Any]) -> Obj:
    """The Job as the API server stores it on create (SetDefaults_Job + generateSelector).

    metadata.uid must already be set: the selector and pod labels are derived from it.
    """
    out: Obj = clone(dict(job))
    out["apiVersion"], out["kind"] = "batch/v1", "Job"
    meta = out.setdefault("metadata", {})
    uid, name = meta["uid"], meta["name"]
    spec = out.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", _MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {})
    user_labels = dict(template_meta.get("labels") or {})
    if not spec.get("manualSelector"):
        labels = template_meta.setdefault("labels", {})
        for key, value in ((LEGACY_JOB_NAME_LABEL, name), (JOB_NAME_LABEL, name)):
            labels.setdefault(key, value)
        for key, value in ((LEGACY_CONTROLLER_UID_LABEL, uid), (CONTROLLER_UID_LABEL, uid)):
            labels.setdefault(key, value)
        match_labels = spec.setdefault("selector", {}).setdefault("matchLabels", {})
        match_labels.setdefault(CONTROLLER_UID_LABEL, uid)
    if not meta.get("labels"):
        # Defaulting copies the template's labels: the user's at create time, and when there were
        # none, the generated ones on every later read.
        meta["labels"] = user_labels or dict(template_meta.get("labels") or {})
    template["spec"] = default_pod_spec(template.get("spec") or {})
    meta.setdefault("generation", 1)
    out["status"] = {}
    return out


def job_errors(job: Mapping[str, Any]) -> list[FieldError]:
    """Job-specific validation the server applies on create (combine with
    defaults.extended_resource_errors({"spec": template spec}, path="spec.template.spec"))."""
    spec = job.get("spec") or {}
    errors = []
    if (spec.get("template") or {}).get("spec", {}).get("restartPolicy") not in ("OnFailure", "Never"):
        errors.append(
            FieldError("spec.template.spec.restartPolicy", 'Required value: valid values: "OnFailure", "Never"')
        )
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        errors.append(FieldError("spec.completions", "Required value: when completion mode is Indexed"))
    return errors


def elastic(job: Mapping[str, Any]) -> bool:
    """Whether an update may change ``spec.completions``: only an Indexed Job that keeps completions equal
    to parallelism (Kubernetes' elastic Indexed Jobs); any other Job's completions are immutable."""
    spec = job.get("spec") or {}
    completions = spec.get("completions")
    indexed = spec.get("completionMode") == "Indexed"
    return indexed and completions is not None and completions == spec.get("parallelism")


# ---------------------------------------------------------------------------------------------
# Completed-index sets in the "1,3-5" notation of status.completedIndexes


def parse_indexes(text: str | None) -> set[int]:
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        out.update(range(int(first), int(last or first) + 1))
    return out


def format_indexes(indexes: Iterable[int]) -> str:
    ordered = sorted(set(indexes))
    ranges: list[list[int]] = []
    for i in ordered:
        if ranges and ranges[-1][1] == i - 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


# ---------------------------------------------------------------------------------------------
# Reconcile


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _is_active(pod: Mapping[str, Any]) -> bool:
    return _phase(pod) not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get("deletionTimestamp")


def _is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _index(pod: Mapping[str, Any]) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    return int(raw) if raw is not None and str(raw).isdigit() else None


def _name(pod: Mapping[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def _condition(kind: str, reason: str, message: str, now: datetime, status: str = "True") -> Obj:
    stamp = format_time(now)
    return {
        "type": kind,
        "status": status,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def _true_condition(status: Mapping[str, Any], kind: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c["type"] == kind and c["status"] == "True"), None)


def _set_condition(status: Obj, condition: Obj) -> None:
    conditions = [c for c in status.get("conditions") or [] if c["type"] != condition["type"]]
    status["conditions"] = [*conditions, condition]


def _finish_time(status: Mapping[str, Any]) -> datetime | None:
    finished = _true_condition(status, "Complete") or _true_condition(status, "Failed")
    return parse_time(finished["lastTransitionTime"]) if finished else None


def _failure_time(pod: Mapping[str, Any]) -> datetime | None:
    stamps = [
        s["state"]["terminated"]["finishedAt"]
        for s in (pod.get("status") or {}).get("containerStatuses") or []
        if "terminated" in s.get("state", {})
    ]
    return max(map(parse_time, stamps)) if stamps else None


def _restart_count(pods: Iterable[Mapping[str, Any]]) -> int:
    return sum(
        s.get("restartCount", 0)
        for p in pods
        for group in ("initContainerStatuses", "containerStatuses")
        for s in (p.get("status") or {}).get(group) or []
    )


def reconcile_job(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: datetime, *, rng: random.Random
) -> JobActions:
    """One sync of the Job controller. pods: the pods the Job owns (by ownerReference/selector)."""
    spec = job.get("spec") or {}
    status = clone(dict(job.get("status") or {}))
    finished_at = _finish_time(status)
    if finished_at is not None:
        ttl = spec.get("ttlSecondsAfterFinished")
        expired = ttl is not None and now >= finished_at + timedelta(seconds=int(ttl))
        return JobActions([], [], status, delete_job=expired)

    sync = _Sync(job, pods, now, rng, status)
    sync.run()
    return JobActions(sync.create, sync.delete, sync.finalize_status(), events=tuple(sync.events))


class _Sync:
    """The working state of one reconcile; run() fills create/delete/events and the status."""

    def __init__(
        self,
        job: Mapping[str, Any],
        pods: Sequence[Mapping[str, Any]],
        now: datetime,
        rng: random.Random,
        status: Obj,
    ) -> None:
        self.job, self.now, self.rng, self.status = job, now, rng, status
        self.spec = job.get("spec") or {}
        self.indexed = self.spec.get("completionMode") == "Indexed"
        self.active = [p for p in pods if _is_active(p)]
        self.terminating = [p for p in pods if not _is_active(p) and _phase(p) not in ("Succeeded", "Failed")]
        self.succeeded_pods = [p for p in pods if _phase(p) == "Succeeded"]
        self.failed_pods = [p for p in pods if _phase(p) == "Failed"]
        self.create: list[Obj] = []
        self.delete: list[str] = []
        self.events: list[tuple[str, str, str]] = []
        completions = self.spec.get("completions")
        self.completed = parse_indexes(status.get("completedIndexes"))
        if self.indexed:
            self.completed |= {
                i for p in self.succeeded_pods if (i := _index(p)) is not None and i < int(completions or 0)
            }
        self.succeeded = (
            len(self.completed) if self.indexed else max(status.get("succeeded", 0), len(self.succeeded_pods))
        )
        self.failed = max(status.get("failed", 0), len(self.failed_pods))

    # -- steps -----------------------------------------------------------------------------

    def run(self) -> None:
        if self._suspend():
            return
        self.status.setdefault("startTime", format_time(self.now))
        target = _true_condition(self.status, "FailureTarget") or _true_condition(self.status, "SuccessCriteriaMet")
        if target is None:
            target = self._failure() or self._success()
            if target is not None:
                _set_condition(self.status, target)
                self._remove_active(count_as_failed=target["type"] == "FailureTarget")
        elif self.active:
            self._remove_active(count_as_failed=False)  # asked before; already counted
        if target is None:
            self._create_or_trim()
        elif not self.terminating and not self.active:
            self._finish(target)

    def _suspend(self) -> bool:
        suspended = _true_condition(self.status, "Suspended")
        if self.spec.get("suspend"):
            if suspended is None:
                _set_condition(self.status, _condition("Suspended", "JobSuspended", "Job suspended", self.now))
                self.events.append(("Normal", "Suspended", "Job suspended"))
            # Suspending stops the clock: activeDeadlineSeconds counts again from the resume.
            self.status.pop("startTime", None)
            self._remove_active(count_as_failed=False)
            return True
        if suspended is not None:
            _set_condition(self.status, _condition("Suspended", "JobResumed", "Job resumed", self.now, status="False"))
            self.events.append(("Normal", "Resumed", "Job resumed"))
            self.status["startTime"] = format_time(self.now)
        return False

    def _failure(self) -> Obj | None:
        limit = int(self.spec.get("backoffLimit", 6))
        restarts = 0
        if (self.spec.get("template") or {}).get("spec", {}).get("restartPolicy") == "OnFailure":
            restarts = _restart_count(self.active)
        # Under OnFailure, container restarts count against the limit (pastBackoffLimitOnFailure).
        restarts_exceed = restarts > 0 if limit == 0 else restarts >= limit
        if self.failed > limit or restarts_exceed:
            self.events.append(("Warning", BACKOFF_REASON, BACKOFF_MESSAGE))
            return _condition("FailureTarget", BACKOFF_REASON, BACKOFF_MESSAGE, self.now)
        deadline = self.spec.get("activeDeadlineSeconds")
        if deadline is not None and self.now >= parse_time(self.status["startTime"]) + timedelta(seconds=int(deadline)):
            self.events.append(("Warning", DEADLINE_REASON, DEADLINE_MESSAGE))
            return _condition("FailureTarget", DEADLINE_REASON, DEADLINE_MESSAGE, self.now)
        return None

    def _success(self) -> Obj | None:
        completions = self.spec.get("completions")
        # A work queue (no completions) is done once any pod succeeded and none is still running.
        done = self.succeeded >= int(completions) if completions is not None else self.succeeded > 0 and not self.active
        return _condition("SuccessCriteriaMet", COMPLETE_REASON, COMPLETE_MESSAGE, self.now) if done else None

    def _finish(self, target: Mapping[str, Any]) -> None:
        final = "Failed" if target["type"] == "FailureTarget" else "Complete"
        _set_condition(self.status, _condition(final, target["reason"], target["message"], self.now))
        if final == "Complete":
            self.status["completionTime"] = format_time(self.now)
            self.events.append(("Normal", "Completed", "Job completed"))

    def _remove_active(self, *, count_as_failed: bool) -> None:
        for pod in self.active:
            self._delete(pod)
        if count_as_failed:
            self.failed += len(self.active)
        self.terminating += self.active
        self.active = []

    def _delete(self, pod: Mapping[str, Any]) -> None:
        self.delete.append(_name(pod))
        self.events.append(("Normal", "SuccessfulDelete", f"Deleted pod: {_name(pod)}"))

    def _in_backoff(self) -> bool:
        """Replacement pods wait 10 s * 2^(failures-1), at most 10 min, after the latest failure."""
        if not self.failed_pods:
            return False
        latest = max((t for p in self.failed_pods if (t := _failure_time(p)) is not None), default=None)
        if latest is None:
            return False
        delay = min(_BACKOFF_BASE * 2 ** (self.failed - 1), _BACKOFF_MAX)
        return self.now < latest + timedelta(seconds=delay)

    def _create_or_trim(self) -> None:
        parallelism = int(self.spec.get("parallelism", 1))
        if self.indexed:
            self._sync_indexed(parallelism)
            return
        completions = self.spec.get("completions")
        if completions is None:
            wanted = 0 if self.succeeded else parallelism
        else:
            wanted = min(parallelism, int(completions) - self.succeeded)
        excess = len(self.active) - wanted
        if excess > 0 and not (completions is None and self.succeeded):
            # Drop pods that are not ready yet first, newest first.
            for pod in sorted(self.active, key=lambda p: (_is_ready(p), p["metadata"].get("creationTimestamp", "")))[
                :excess
            ]:
                self._delete(pod)
                self.active.remove(pod)
                self.terminating.append(pod)
        if excess < 0 and not self._in_backoff():
            self.create += [self._new_pod(None) for _ in range(-excess)]

    def _sync_indexed(self, parallelism: int) -> None:
        completions = int(self.spec.get("completions") or 0)
        seen: set[int] = set()
        for pod in list(self.active):
            index = _index(pod)
            if index is None or index in seen or index in self.completed or index >= completions:
                self._delete(pod)  # duplicates, pods for done indexes and for indexes scaled away
                self.active.remove(pod)
                self.terminating.append(pod)
            else:
                seen.add(index)
        pending = [i for i in range(completions) if i not in self.completed | seen]
        room = max(parallelism - len(self.active), 0)
        if pending and room and not self._in_backoff():
            self.create += [self._new_pod(i) for i in pending[:room]]

    def _new_pod(self, index: int | None) -> Obj:
        """A pod from the template, as the controller POSTs it (before the server's defaulting)."""
        meta = self.job["metadata"]
        template = clone(self.spec.get("template") or {})
        template_meta = template.get("metadata") or {}
        prefix = f"{meta['name']}-" if index is None else f"{meta['name']}-{index}-"
        prefix = prefix[:58]  # generateName is truncated so that name + suffix fits in 63
        name = prefix + "".join(self.rng.choice(_NAME_ALPHABET) for _ in range(5))
        labels = dict(template_meta.get("labels") or {})
        annotations = dict(template_meta.get("annotations") or {})
        pod_spec = template.get("spec") or {}
        if index is not None:
            labels[COMPLETION_INDEX] = annotations[COMPLETION_INDEX] = str(index)
            pod_spec.setdefault("hostname", f"{meta['name']}-{index}")
            for group in ("initContainers", "containers"):
                for container in pod_spec.get(group) or []:
                    _add_index_env(container)
        pod_meta: Obj = {
            "name": name,
            "generateName": prefix,
            "namespace": meta.get("namespace", "default"),
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if annotations:
            pod_meta["annotations"] = annotations
        self.events.append(("Normal", "SuccessfulCreate", f"Created pod: {name}"))
        return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}

    def finalize_status(self) -> Obj:
        """Counters as the API serves them: active/succeeded/failed omitted at zero, ready and
        terminating always present."""
        status = self.status
        counts = {
            "active": len(self.active) + len(self.create),
            "succeeded": self.succeeded,
            "failed": self.failed,
        }
        for key, count in counts.items():
            if count:
                status[key] = count
            else:
                status.pop(key, None)
        status["ready"] = sum(1 for p in self.active if _is_ready(p))
        status["terminating"] = len(self.terminating)
        if self.indexed and self.completed:
            status["completedIndexes"] = format_indexes(self.completed)
        status["uncountedTerminatedPods"] = {}
        return status


def _add_index_env(container: Obj) -> None:
    env = container.setdefault("env", [])
    if not any(e.get("name") == COMPLETION_INDEX_ENV for e in env):
        field_path = f"metadata.annotations['{COMPLETION_INDEX}']"
        env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {"fieldPath": field_path}}})


def job_events(job: Mapping[str, Any], actions: JobActions, now: datetime) -> list[Obj]:
    """Event objects for a reconcile's events, from job-controller."""
    return [
        make_event(job, reason, message, now, component="job-controller", event_type=kind)
        for kind, reason, message in actions.events
    ]
