"""Issue 3's acceptance criteria, checked only through the official client and /_sim/ endpoints."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from tests.simcluster.conftest import pod_manifest, wait_for, wait_for_phase

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_it_runs_a_mig_pod_on_the_a100_node(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("mig", limits={"nvidia.com/mig-1g.10gb": 1}))

    wait_for_phase(v1, namespace, "mig", "Running")
    pod = v1.read_namespaced_pod("mig", namespace)
    assert pod.spec.node_name == "gpu-a100-0"
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"


def test_it_leaves_the_ninth_whole_h100_pod_pending_with_the_schedulers_reasons(v1, namespace):
    # Two H100 nodes with eight GPUs each: eight pods of two GPUs fill them.
    for i in range(8):
        v1.create_namespaced_pod(namespace, pod_manifest(f"fill-{i}", limits={"nvidia.com/gpu": 2}, nodeSelector=H100))
    for i in range(8):
        wait_for_phase(v1, namespace, f"fill-{i}", "Running")

    v1.create_namespaced_pod(namespace, pod_manifest("ninth", limits={"nvidia.com/gpu": 2}, nodeSelector=H100))

    def unschedulable() -> Any:
        conditions = v1.read_namespaced_pod("ninth", namespace).status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled" and c.status == "False"), None)

    condition = wait_for(unschedulable, what="PodScheduled=False")
    assert condition.reason == "Unschedulable"
    assert condition.message.startswith("0/7 nodes are available: 2 Insufficient nvidia.com/gpu, ")
    assert "5 node(s) didn't match Pod's node affinity/selector" in condition.message
    events = v1.list_namespaced_event(
        namespace, field_selector="involvedObject.name=ninth,reason=FailedScheduling"
    ).items
    assert [e.type for e in events] == ["Warning"]
    assert events[0].source.component == "default-scheduler"
    assert events[0].message == condition.message
    assert v1.read_namespaced_pod("ninth", namespace).status.phase == "Pending"


@pytest.mark.parametrize(
    ("resources", "field", "message"),
    [
        (
            {"limits": {"nvidia.com/gpu": "0.5"}},
            "spec.containers[0].resources.limits[nvidia.com/gpu]",
            'Invalid value: "500m": must be an integer',
        ),
        (
            {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}},
            "spec.containers[0].resources.requests",
            'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2',
        ),
    ],
)
def test_it_rejects_fractional_or_overcommitted_gpus_with_422(v1, namespace, resources, field, message):
    body = pod_manifest("bad", tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    body["spec"]["containers"][0]["resources"] = resources

    with pytest.raises(ApiException) as caught:
        v1.create_namespaced_pod(namespace, body)

    assert caught.value.status == 422
    status = json.loads(caught.value.body)
    assert status["kind"] == "Status"
    assert status["reason"] == "Invalid"
    assert status["message"].startswith('Pod "bad" is invalid: ')
    assert {"reason": "FieldValueInvalid", "message": message, "field": field} in status["details"]["causes"]


def _job(name: str, **spec: Any) -> dict[str, Any]:
    duration = spec.pop("duration", "5")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"annotations": {"sim.gpuportal.io/duration-seconds": duration}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": "pytorch/pytorch:2.4.0"}]},
            },
            **spec,
        },
    }


def test_it_runs_an_indexed_job_two_at_a_time_to_completion(v1, batch, namespace):
    batch.create_namespaced_job(namespace, _job("idx", completions=2, parallelism=2, completionMode="Indexed"))

    def running_pods() -> Any:
        pods = v1.list_namespaced_pod(namespace, label_selector="batch.kubernetes.io/job-name=idx").items
        return pods if sum(p.status.phase == "Running" for p in pods) == 2 else None

    pods = wait_for(running_pods, what="two running job pods")
    assert sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods) == ["0", "1"]

    def complete() -> Any:
        job = batch.read_namespaced_job("idx", namespace)
        return job if any(c.type == "Complete" and c.status == "True" for c in job.status.conditions or []) else None

    job = wait_for(complete, what="job Complete")
    assert job.status.succeeded == 2
    assert job.status.completed_indexes in ("0,1", "0-1")  # the real server writes "0,1"


def test_it_fails_a_job_past_its_active_deadline(batch, namespace):
    batch.create_namespaced_job(namespace, _job("slow", activeDeadlineSeconds=3, duration="600"))

    def failed() -> Any:
        conditions = batch.read_namespaced_job("slow", namespace).status.conditions or []
        return next((c for c in conditions if c.type == "Failed" and c.status == "True"), None)

    assert wait_for(failed, what="job Failed").reason == "DeadlineExceeded"


def test_it_exports_dcgm_metrics_with_pod_labels(api, v1, namespace):
    body = pod_manifest("trainer", limits={"nvidia.com/gpu": 1}, nodeSelector=H100)
    body["metadata"]["annotations"] = {"sim.gpuportal.io/workload-profile": "steady-training"}
    v1.create_namespaced_pod(namespace, body)
    wait_for_phase(v1, namespace, "trainer", "Running")

    response = api.call_api("/metrics", "GET", _preload_content=False, auth_settings=["BearerToken"])[0]
    families = {f.name: f for f in text_string_to_metric_families(response.data.decode())}

    engine = [s for s in families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples if s.labels.get("pod") == "trainer"]
    assert len(engine) == 1
    assert engine[0].labels["namespace"] == namespace
    assert engine[0].labels["container"] == "main"
    assert engine[0].labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert engine[0].value > 0.5
    assert any(s.labels.get("pod") == "trainer" for s in families["DCGM_FI_DEV_GPU_UTIL"].samples)


def test_it_answers_jupyter_through_the_service_proxy(api, v1, namespace):
    body = pod_manifest("nb", limits={"nvidia.com/mig-1g.10gb": 1})
    body["metadata"]["labels"] = {"app": "nb"}
    body["spec"]["containers"][0]["image"] = "quay.io/jupyter/scipy-notebook:2025-01-01"
    # Token checks are test_auth's subject; this Jupyter runs with them switched off.
    body["spec"]["containers"][0]["args"] = ["start-notebook.py", "--IdentityProvider.token="]
    v1.create_namespaced_pod(namespace, body)
    v1.create_namespaced_service(
        namespace, {"metadata": {"name": "nb"}, "spec": {"selector": {"app": "nb"}, "ports": [{"port": 8888}]}}
    )
    wait_for_phase(v1, namespace, "nb", "Running")

    proxied = v1.connect_get_namespaced_service_proxy_with_path(
        "nb:8888", namespace, "api/status", _preload_content=False
    )
    status = json.loads(proxied.data)
    assert set(status) == {"started", "last_activity", "kernels", "connections"}
    kernels = api.call_api(
        f"/api/v1/namespaces/{namespace}/services/http:nb:8888/proxy/api/kernels",
        "GET",
        query_params=[("no_track_activity", "1")],
        _preload_content=False,
        auth_settings=["BearerToken"],
    )[0]
    assert isinstance(json.loads(kernels.data), list)
    page = v1.connect_get_namespaced_service_proxy_with_path("nb", namespace, "lab", _preload_content=False)
    assert f"Simulated Jupyter for {namespace}/nb" in page.data.decode()


def _raw_items(call: Any, *args: Any) -> list[dict[str, Any]]:
    payload = json.loads(call(*args, _preload_content=False).data)
    kind = payload["kind"].removesuffix("List")
    return [{"apiVersion": payload["apiVersion"], "kind": kind, **item} for item in payload["items"]]


def test_it_serves_nodes_and_pods_that_validate_against_the_134_strict_schemas(v1, batch, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("running", limits={"nvidia.com/gpu": 1}, nodeSelector=H100))
    v1.create_namespaced_pod(namespace, pod_manifest("pending", limits={"nvidia.com/gpu": 64}))
    batch.create_namespaced_job(namespace, _job("done", duration="1"))
    wait_for_phase(v1, namespace, "running", "Running")
    wait_for(lambda: batch.read_namespaced_job("done", namespace).status.succeeded, what="job pod to succeed")

    objects = _raw_items(v1.list_node) + _raw_items(v1.list_pod_for_all_namespaces)
    phases = {o["status"]["phase"] for o in objects if o["kind"] == "Pod"}
    assert {"Running", "Pending", "Succeeded"} <= phases
    for obj in objects:
        kubernetes_validate.validate(obj, "1.34.0", strict=True)


def test_it_streams_a_pod_from_added_to_running(v1, namespace):
    since = v1.list_namespaced_pod(namespace).metadata.resource_version
    v1.create_namespaced_pod(namespace, pod_manifest("watched"))

    seen = []
    stream = watch.Watch().stream(v1.list_namespaced_pod, namespace, resource_version=since, timeout_seconds=5)
    for event in stream:
        seen.append((event["type"], event["object"].status.phase))
        if event["object"].status.phase == "Running":
            break

    assert seen[0] == ("ADDED", "Pending")
    assert seen[-1] == ("MODIFIED", "Running")
    assert {kind for kind, _ in seen[1:]} == {"MODIFIED"}


def test_it_answers_410_gone_for_a_watch_from_before_the_compaction(sim, v1, namespace):
    since = v1.list_namespaced_pod(namespace).metadata.resource_version
    v1.create_namespaced_pod(namespace, pod_manifest("old"))
    sim.admin("POST", "watches/compact")

    with pytest.raises(ApiException) as caught:
        list(watch.Watch().stream(v1.list_namespaced_pod, namespace, resource_version=since, timeout_seconds=2))

    assert caught.value.status == 410
    assert "Expired: too old resource version" in caught.value.reason


def test_it_lists_with_paging_and_selectors(v1, namespace):
    for i in range(5):
        body = pod_manifest(f"p{i}")
        body["metadata"]["labels"] = {"tier": "a" if i % 2 else "b"}
        v1.create_namespaced_pod(namespace, body)

    first = v1.list_namespaced_pod(namespace, limit=2)
    rest = v1.list_namespaced_pod(namespace, limit=10, _continue=first.metadata._continue)

    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    assert [p.metadata.name for p in rest.items] == ["p2", "p3", "p4"]
    assert [p.metadata.name for p in v1.list_namespaced_pod(namespace, label_selector="tier=a").items] == ["p1", "p3"]
    by_name = v1.list_namespaced_pod(namespace, field_selector="metadata.name=p4,status.phase!=Failed")
    assert [p.metadata.name for p in by_name.items] == ["p4"]


def test_it_types_client_objects_like_the_real_server(api):
    version = client.VersionApi(api).get_code()
    assert (version.major, version.minor) == ("1", "34")
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", "scheduling.k8s.io", "events.k8s.io", "policy"} <= groups
