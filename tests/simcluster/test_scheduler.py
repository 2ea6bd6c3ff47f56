"""The kube-scheduler stand-in: filters, messages, scoring, preemption, events.

Also home of the small object factories the other simcluster logic tests import.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import kubernetes_validate
import pytest

from scheduling.simcluster.defaults import default_pod, format_time
from scheduling.simcluster.scheduler import (
    Decision,
    effective_taints,
    pod_requests,
    preempted_message,
    preemption_condition,
    schedule_pod,
    scheduled_message,
    scheduler_event,
    unschedulable_condition,
)

NOW = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
PRIORITY_CLASSES = {"low": 10, "standard": 100, "high": 1000}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def assert_valid(obj: dict[str, Any]) -> None:
    """The object passes the real 1.34 schema, strictly (no unknown fields)."""
    kubernetes_validate.validate(obj, "1.34.0", strict=True)


def make_node(
    name: str,
    *,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    ready: str = "True",
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
    pods: int = 110,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "1Ti"}
    if gpus:
        allocatable["nvidia.com/gpu"] = str(gpus)
    allocatable |= extra or {}
    spec: dict[str, Any] = {"podCIDR": "10.244.1.0/24"}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name} | (labels or {})},
        "spec": spec,
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": format_time(NOW)}],
            "addresses": [{"type": "InternalIP", "address": "192.168.0.10"}],
        },
    }


def make_pod(
    name: str,
    *,
    gpus: int = 0,
    cpu: str = "1",
    memory: str = "4Gi",
    limits: dict[str, str] | None = None,
    node: str | None = None,
    priority_class: str | None = None,
    started: datetime | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
    namespace: str = "team-a",
) -> dict[str, Any]:
    """A pod as the API server stores it (defaulted), optionally already bound and started."""
    container_limits = {"cpu": cpu, "memory": memory} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": {
            "containers": [
                {"name": "main", "image": image, "resources": {"limits": container_limits | (limits or {})}}
            ],
            "tolerations": tolerations if tolerations is not None else [TOLERATE_GPU],
        }
        | (spec or {}),
    }
    if priority_class:
        raw["spec"]["priorityClassName"] = priority_class
    pod = default_pod(raw, uid=f"uid-{name}", now=started or NOW, priority_classes=PRIORITY_CLASSES)
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] |= {"phase": "Running", "startTime": format_time(started or NOW)}
    return pod


def fill(node: str, count: int, **kwargs: Any) -> list[dict[str, Any]]:
    """count running one-GPU pods on node."""
    return [make_pod(f"{node}-p{i}", gpus=1, node=node, **kwargs) for i in range(count)]


# ---------------------------------------------------------------------------------------------
# Filtering and messages


def test_ninth_whole_gpu_pod_on_eight_free_gpus_finds_no_node() -> None:
    nodes = [make_node("gpu-a", gpus=4, taints=[GPU_TAINT]), make_node("gpu-b", gpus=4, taints=[GPU_TAINT])]
    bound: list[dict[str, Any]] = []
    for i in range(8):
        decision = schedule_pod(make_pod(f"p{i}", gpus=1), nodes, bound)
        assert decision.node_name is not None
        bound.append(make_pod(f"p{i}", gpus=1, node=decision.node_name))
    assert sorted(p["spec"]["nodeName"] for p in bound) == ["gpu-a"] * 4 + ["gpu-b"] * 4

    ninth = schedule_pod(make_pod("p8", gpus=1), nodes, bound)

    assert ninth == Decision(
        None,
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: "
        "0/2 nodes are available: 2 No preemption victims found for incoming pod.",
    )


def test_it_counts_and_sorts_reasons_like_kube_scheduler() -> None:
    nodes = [
        *(make_node(f"full-{i}", gpus=1) for i in range(2)),
        *(
            make_node(f"tainted-{i}", taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}])
            for i in range(3)
        ),
        *(make_node(f"a100-{i}", labels={"nvidia.com/gpu.product": "NVIDIA-A100"}) for i in range(2)),
    ]
    for node in nodes[:2]:
        node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100"
    for node in nodes[2:5]:
        node["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100"
    bound = [make_pod(f"busy-{i}", gpus=1, node=f"full-{i}") for i in range(2)]
    pod = make_pod("want", gpus=1, spec={"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100"}})

    decision = schedule_pod(pod, nodes, bound)

    assert decision.node_name is None
    assert decision.message == (
        "0/7 nodes are available: 2 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
        "affinity/selector, 3 node(s) had untolerated taint(s). no new claims to deallocate, preemption: "
        "0/7 nodes are available: 2 No preemption victims found for incoming pod, 5 Preemption is not "
        "helpful for scheduling."
    )


def test_counts_sort_as_text_as_in_go() -> None:
    nodes = [make_node(f"n{i:02}", gpus=0, cpu="1") for i in range(10)] + [
        make_node(f"t{i}", taints=[{"key": "x", "effect": "NoExecute"}]) for i in range(2)
    ]
    decision = schedule_pod(make_pod("big", cpu="2", gpus=0), nodes, [])
    assert decision.message.startswith(
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s)."
    )
    # A request larger than the whole node cannot be helped by preemption.
    assert decision.message.endswith(
        "preemption: 0/12 nodes are available: 12 Preemption is not helpful for scheduling."
    )


def test_every_insufficient_resource_is_a_reason() -> None:
    node = make_node("n", cpu="4", memory="8Gi")
    decision = schedule_pod(make_pod("p", cpu="8", memory="16Gi"), [node], [])
    assert decision.message.startswith("0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.")


def test_too_many_pods() -> None:
    node = make_node("n", pods=1)
    decision = schedule_pod(make_pod("p"), [node], [make_pod("other", node="n")])
    assert decision.message.startswith("0/1 nodes are available: 1 Too many pods.")


def test_mig_pod_lands_on_the_node_that_has_that_profile() -> None:
    nodes = [
        make_node("h100-whole"),
        make_node("h100-mig", gpus=0, extra={"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"}),
    ]
    pod = make_pod("slice", limits={"nvidia.com/mig-1g.10gb": "1"})
    assert schedule_pod(pod, nodes, []).node_name == "h100-mig"


def test_gpu_pods_pack_onto_partly_used_nodes() -> None:
    nodes = [make_node("empty"), make_node("half")]
    bound = fill("half", 4)
    assert schedule_pod(make_pod("next", gpus=2), nodes, bound).node_name == "half"


def test_cpu_pods_spread_to_the_least_allocated_node() -> None:
    nodes = [make_node("busy", gpus=0), make_node("idle", gpus=0)]
    bound = [make_pod("hog", cpu="48", node="busy")]
    assert schedule_pod(make_pod("web", cpu="1"), nodes, bound).node_name == "idle"


def test_terminal_pods_free_their_resources() -> None:
    node = make_node("n", gpus=1)
    done = make_pod("done", gpus=1, node="n")
    done["status"]["phase"] = "Succeeded"
    assert schedule_pod(make_pod("p", gpus=1), [node], [done]).node_name == "n"


def test_requests_take_the_larger_of_containers_and_init_containers_plus_overhead() -> None:
    pod = make_pod("p", cpu="1", memory="1Gi")
    pod["spec"]["initContainers"] = [
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "3", "memory": "512Mi"}}},
        {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
    ]
    pod["spec"]["overhead"] = {"cpu": "100m"}
    requests = pod_requests(pod)
    assert requests["cpu"] == 3100  # the init peak (3 cores) beats main + sidecar (1.5), plus overhead
    assert requests["memory"] == 1024**3
    assert requests.get("nvidia.com/gpu") is None


def test_requests_default_to_limits() -> None:
    raw = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "500m"}}}]}}
    assert pod_requests(raw) == {"nvidia.com/gpu": 2, "cpu": 500}


# ---------------------------------------------------------------------------------------------
# Taints, tolerations, affinity, node state


@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        ([], False),
        ([TOLERATE_GPU], True),
        ([{"operator": "Exists"}], True),  # empty key + Exists tolerates everything
        ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}], True),
        ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}], False),
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], False),
    ],
)
def test_tolerations(tolerations: list[dict[str, Any]], fits: bool) -> None:
    node = make_node("gpu", taints=[GPU_TAINT])
    decision = schedule_pod(make_pod("p", gpus=1, tolerations=tolerations), [node], [])
    assert (decision.node_name == "gpu") is fits
    if not fits:
        assert "1 node(s) had untolerated taint(s)" in decision.message


def test_prefer_no_schedule_only_steers() -> None:
    soft = {"key": "spot", "value": "true", "effect": "PreferNoSchedule"}
    nodes = [make_node("a-spot", taints=[soft]), make_node("b-ondemand")]
    assert schedule_pod(make_pod("p", gpus=1), nodes, []).node_name == "b-ondemand"
    assert schedule_pod(make_pod("p", gpus=1), nodes[:1], []).node_name == "a-spot"


def test_not_ready_node_is_filtered_by_its_not_ready_taint() -> None:
    node = make_node("sick", ready="False")
    assert effective_taints(node) == [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": format_time(NOW)},
    ]
    decision = schedule_pod(make_pod("p", gpus=1), [node], [])
    assert decision.message.startswith("0/1 nodes are available: 1 node(s) had untolerated taint(s).")


def test_cordoned_node() -> None:
    node = make_node("cordoned", unschedulable=True)
    decision = schedule_pod(make_pod("p", gpus=1), [node], [])
    assert decision.message.startswith("0/1 nodes are available: 1 node(s) were unschedulable.")
    tolerant = make_pod("p", gpus=1, tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert schedule_pod(tolerant, [node], []).node_name == "cordoned"


def test_required_node_affinity_with_expressions_and_fields() -> None:
    nodes = [make_node("a", labels={"gpu.memory": "81559"}), make_node("b", labels={"gpu.memory": "40960"})]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu.memory", "operator": "Gt", "values": ["50000"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["nowhere"]}]},
                ]
            }
        }
    }
    assert schedule_pod(make_pod("p", gpus=1, spec={"affinity": affinity}), nodes, []).node_name == "a"


def test_preferred_node_affinity_breaks_the_tie() -> None:
    nodes = [make_node("a"), make_node("b", labels={"zone": "west"})]
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["west"]}]},
                }
            ]
        }
    }
    assert schedule_pod(make_pod("p", gpus=1, spec={"affinity": affinity}), nodes, []).node_name == "b"


def test_no_nodes() -> None:
    assert schedule_pod(make_pod("p"), [], []) == Decision(None, "no nodes available to schedule pods")


# ---------------------------------------------------------------------------------------------
# Preemption


def test_preemption_evicts_the_lowest_priority_youngest_pod() -> None:
    node = make_node("gpu", gpus=4)
    bound = [
        make_pod("old-low", gpus=1, node="gpu", priority_class="low", started=NOW - timedelta(hours=3)),
        make_pod("young-low", gpus=1, node="gpu", priority_class="low", started=NOW - timedelta(hours=1)),
        make_pod("standard", gpus=1, node="gpu", priority_class="standard", started=NOW - timedelta(hours=5)),
        make_pod("high", gpus=1, node="gpu", priority_class="high"),
    ]
    pod = make_pod("urgent", gpus=1, priority_class="high")

    decision = schedule_pod(pod, [node], bound)

    assert decision == Decision(
        None,
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
        nominated_node="gpu",
        victims=(("team-a", "young-low"),),
    )


def test_preemption_picks_the_node_with_the_least_important_victims() -> None:
    nodes = [make_node("a", gpus=2), make_node("b", gpus=2)]
    bound = [
        *(make_pod(f"a{i}", gpus=1, node="a", priority_class="standard") for i in range(2)),
        *(make_pod(f"b{i}", gpus=1, node="b", priority_class="low") for i in range(2)),
    ]
    decision = schedule_pod(make_pod("big", gpus=2, priority_class="high"), nodes, bound)
    assert decision.nominated_node == "b"
    assert sorted(decision.victims) == [("team-a", "b0"), ("team-a", "b1")]


def test_preemption_policy_never() -> None:
    node = make_node("gpu", gpus=1)
    pod = make_pod("polite", gpus=1, priority_class="high")
    pod["spec"]["preemptionPolicy"] = "Never"
    decision = schedule_pod(pod, [node], [make_pod("low", gpus=1, node="gpu", priority_class="low")])
    assert decision == Decision(
        None,
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never.",
    )


def test_preemption_that_cannot_free_enough_reports_the_filter_reason() -> None:
    node = make_node("gpu", gpus=2)
    bound = [
        make_pod("low", gpus=1, node="gpu", priority_class="low"),
        make_pod("peer", gpus=1, node="gpu", priority_class="high"),
    ]
    decision = schedule_pod(make_pod("big", gpus=2, priority_class="high"), [node], bound)
    assert decision.message.endswith("preemption: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert decision.victims == ()


def test_nominated_pods_hold_the_room_freed_for_them() -> None:
    node = make_node("gpu", gpus=1)
    preemptor = make_pod("urgent", gpus=1, priority_class="high")
    preemptor["status"]["nominatedNodeName"] = "gpu"
    latecomer = make_pod("latecomer", gpus=1, priority_class="low")
    assert schedule_pod(latecomer, [node], [], nominated_pods=[preemptor]).node_name is None
    assert schedule_pod(preemptor, [node], [], nominated_pods=[preemptor]).node_name == "gpu"


def test_a_nominated_node_that_fits_is_used() -> None:
    nodes = [make_node("a"), make_node("b")]
    pod = make_pod("p", gpus=1)
    pod["status"]["nominatedNodeName"] = "b"
    assert schedule_pod(pod, nodes, fill("a", 2)).node_name == "b"


# ---------------------------------------------------------------------------------------------
# Conditions and events


def test_unschedulable_condition_validates_on_a_pod() -> None:
    pod = make_pod("p", gpus=1)
    pod["status"]["conditions"] = [unschedulable_condition("0/1 nodes are available: 1 Too many pods.", NOW)]
    assert pod["status"]["conditions"][0] == {
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": "2026-05-01T09:00:00Z",
        "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 Too many pods.",
    }
    assert_valid(pod)


def test_preemption_condition() -> None:
    condition = preemption_condition(make_pod("urgent"), NOW)
    assert condition["reason"] == "PreemptionByScheduler"
    assert condition["message"] == "default-scheduler: preempting to accommodate a higher priority pod"


@pytest.mark.parametrize(
    ("reason", "kind", "action"),
    [
        ("FailedScheduling", "Warning", "Scheduling"),
        ("Scheduled", "Normal", "Binding"),
        ("Preempted", "Normal", "Preempting"),
    ],
)
def test_scheduler_events(reason: str, kind: str, action: str) -> None:
    pod = make_pod("nb-1")
    event = scheduler_event(pod, reason, "msg", NOW)
    assert_valid(event)
    assert event["metadata"]["name"].startswith("nb-1.")
    int(event["metadata"]["name"].split(".", 1)[1], 16)
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "nb-1",
        "namespace": "team-a",
        "uid": "uid-nb-1",
    }
    assert (event["type"], event["action"], event["source"]) == (kind, action, {"component": "default-scheduler"})
    assert (event["count"], event["firstTimestamp"], event["reportingComponent"]) == (
        1,
        "2026-05-01T09:00:00Z",
        "default-scheduler",
    )


def test_event_messages() -> None:
    pod = make_pod("nb-1")
    assert scheduled_message(pod, "gpu-a") == "Successfully assigned team-a/nb-1 to gpu-a"
    assert preempted_message(pod, "gpu-a") == "Preempted by pod uid-nb-1 on node gpu-a"


def test_events_at_the_same_instant_get_distinct_names() -> None:
    pod = make_pod("nb-1")
    names = {scheduler_event(pod, r, "m", NOW)["metadata"]["name"] for r in ("Scheduled", "Preempted")}
    assert len(names) == 2
