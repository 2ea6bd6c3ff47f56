"""Full ``v1.Node`` objects for the simulated nodes, as the API server serves them."""

from __future__ import annotations

import hashlib
from typing import Any

from scheduling.simcluster.node_render import RenderedNode, render_node, stable_uuid
from scheduling.simcluster.nodes import ClusterSpec, NodeSpec


def _ip(cluster_seed: int, name: str) -> str:
    h = hashlib.sha256(f"{cluster_seed}/{name}".encode()).digest()
    return f"10.0.{h[0]}.{h[1] % 250 + 2}"  # never contacted; only has to look like a node address


def _condition(kind: str, status: str, reason: str, message: str, heartbeat: str, since: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "lastHeartbeatTime": heartbeat,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def build_node_object(
    spec: NodeSpec,
    rendered: RenderedNode,
    *,
    created: str,
    ready: bool = True,
    unschedulable: bool = False,
    heartbeat: str | None = None,
    ready_since: str | None = None,
) -> dict[str, Any]:
    """A full ``v1.Node`` as the API server serves it (valid against the 1.34 strict schema).

    ``heartbeat``/``ready_since`` default to ``created``. Cordoning adds the
    ``node.kubernetes.io/unschedulable`` taint and NotReady the ``node.kubernetes.io/not-ready`` taints,
    as the node lifecycle controller does. ``metadata.resourceVersion`` is the store's to set.
    """
    beat = heartbeat or created
    since = ready_since or created
    seed = rendered.seed
    taints: list[dict[str, str]] = [dict(t) for t in rendered.taints]
    if unschedulable:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": beat})
    if not ready:
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": since})
    node_spec: dict[str, Any] = {
        "podCIDR": f"10.244.{int(_ip(seed, spec.name).split('.')[2])}.0/24",
    }
    node_spec["podCIDRs"] = [node_spec["podCIDR"]]
    if taints:
        node_spec["taints"] = taints
    if unschedulable:
        node_spec["unschedulable"] = True
    ready_cond = (
        _condition("Ready", "True", "KubeletReady", "kubelet is posting ready status", beat, since)
        if ready
        else _condition(
            "Ready",
            "False",
            "KubeletNotReady",
            "PLEG is not healthy: pleg was last seen active 3m0.5s ago; threshold is 3m0s",
            beat,
            since,
        )
    )
    pressure = [
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    conditions = [_condition(k, "False", r, m, beat, created) for k, r, m in pressure] + [ready_cond]
    machine = stable_uuid(seed, spec.name, "machine").replace("-", "")
    handlers = ["", "runc"] + (["nvidia", "nvidia-cdi", "nvidia-legacy"] if spec.model else [])
    gpu_kernel = "6.8.0-1028-nvidia" if spec.model else "6.8.0-1028-generic"
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": spec.name,
            "uid": stable_uuid(seed, spec.name, "uid"),
            "creationTimestamp": created,
            "labels": dict(rendered.labels),
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": node_spec,
        "status": {
            "capacity": dict(rendered.capacity),
            "allocatable": dict(rendered.allocatable),
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": _ip(seed, spec.name)},
                {"type": "Hostname", "address": spec.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": machine,
                "systemUUID": stable_uuid(seed, spec.name, "system"),
                "bootID": stable_uuid(seed, spec.name, "boot", created),
                "kernelVersion": gpu_kernel,
                "osImage": "Ubuntu 24.04.2 LTS",
                "containerRuntimeVersion": "containerd://2.1.4",
                "kubeletVersion": rendered.kubelet_version,
                # Deprecated; kubelets since 1.31 leave it empty (DisableNodeKubeProxyVersion).
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": spec.arch,
            },
            "runtimeHandlers": [
                {"name": h, "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}} for h in handlers
            ],
            "features": {"supplementalGroupsPolicy": True},
        },
    }


def build_cluster_nodes(cluster: ClusterSpec, *, created: str) -> list[dict[str, Any]]:
    """Every node of the cluster in its initial state (the file's migConfig/pluginConfig)."""
    out = []
    for spec in cluster.nodes:
        r = render_node(spec, cluster, mig_config=spec.mig_config, plugin_config=spec.plugin_config)
        out.append(build_node_object(spec, r, created=created))
    return out
