"""The Job controller: defaults, pod creation, completion, failure, deadlines, TTL, suspend."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduling.simcluster.defaults import default_pod, format_time
from scheduling.simcluster.jobs import (
    CONTROLLER_UID_LABEL,
    JobActions,
    default_job,
    format_indexes,
    job_errors,
    job_events,
    parse_indexes,
    reconcile_job,
)
from tests.simcluster.test_scheduler import NOW, PRIORITY_CLASSES, assert_valid

UID = "5f1d6f6c-8a36-4d1e-9c1a-0a1b2c3d4e5f"


def make_job(**spec: Any) -> dict[str, Any]:
    container = {
        "name": "train",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    raw = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a", "uid": UID},
        "spec": {"template": {"spec": {"containers": [container], "restartPolicy": "Never"}}} | spec,
    }
    return default_job(raw)


class Cluster:
    """Applies JobActions the way the integrator will, with pods as the API server stores them."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.pods: dict[str, dict[str, Any]] = {}
        self.rng = random.Random(7)
        self.deleted_job = False

    def sync(self, at: datetime) -> JobActions:
        actions = reconcile_job(self.job, list(self.pods.values()), at, rng=self.rng)
        for name in actions.delete_pods:
            del self.pods[name]
        for pod in actions.create_pods:
            assert_valid(pod)
            stored = default_pod(pod, uid=f"uid-{pod['metadata']['name']}", now=at, priority_classes=PRIORITY_CLASSES)
            assert_valid(stored)
            self.pods[pod["metadata"]["name"]] = stored
        self.job = self.job | {"status": actions.status}
        assert_valid(self.job)
        self.deleted_job = actions.delete_job
        return actions

    def finish(self, name: str, phase: str, at: datetime, exit_code: int = 0) -> None:
        pod = self.pods[name]
        stamp = format_time(at)
        terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
        pod["status"] = pod["status"] | {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": "train",
                    "ready": False,
                    "restartCount": 0,
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "imageID": "",
                    "state": {"terminated": terminated | {"startedAt": stamp, "finishedAt": stamp}},
                }
            ],
        }

    def run_all(self) -> None:
        for pod in self.pods.values():
            if pod["status"]["phase"] == "Pending":
                pod["status"] = pod["status"] | {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                }

    def names(self) -> list[str]:
        return sorted(self.pods)


def condition_types(job: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in job["status"].get("conditions", [])]


def test_default_job() -> None:
    job = make_job()
    assert_valid(job)
    spec = job["spec"]
    assert {k: spec[k] for k in ("completions", "parallelism", "backoffLimit", "completionMode", "suspend")} == {
        "completions": 1,
        "parallelism": 1,
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "suspend": False,
    }
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {CONTROLLER_UID_LABEL: UID}}
    labels = {"batch.kubernetes.io/controller-uid": UID, "batch.kubernetes.io/job-name": "train"}
    labels |= {"controller-uid": UID, "job-name": "train"}
    assert spec["template"]["metadata"]["labels"] == labels
    assert job["metadata"]["labels"] == labels
    assert "manualSelector" not in spec
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert job["status"] == {}


def test_a_work_queue_job_keeps_completions_unset() -> None:
    spec = make_job(parallelism=3)["spec"]
    assert "completions" not in spec
    assert spec["parallelism"] == 3


def test_job_errors() -> None:
    job = make_job(completionMode="Indexed", parallelism=1)
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert [str(e) for e in job_errors(job)] == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"',
        "spec.completions: Required value: when completion mode is Indexed",
    ]
    assert job_errors(make_job()) == []


def test_indexed_job_runs_one_pod_per_index_and_completes() -> None:
    job = make_job(completionMode="Indexed", completions=2, parallelism=2)
    cluster = Cluster(job)

    first = cluster.sync(NOW)

    assert len(first.create_pods) == 2
    by_index = {p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]: p for p in first.create_pods}
    assert sorted(by_index) == ["0", "1"]
    pod = by_index["1"]
    assert pod["metadata"]["name"].startswith("train-1-") and len(pod["metadata"]["name"]) == len("train-1-") + 5
    assert pod["metadata"]["generateName"] == "train-1-"
    assert pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "1"
    assert pod["metadata"]["labels"]["job-name"] == "train"
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"]["hostname"] == "train-1"
    assert pod["spec"]["containers"][0]["env"] == [
        {
            "name": "JOB_COMPLETION_INDEX",
            "valueFrom": {
                "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
            },
        }
    ]
    assert cluster.job["status"] == {
        "startTime": "2026-05-01T09:00:00Z",
        "active": 2,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    }
    assert [e[1] for e in first.events] == ["SuccessfulCreate", "SuccessfulCreate"]

    cluster.run_all()
    assert cluster.sync(NOW + timedelta(seconds=10)).create_pods == []
    assert cluster.job["status"]["ready"] == 2

    zero, one = (p["metadata"]["name"] for p in sorted(cluster.pods.values(), key=lambda p: p["metadata"]["name"]))
    cluster.finish(zero, "Succeeded", NOW + timedelta(minutes=5))
    cluster.sync(NOW + timedelta(minutes=5))
    assert cluster.job["status"]["completedIndexes"] == "0"
    assert (cluster.job["status"]["succeeded"], cluster.job["status"]["active"]) == (1, 1)

    done_at = NOW + timedelta(minutes=6)
    cluster.finish(one, "Succeeded", done_at)
    final = cluster.sync(done_at)

    status = cluster.job["status"]
    assert condition_types(cluster.job) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached"),
    ]
    assert status["conditions"][1]["message"] == "Reached expected number of succeeded pods"
    assert (status["completedIndexes"], status["succeeded"], status["completionTime"]) == (
        "0-1",
        2,
        "2026-05-01T09:06:00Z",
    )
    assert "active" not in status
    assert ("Normal", "Completed", "Job completed") in final.events
    for event in job_events(cluster.job, final, done_at):
        assert_valid(event)


def test_a_failed_index_is_retried_after_the_back_off() -> None:
    cluster = Cluster(make_job(completionMode="Indexed", completions=2, parallelism=2))
    cluster.sync(NOW)
    failed = cluster.names()[0]
    index = cluster.pods[failed]["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
    cluster.finish(failed, "Failed", NOW + timedelta(seconds=30), exit_code=1)

    assert cluster.sync(NOW + timedelta(seconds=35)).create_pods == []  # 10 s back-off
    retry = cluster.sync(NOW + timedelta(seconds=41)).create_pods
    assert [p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in retry] == [index]
    assert cluster.job["status"]["failed"] == 1


def test_non_indexed_job_keeps_parallelism_until_completions() -> None:
    cluster = Cluster(make_job(completions=3, parallelism=2))
    assert len(cluster.sync(NOW).create_pods) == 2
    assert all(p["metadata"]["generateName"] == "train-" for p in cluster.pods.values())
    cluster.finish(cluster.names()[0], "Succeeded", NOW + timedelta(minutes=1))
    assert len(cluster.sync(NOW + timedelta(minutes=1)).create_pods) == 1
    for name in cluster.names():
        if cluster.pods[name]["status"]["phase"] == "Pending":
            cluster.finish(name, "Succeeded", NOW + timedelta(minutes=2))
    cluster.sync(NOW + timedelta(minutes=2))
    assert condition_types(cluster.job)[-1] == ("Complete", "True", "CompletionsReached")
    assert cluster.job["status"]["succeeded"] == 3


def test_backoff_limit() -> None:
    cluster = Cluster(make_job(backoffLimit=1))
    cluster.sync(NOW)
    cluster.finish(cluster.names()[0], "Failed", NOW + timedelta(seconds=10), exit_code=1)
    cluster.sync(NOW + timedelta(seconds=30))
    assert len(cluster.pods) == 2 and cluster.job["status"]["failed"] == 1
    assert not cluster.job["status"].get("conditions")

    second = next(n for n in cluster.names() if cluster.pods[n]["status"]["phase"] == "Pending")
    cluster.finish(second, "Failed", NOW + timedelta(seconds=60), exit_code=1)
    actions = cluster.sync(NOW + timedelta(seconds=60))

    assert condition_types(cluster.job) == [
        ("FailureTarget", "True", "BackoffLimitExceeded"),
        ("Failed", "True", "BackoffLimitExceeded"),
    ]
    assert cluster.job["status"]["conditions"][1]["message"] == "Job has reached the specified backoff limit"
    assert cluster.job["status"]["failed"] == 2
    assert "completionTime" not in cluster.job["status"]
    assert ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit") in actions.events


def test_restarts_count_against_the_backoff_limit_under_on_failure() -> None:
    job = make_job(backoffLimit=2)
    job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    cluster = Cluster(job)
    cluster.sync(NOW)
    pod = cluster.pods[cluster.names()[0]]
    pod["status"] |= {"phase": "Running", "containerStatuses": [{"name": "train", "restartCount": 2}]}
    actions = cluster.sync(NOW + timedelta(minutes=5))
    assert actions.delete_pods == [pod["metadata"]["name"]]
    assert condition_types(cluster.job) == [("FailureTarget", "True", "BackoffLimitExceeded")]


def test_active_deadline_fails_the_job_and_deletes_its_pods() -> None:
    cluster = Cluster(make_job(activeDeadlineSeconds=600, parallelism=2, completions=4))
    cluster.sync(NOW)
    cluster.run_all()
    running = cluster.names()

    actions = cluster.sync(NOW + timedelta(seconds=601))

    assert sorted(actions.delete_pods) == running
    assert condition_types(cluster.job) == [("FailureTarget", "True", "DeadlineExceeded")]
    status = cluster.job["status"]
    assert (status["terminating"], status["failed"], status.get("active")) == (2, 2, None)
    assert status["conditions"][0]["message"] == "Job was active longer than specified deadline"

    cluster.sync(NOW + timedelta(seconds=605))  # the pods are gone now
    assert condition_types(cluster.job)[-1] == ("Failed", "True", "DeadlineExceeded")
    assert (cluster.job["status"]["failed"], cluster.job["status"]["terminating"]) == (2, 0)


def test_ttl_after_finished_deletes_the_job() -> None:
    cluster = Cluster(make_job(ttlSecondsAfterFinished=300))
    cluster.sync(NOW)
    cluster.finish(cluster.names()[0], "Succeeded", NOW + timedelta(minutes=1))
    cluster.sync(NOW + timedelta(minutes=1))
    assert not cluster.deleted_job
    cluster.sync(NOW + timedelta(minutes=5, seconds=59))
    assert not cluster.deleted_job
    cluster.sync(NOW + timedelta(minutes=6))
    assert cluster.deleted_job


def test_suspend_and_resume() -> None:
    cluster = Cluster(make_job(parallelism=2, completions=2))
    cluster.sync(NOW)
    cluster.job["spec"]["suspend"] = True
    actions = cluster.sync(NOW + timedelta(minutes=1))
    assert len(actions.delete_pods) == 2
    assert condition_types(cluster.job) == [("Suspended", "True", "JobSuspended")]
    assert "startTime" not in cluster.job["status"]
    assert "failed" not in cluster.job["status"]

    cluster.job["spec"]["suspend"] = False
    resumed = cluster.sync(NOW + timedelta(minutes=2))
    assert len(resumed.create_pods) == 2
    assert condition_types(cluster.job) == [("Suspended", "False", "JobResumed")]
    assert cluster.job["status"]["startTime"] == "2026-05-01T09:02:00Z"


def test_work_queue_job_completes_when_a_pod_succeeds_and_the_rest_finish() -> None:
    cluster = Cluster(make_job(parallelism=2))
    cluster.sync(NOW)
    first, second = cluster.names()
    cluster.finish(first, "Succeeded", NOW + timedelta(minutes=1))
    assert cluster.sync(NOW + timedelta(minutes=1)).create_pods == []
    assert not condition_types(cluster.job)
    cluster.finish(second, "Succeeded", NOW + timedelta(minutes=2))
    cluster.sync(NOW + timedelta(minutes=2))
    assert condition_types(cluster.job)[-1] == ("Complete", "True", "CompletionsReached")


@pytest.mark.parametrize(("text", "indexes"), [("", set()), ("0", {0}), ("0-1", {0, 1}), ("1,3-5,7", {1, 3, 4, 5, 7})])
def test_completed_indexes_notation(text: str, indexes: set[int]) -> None:
    assert parse_indexes(text) == indexes
    assert format_indexes(indexes) == text
