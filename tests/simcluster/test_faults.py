"""Injected faults and the simulated clock, through the /_sim/ endpoints."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from scheduling.simcluster.testing import SimAdminError
from tests.simcluster.conftest import pod_manifest, wait_for, wait_for_phase


def test_it_fails_the_next_calls_of_a_kind_then_recovers(sim, v1, namespace):
    sim.inject_fault(verb="create", resource="pods", count=2, status=503, message="etcdserver: leader changed")

    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            v1.create_namespaced_pod(namespace, pod_manifest("flaky"))
        assert caught.value.status == 503
        assert "etcdserver: leader changed" in caught.value.body
    v1.create_namespaced_pod(namespace, pod_manifest("flaky"))
    assert sim.admin("GET", "faults") == {"faults": []}


def test_it_delays_calls(sim, v1, namespace):
    sim.inject_fault(verb="list", resource="pods", delay_s=0.3)

    started = time.monotonic()
    v1.list_namespaced_pod(namespace)
    assert time.monotonic() - started >= 0.3


def test_it_rejects_a_malformed_fault(sim):
    with pytest.raises(SimAdminError) as caught:
        sim.inject_fault(status=200)
    assert caught.value.status == 400


def test_a_not_ready_node_stops_its_pods_being_ready_and_evicts_them_after_300s(sim, v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("victim", nodeName="cpu-1"))
    wait_for_phase(v1, namespace, "victim", "Running")

    sim.set_node_ready("cpu-1", False)
    try:
        node = v1.read_node("cpu-1")
        assert {c.type: c.status for c in node.status.conditions}["Ready"] == "False"
        assert {(t.key, t.effect) for t in node.spec.taints} == {
            ("node.kubernetes.io/not-ready", "NoSchedule"),
            ("node.kubernetes.io/not-ready", "NoExecute"),
        }

        def not_ready() -> bool:
            conditions = v1.read_namespaced_pod("victim", namespace).status.conditions
            return bool({c.type: c.status for c in conditions}["Ready"] == "False")

        wait_for(not_ready, what="pod Ready=False")
        sim.advance_clock(301)

        def gone() -> bool:
            return not v1.list_namespaced_pod(namespace, field_selector="metadata.name=victim").items

        wait_for(gone, what="eviction")
        reasons = {e.reason for e in v1.list_namespaced_event(namespace).items}
        assert "TaintManagerEviction" in reasons
    finally:
        sim.set_node_ready("cpu-1", True)
    assert {c.type: c.status for c in v1.read_node("cpu-1").status.conditions}["Ready"] == "True"


def test_a_lost_gpu_leaves_allocatable(sim, v1):
    sim.lose_gpu("gpu-h100-1", 3)
    try:
        node = v1.read_node("gpu-h100-1")
        assert node.status.allocatable["nvidia.com/gpu"] == "7"
        assert node.status.capacity["nvidia.com/gpu"] == "8"
    finally:
        sim.restore_gpu("gpu-h100-1", 3)
    assert v1.read_node("gpu-h100-1").status.allocatable["nvidia.com/gpu"] == "8"


def test_a_kubelet_eviction_fails_the_pod(sim, v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("pressed"))
    wait_for_phase(v1, namespace, "pressed", "Running")

    sim.evict_pod(namespace, "pressed")

    pod = v1.read_namespaced_pod("pressed", namespace)
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")


def test_the_eviction_api_deletes_the_pod_gracefully(v1, namespace):
    v1.create_namespaced_pod(namespace, pod_manifest("evictme"))
    wait_for_phase(v1, namespace, "evictme", "Running")
    since = v1.list_namespaced_pod(namespace).metadata.resource_version

    v1.create_namespaced_pod_eviction(
        "evictme", namespace, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evictme"}}
    )

    seen = []
    for event in watch.Watch().stream(v1.list_namespaced_pod, namespace, resource_version=since, timeout_seconds=5):
        seen.append(event)
        if event["type"] == "DELETED":
            break
    assert [e["type"] for e in seen][-1] == "DELETED"
    terminating = next(e["object"] for e in seen if e["object"].metadata.deletion_timestamp)
    assert any(
        c.type == "DisruptionTarget" and c.reason == "EvictionByEvictionAPI" for c in terminating.status.conditions
    )


def test_dropping_watches_ends_the_streams(sim, v1, namespace):
    ended = threading.Event()

    def consume() -> None:
        for _ in watch.Watch().stream(v1.list_namespaced_pod, namespace, timeout_seconds=30):
            pass
        ended.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    # Drop until our stream has ended: the first drop may meet only watches left by earlier tests.
    wait_for(lambda: (sim.drop_watches() and ended.wait(0.2)) or None, what="the stream to end")


def test_the_clock_moves_jobs_past_their_deadline(sim, batch, namespace):
    job = {
        "metadata": {"name": "long"},
        "spec": {
            "activeDeadlineSeconds": 3600,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}},
        },
    }
    batch.create_namespaced_job(namespace, job)
    wait_for(lambda: batch.read_namespaced_job("long", namespace).status.active, what="job to start")

    sim.advance_clock(3601)

    def failed() -> bool:
        conditions = batch.read_namespaced_job("long", namespace).status.conditions or []
        return any(c.type == "Failed" and c.reason == "DeadlineExceeded" for c in conditions)

    wait_for(failed, what="DeadlineExceeded")


def test_a_fault_on_every_path_covers_version_and_discovery_until_it_expires(sim, api):
    sim.inject_fault(status=503, duration_s=60, message="apiserver is shutting down")
    try:
        calls: list[Callable[[], Any]] = [
            client.VersionApi(api).get_code,  # /version/
            client.CoreApi(api).get_api_versions,  # /api/
            client.ApisApi(api).get_api_versions,  # /apis/
            client.CoreV1Api(api).get_api_resources,  # /api/v1/
            client.CoreV1Api(api).list_node,
        ]
        for call in calls:
            with pytest.raises(ApiException) as caught:
                call()
            assert caught.value.status == 503
        assert len(sim.admin("GET", "faults")["faults"]) == 1  # a timed fault is not used up

        sim.advance_clock(61)
        assert client.VersionApi(api).get_code().git_version
        assert sim.admin("GET", "faults") == {"faults": []}
    finally:
        sim.clear_faults()


def test_a_fault_can_name_one_non_resource_path(sim, api, v1):
    sim.inject_fault(verb="get", resource="/version", status=500)

    v1.list_node()  # not a match: the fault waits for /version
    with pytest.raises(ApiException) as caught:
        client.VersionApi(api).get_code()
    assert caught.value.status == 500
    assert client.VersionApi(api).get_code().git_version
