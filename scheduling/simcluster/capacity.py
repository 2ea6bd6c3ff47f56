"""Per-node accounting kept up to date as pods bind and finish, so that a scheduling cycle does not
rescan every pod: requested totals, pod counts and the GPU devices each pod holds.

The decision itself is `scheduler.schedule_pod`'s. This index narrows what it looks at: the nodes that
pass the filters (checked against the running totals), at most `SCORED_NODES` of them per cycle
starting from a rotating offset, as kube-scheduler's percentageOfNodesToScore does, and one synthetic
pod per node carrying that node's requested totals instead of all its pods (see `NodeUse.view`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scheduling.simcluster import scheduler
from scheduling.simcluster.device_plugin import DeviceRef

JSON = dict[str, Any]
Resources = dict[str, int]

# kube-scheduler scores at least 100 feasible nodes (percentageOfNodesToScore); a smaller window keeps
# a 1,000-node simulation fast, and clusters up to this size are scored in full.
SCORED_NODES = 16
# What the scheduler reads besides the pod's own requests.
_ALWAYS_VIEWED = frozenset({"cpu", "memory", "pods"})


@dataclass
class PodUse:
    uid: str
    namespace: str
    name: str
    requests: Resources
    devices: tuple[DeviceRef, ...] = ()


@dataclass
class NodeUse:
    name: str
    node: JSON
    allocatable: Resources
    used: Resources = field(default_factory=dict)
    pods: dict[str, PodUse] = field(default_factory=dict)  # by pod uid: bound, not terminal
    devices: dict[DeviceRef, str] = field(default_factory=dict)  # device -> pod uid
    # Trimmed copies for the scheduler, by the resources a pod asks for (see `view`).
    _views: dict[frozenset[str], tuple[JSON, JSON]] = field(default_factory=dict)
    _static: str | None = None

    def view(self, resources: frozenset[str]) -> tuple[JSON, JSON]:
        """The node and one stand-in pod requesting the node's totals, both limited to `resources`.

        The scheduler's filters and scores only read the resources the pod asks for (plus cpu, memory
        and the pod count), so leaving the rest out changes no decision and spares it parsing them.
        """
        cached = self._views.get(resources)
        if cached is None:
            status = self.node.get("status", {})
            allocatable = {k: v for k, v in status.get("allocatable", {}).items() if k in resources}
            node = {**self.node, "status": {**status, "allocatable": allocatable}}
            requests = {k: (f"{v}m" if k == "cpu" else str(v)) for k, v in self.used.items() if v and k in resources}
            usage = {
                "metadata": {"name": f"usage.{self.name}", "namespace": "", "uid": f"usage.{self.name}"},
                "spec": {"nodeName": self.name, "containers": [{"name": "usage", "resources": {"requests": requests}}]},
                "status": {"phase": "Running"},
            }
            cached = self._views[resources] = (node, usage)
        return cached

    def look(self, resources: frozenset[str], *, labels: bool) -> tuple[str, tuple[tuple[str, int], ...]]:
        """What the scheduler's scoring sees of this node for a pod asking for `resources`: allocatable, use,
        PreferNoSchedule taints, and labels only when the pod has preferred node affinity."""
        if self._static is None:
            taints = [t for t in self.node.get("spec", {}).get("taints", []) if t.get("effect") == "PreferNoSchedule"]
            self._static = json.dumps([taints, self.allocatable], sort_keys=True)
        static = self._static
        if labels:
            static += json.dumps(self.node["metadata"].get("labels"), sort_keys=True)
        return static, tuple(sorted((k, v) for k, v in self.used.items() if k in resources))

    def fits(self, request: Resources) -> bool:
        if len(self.pods) + 1 > self.allocatable.get("pods", 110):
            return False
        return all(
            amount <= 0 or amount <= self.allocatable.get(res, 0) - self.used.get(res, 0)
            for res, amount in request.items()
            if res != "pods"
        )


class Capacity:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeUse] = {}
        self._order: list[str] = []
        self._next_start = 0
        self._where: dict[str, str] = {}  # pod uid -> node name
        # Whether pods with a given placement signature pass a node's filters, until the node changes.
        self._filtered: dict[tuple[str, str], bool] = {}

    # -- nodes ------------------------------------------------------------------------------------

    def set_node(self, node: JSON) -> NodeUse:
        name = node["metadata"]["name"]
        entry = self.nodes.get(name)
        if entry is None:
            entry = self.nodes[name] = NodeUse(name, node, scheduler.node_allocatable(node))
            self._order = sorted(self.nodes)
        else:
            entry.node = node
            entry.allocatable = scheduler.node_allocatable(node)
            entry._views.clear()
            entry._static = None
        self._filtered = {k: v for k, v in self._filtered.items() if k[1] != name}
        return entry

    def remove_node(self, name: str) -> None:
        if self.nodes.pop(name, None) is not None:
            self._order = sorted(self.nodes)

    # -- pods -------------------------------------------------------------------------------------

    def bind(self, node_name: str, pod: JSON, devices: Iterable[DeviceRef] = ()) -> PodUse:
        meta = pod["metadata"]
        entry = self.nodes[node_name]
        use = PodUse(meta["uid"], meta["namespace"], meta["name"], scheduler.pod_requests(pod), tuple(devices))
        self.release(use.uid)
        entry.pods[use.uid] = use
        for res, amount in use.requests.items():
            entry.used[res] = entry.used.get(res, 0) + amount
        for ref in use.devices:
            entry.devices[ref] = use.uid
        entry._views.clear()
        self._where[use.uid] = node_name
        return use

    def release(self, pod_uid: str) -> PodUse | None:
        """The pod stopped holding resources (finished, failed or deleted)."""
        node_name = self._where.pop(pod_uid, None)
        if node_name is None or node_name not in self.nodes:
            return None
        entry = self.nodes[node_name]
        use = entry.pods.pop(pod_uid, None)
        if use is None:
            return None
        for res, amount in use.requests.items():
            entry.used[res] = entry.used.get(res, 0) - amount
        for ref in use.devices:
            entry.devices.pop(ref, None)
        entry._views.clear()
        return use

    def node_of(self, pod_uid: str) -> str | None:
        return self._where.get(pod_uid)

    def use_of(self, pod_uid: str) -> PodUse | None:
        node = self._where.get(pod_uid)
        return self.nodes[node].pods.get(pod_uid) if node in self.nodes else None

    # -- candidate search -------------------------------------------------------------------------

    def views(
        self, pod: JSON, entries: list[NodeUse], request: Resources, keep: set[str]
    ) -> tuple[list[JSON], list[JSON]]:
        """Trimmed nodes and their stand-in pods, for `scheduler.schedule_pod`.

        Nodes that look the same to the scheduler (same labels, taints, allocatable and use of the asked-for
        resources) score the same, and ties go to the first name; so only the first of each such group is
        passed, which leaves the decision unchanged. Nodes named in `keep` (nominations) always go.
        """
        resources = _ALWAYS_VIEWED | frozenset(request)
        affinity = pod.get("spec", {}).get("affinity", {}).get("nodeAffinity", {})
        labels = bool(affinity.get("preferredDuringSchedulingIgnoredDuringExecution"))
        seen: set[tuple[str, tuple[tuple[str, int], ...]]] = set()
        pairs = []
        for entry in sorted(entries, key=lambda e: e.name):
            key = entry.look(resources, labels=labels)
            if key in seen and entry.name not in keep:
                continue
            seen.add(key)
            pairs.append(entry.view(resources))
        return [node for node, _ in pairs], [usage for _, usage in pairs]

    def candidates(self, pod: JSON, request: Resources) -> list[NodeUse]:
        """Nodes that pass the filters, up to SCORED_NODES of them from a rotating start, plus the
        pod's nominated node when it passes."""
        names = self._order
        if not names:
            return []
        found: list[NodeUse] = []
        signature = _placement_signature(pod)
        start = self._next_start % len(names)
        scanned = 0
        for i in range(len(names)):
            entry = self.nodes[names[(start + i) % len(names)]]
            scanned = i + 1
            if self._passes(signature, pod, entry) and entry.fits(request):
                found.append(entry)
                if len(found) >= SCORED_NODES:
                    break
        self._next_start = start + scanned
        nominated = pod.get("status", {}).get("nominatedNodeName")
        if nominated in self.nodes and all(e.name != nominated for e in found):
            entry = self.nodes[nominated]
            if self._passes(signature, pod, entry) and entry.fits(request):
                found.append(entry)
        return found

    def _passes(self, signature: str, pod: JSON, entry: NodeUse) -> bool:
        key = (signature, entry.name)
        passed = self._filtered.get(key)
        if passed is None:
            passed = self._filtered[key] = _passes_filters(pod, entry.node)
        return passed


def _placement_signature(pod: JSON) -> str:
    """What the node-level filters read from a pod: pods alike in these pass the same nodes."""
    spec = pod.get("spec", {})
    fields = (spec.get("tolerations"), spec.get("nodeSelector"), spec.get("affinity"))
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def _passes_filters(pod: JSON, node: JSON) -> bool:
    """The scheduler's node-level filters (unschedulable, taints, affinity), with its own predicates."""
    tolerations = pod.get("spec", {}).get("tolerations") or []
    if node.get("spec", {}).get("unschedulable") and not any(
        scheduler.tolerates(t, {"key": scheduler.UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in tolerations
    ):
        return False
    taints = scheduler.effective_taints(node)
    if taints and scheduler.untolerated_taint(tolerations, taints, ("NoSchedule", "NoExecute")):
        return False
    return scheduler.matches_node_affinity(pod, node)
