"""What happens behind the API: garbage collection, preemption, binding, logs and job failures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.simcluster.conftest import pod_manifest, wait_for, wait_for_phase


def _job(name: str, **spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {"sim.gpuportal.io/duration-seconds": "600"})
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            },
            **spec,
        },
    }


def _job_pods(v1, namespace: str, job: str) -> list[Any]:
    pods: list[Any] = v1.list_namespaced_pod(namespace, label_selector=f"batch.kubernetes.io/job-name={job}").items
    return pods


@pytest.mark.parametrize(("policy", "pods_left"), [("Background", 0), ("Foreground", 0), ("Orphan", 1)])
def test_deleting_a_job_collects_or_orphans_its_pods(v1, batch, namespace, policy, pods_left):
    batch.create_namespaced_job(namespace, _job("gc"))
    wait_for(lambda: _job_pods(v1, namespace, "gc"), what="job pod")

    batch.delete_namespaced_job("gc", namespace, propagation_policy=policy)

    wait_for(lambda: len(_job_pods(v1, namespace, "gc")) == pods_left, what=f"{pods_left} pods left")
    wait_for(lambda: not batch.list_namespaced_job(namespace).items, what="job gone")
    if pods_left:
        assert _job_pods(v1, namespace, "gc")[0].metadata.owner_references is None


def test_a_job_fails_once_its_pods_exceed_the_backoff_limit(batch, namespace):
    annotations = {"sim.gpuportal.io/duration-seconds": "1", "sim.gpuportal.io/exit-code": "3"}
    batch.create_namespaced_job(namespace, _job("crash", backoffLimit=0, annotations=annotations))

    def failed():
        conditions = batch.read_namespaced_job("crash", namespace).status.conditions or []
        return next((c for c in conditions if c.type == "Failed"), None)

    assert wait_for(failed, what="job Failed").reason == "BackoffLimitExceeded"


def test_a_higher_priority_pod_preempts_a_lower_one(api, v1, namespace):
    scheduling = client.SchedulingV1Api(api)
    for name, value in (("low", 10), ("high", 1000)):
        scheduling.create_priority_class({"metadata": {"name": f"{namespace}-{name}"}, "value": value})
    on_cpu0 = {"kubernetes.io/hostname": "cpu-0"}
    try:
        body = pod_manifest("victim", limits={"cpu": "60"}, nodeSelector=on_cpu0, priorityClassName=f"{namespace}-low")
        v1.create_namespaced_pod(namespace, body)
        wait_for_phase(v1, namespace, "victim", "Running")

        body = pod_manifest("vip", limits={"cpu": "60"}, nodeSelector=on_cpu0, priorityClassName=f"{namespace}-high")
        v1.create_namespaced_pod(namespace, body)

        wait_for_phase(v1, namespace, "vip", "Running")
        assert not v1.list_namespaced_pod(namespace, field_selector="metadata.name=victim").items
        reasons = {(e.involved_object.name, e.reason) for e in v1.list_namespaced_event(namespace).items}
        assert {("victim", "Preempted"), ("vip", "FailedScheduling"), ("vip", "Scheduled")} <= reasons
    finally:
        for name in ("low", "high"):
            scheduling.delete_priority_class(f"{namespace}-{name}")


def test_a_pod_for_another_scheduler_waits_for_a_binding(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("manual", schedulerName="my-scheduler"))
    assert v1.read_namespaced_pod("manual", namespace).spec.node_name is None

    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "manual"},
        "target": {"kind": "Node", "name": "cpu-1"},
    }
    v1.api_client.call_api(
        f"/api/v1/namespaces/{namespace}/pods/manual/binding",
        "POST",
        body=binding,
        auth_settings=["BearerToken"],
        header_params={"Content-Type": "application/json"},
    )

    wait_for_phase(v1, namespace, "manual", "Running")
    assert v1.read_namespaced_pod("manual", namespace).spec.node_name == "cpu-1"


def test_logs_are_plain_text_once_the_container_started(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("chatty"))
    # Bound but not started yet (the start delay): on a loaded machine binding itself can take a moment.
    wait_for(lambda: v1.read_namespaced_pod("chatty", namespace).spec.node_name, what="chatty to be bound")
    with pytest.raises(ApiException) as caught:
        v1.read_namespaced_pod_log("chatty", namespace)
    assert caught.value.status == 400
    message = json.loads(caught.value.body)["message"]
    assert message == 'container "main" in pod "chatty" is waiting to start: ContainerCreating'

    wait_for_phase(v1, namespace, "chatty", "Running")
    text = v1.read_namespaced_pod_log("chatty", namespace, tail_lines=1)
    assert text.count("\n") == 1 and "INFO" in text


def test_a_gpu_request_over_one_on_a_time_sliced_node_is_refused_at_admission(v1, namespace):
    selector = {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}
    v1.create_namespaced_pod(namespace, pod_manifest("greedy", limits={"nvidia.com/gpu": 2}, nodeSelector=selector))

    wait_for_phase(v1, namespace, "greedy", "Failed")
    pod = v1.read_namespaced_pod("greedy", namespace)
    assert pod.status.reason == "UnexpectedAdmissionError"
    assert "maximum request size for shared resources is 1" in pod.status.message
