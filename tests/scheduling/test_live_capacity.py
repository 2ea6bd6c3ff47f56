"""The capacity kept between cycles from the watches (scheduling/live_capacity.py) against the simulated
cluster over HTTP: after pods come and go, and after a node changes, it answers what a full list of the
cluster gives, and it rebuilds only when a node's meaning changed."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from scheduling.inventory import Capacity
from scheduling.kube.calls import Kube
from scheduling.kube.informer import Informer
from scheduling.kube.keys import MANAGED_BY, MANAGER, SIM_DURATION_ANNOTATION
from scheduling.live_capacity import LiveCapacity, _a_job_pod_succeeded
from scheduling.simcluster.testing import SimCluster
from tests.stack_fixtures import wait_for

NAMESPACE = "live-capacity"
MANAGED = f"{MANAGED_BY}={MANAGER}"
_names = itertools.count()


@pytest.fixture
def kube(stack_cluster: SimCluster, quiet_cluster_loops: None) -> Iterator[Kube]:
    api = stack_cluster.api_client()
    client = Kube(api, timeout=5)
    # An earlier full-stack test's workspaces went with its rows, but the worker paused for this test has
    # not removed their Jobs and pods: they would hold GPUs this test places on.
    for kind in ("Job", "Pod"):
        for obj in client.list(kind, None, MANAGED):
            client.delete(kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
    wait_for(lambda: not client.list("Pod", None, MANAGED), what="earlier tests' pods to go")
    yield client
    api.close()


@pytest.fixture
def live(kube: Kube) -> Iterator[LiveCapacity]:
    nodes, pods = Informer(kube, "Node").start(), Informer(kube, "Pod").start()
    yield LiveCapacity(nodes, pods)
    nodes.stop()
    pods.stop()
    for pod in kube.list("Pod", NAMESPACE, ""):
        kube.delete("Pod", NAMESPACE, pod["metadata"]["name"])


def bound_pod(
    node: str, limits: dict[str, str], workspace: int, *, runs_for: int | None = None, namespace: str = NAMESPACE
) -> dict[str, Any]:
    """A pod of ``workspace`` bound to ``node``; with ``runs_for``, one that runs that many simulated seconds
    and succeeds, else one that runs until deleted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"live-{next(_names)}",
            "namespace": namespace,
            "labels": {"gpuportal.io/workspace-id": str(workspace)},
            "annotations": {} if runs_for is None else {SIM_DURATION_ANNOTATION: str(runs_for)},
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Always" if runs_for is None else "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "main",
                    "image": "quay.io/jupyter/scipy-notebook:2025-06-02",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": limits},
                }
            ],
        },
    }


def differences(live: Capacity, listed: Capacity) -> list[str]:
    """What differs in what decisions read: device counts, CPU and memory, whole GPUs free, replicas free,
    bound workspaces (the engine's notional choice of GPU or MIG slot may differ, and does not matter)."""
    found = [f"nodes {len(live.nodes)} != {len(listed.nodes)}"] if len(live.nodes) != len(listed.nodes) else []
    for name in ("cpu_free", "mem_free", "full_free"):
        if not np.array_equal(getattr(live.state, name), getattr(listed.state, name)):
            found.append(name)
    if not np.array_equal(live.state.ts_free.sum(axis=1), listed.state.ts_free.sum(axis=1)):
        found.append("ts_free")
    for resource in live.free.keys() | listed.free.keys():
        if resource not in live.free or resource not in listed.free:
            found.append(f"{resource} in one only")
        elif not np.array_equal(live.free[resource], listed.free[resource]):
            found.append(resource)
    if set(live.bound) != set(listed.bound):
        found.append(f"bound {sorted(live.bound)} != {sorted(listed.bound)}")
    if live.succeeded_pods != listed.succeeded_pods:
        found.append(f"succeeded {dict(live.succeeded_pods)} != {dict(listed.succeeded_pods)}")
    return found


def disagreement(kube: Kube, live: LiveCapacity) -> list[str]:
    current = live.current(timeout=5)
    assert current is not None
    return differences(current, Capacity.from_objects(kube.list("Node", None, ""), kube.list("Pod", None, "")))


def settled(kube: Kube, live: LiveCapacity, what: str) -> None:
    """Wait for the watches to catch up with the cluster: then the kept view must equal a fresh list's."""
    wait_for(lambda: not disagreement(kube, live), timeout=15, what=what)


def _succeeded(live: LiveCapacity, workspace: int) -> int:
    current = live.current(timeout=5)
    assert current is not None
    return current.succeeded_pods[workspace]


def test_it_answers_what_a_full_list_answers_as_pods_and_nodes_change(
    kube: Kube, live: LiveCapacity, stack_cluster: SimCluster
) -> None:
    kube.ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    settled(kube, live, "the first view")
    assert live.rebuilds == 1
    pods = [
        bound_pod("gpu-h100-1", {"nvidia.com/gpu": "3"}, 9001),
        bound_pod("gpu-a100-0", {"nvidia.com/mig-3g.40gb": "1"}, 9002),
        bound_pod("gpu-l40s-0", {"nvidia.com/gpu": "1"}, 9003),
        bound_pod("gpu-h100-1", {"nvidia.com/gpu": "2"}, 9004),
    ]
    for pod in pods:
        kube.ensure(pod)
    settled(kube, live, "the new pods to be counted")
    current = live.current(timeout=5)
    assert current is not None and {9001, 9002, 9003, 9004} <= set(current.bound)
    # A pod that ran to completion gives its GPUs back and counts as succeeded for its workspace.
    kube.ensure(bound_pod("gpu-l40s-0", {"nvidia.com/gpu": "1"}, 9005, runs_for=5))
    settled(kube, live, "the short pod to be counted")  # running or already done: the views agree either way
    wait_for(lambda: _succeeded(live, 9005) == 1, timeout=15, what="the short pod to succeed")
    settled(kube, live, "its end to be given back")
    current = live.current(timeout=5)
    assert current is not None and 9005 not in current.bound
    gone = {pods[0]["metadata"]["name"], pods[2]["metadata"]["name"]}
    for name in gone:
        kube.delete("Pod", NAMESPACE, name)
    # A deleted pod holds its node until it has terminated, in both views.
    wait_for(lambda: not gone & {p["metadata"]["name"] for p in kube.list("Pod", NAMESPACE, "")}, what="the pods to go")
    settled(kube, live, "the deleted pods to be given back")
    current = live.current(timeout=5)
    assert current is not None and not {9001, 9003} & set(current.bound)
    assert live.rebuilds == 1  # pods alone never rebuild it
    stack_cluster.set_node_ready("gpu-h100-0", False)
    try:
        settled(kube, live, "a node gone NotReady to leave the view")
        assert live.rebuilds == 2
    finally:
        stack_cluster.set_node_ready("gpu-h100-0", True)
    settled(kube, live, "the node back")
    current = live.current(timeout=5)
    assert current is not None and set(current.bound) >= {9002, 9004}
    assert not {9001, 9003} & set(current.bound)


def _pod(phase: str, *, owner: str | None = "Job", workspace: str = "7") -> dict[str, Any]:
    owners = [{"kind": owner, "name": "ws-7-train"}] if owner else []
    metadata = {"name": "p", "labels": {"gpuportal.io/workspace-id": workspace}, "ownerReferences": owners}
    return {"metadata": metadata, "status": {"phase": phase}}


def test_a_cycle_is_asked_for_only_when_a_portal_jobs_pod_turns_succeeded() -> None:
    assert _a_job_pod_succeeded(_pod("Running"), _pod("Succeeded"))
    assert _a_job_pod_succeeded(None, _pod("Succeeded"))  # first seen already done
    assert not _a_job_pod_succeeded(_pod("Succeeded"), _pod("Succeeded"))  # a later change of a done pod
    assert not _a_job_pod_succeeded(_pod("Running"), _pod("Failed"))  # the reconcile pass writes failures
    assert not _a_job_pod_succeeded(_pod("Running"), _pod("Succeeded", owner=None))  # a notebook's own pod
    assert not _a_job_pod_succeeded(_pod("Running"), _pod("Succeeded", workspace=""))  # not the portal's
    assert not _a_job_pod_succeeded(_pod("Succeeded"), None)  # deleted
