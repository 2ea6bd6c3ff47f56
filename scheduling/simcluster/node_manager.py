"""The simulated nodes behind the Node objects: what GFD and the device plugin publish, readiness,
lost GPUs and the MIG manager, merged into the stored objects without disturbing what users set
(their labels, annotations, taints and `spec.unschedulable`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from scheduling.simcluster import mig_manager, node_objects, node_render, nodes, scheduler
from scheduling.simcluster.device_plugin import is_gpu_resource
from scheduling.simcluster.errors import ApiError
from scheduling.simcluster.mig_manager import GpuConfig
from scheduling.simcluster.node_render import RenderedNode
from scheduling.simcluster.nodes import ClusterSpec, NodeSpec

if TYPE_CHECKING:
    from scheduling.simcluster.api import Cluster
    from scheduling.simcluster.capacity import Capacity

JSON = dict[str, Any]


@dataclass
class SimNode:
    spec: NodeSpec
    gpu: GpuConfig
    rendered: RenderedNode
    created: str
    ready: bool = True
    ready_since: str = ""
    lost: frozenset[int] = frozenset()
    managed_labels: frozenset[str] = frozenset()
    managed_taints: tuple[tuple[str, str, str], ...] = ()


def _taint_key(t: JSON) -> tuple[str, str, str]:
    return t.get("key", ""), t.get("value", ""), t.get("effect", "")


class NodeManager:
    def __init__(self, cluster: Cluster, spec: ClusterSpec, capacity: Capacity, *, mig_delay_s: float) -> None:
        self.cluster = cluster
        self.spec = spec
        self.capacity = capacity
        self.mig_delay = timedelta(seconds=mig_delay_s)
        self.sims: dict[str, SimNode] = {}

    # -- start ------------------------------------------------------------------------------------

    def register_all(self) -> None:
        created = self.cluster.now_text()
        for spec in self.spec.nodes:
            gpu = mig_manager.initial(spec)
            sim = SimNode(spec, gpu, self._render(spec, gpu, frozenset()), created, ready_since=created)
            self.sims[spec.name] = sim
            node = node_objects.build_node_object(spec, sim.rendered, created=created)
            sim.managed_labels = frozenset(node["metadata"]["labels"])
            sim.managed_taints = tuple(_taint_key(t) for t in node["spec"].get("taints", []))
            stored = self.cluster.system_create("nodes", node)
            self.capacity.set_node(stored)
            self.cluster.system_create("leases", self._lease(spec.name, created))

    def _lease(self, name: str, created: str) -> JSON:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": created.replace("Z", ".000000Z")},
        }

    def _render(
        self, spec: NodeSpec, gpu: GpuConfig, lost: frozenset[int], previous: RenderedNode | None = None
    ) -> RenderedNode:
        rendered = node_render.render_node(
            spec,
            self.spec,
            mig_config=gpu.applied_mig,
            plugin_config=gpu.applied_plugin,
            lost_gpus=lost,
            mig_config_label=gpu.requested_mig,
            mig_config_state=gpu.state,
            previous_resources=node_render.extended_resources(previous) if previous else (),
        )
        if gpu.requested_plugin is not None and gpu.requested_plugin != gpu.applied_plugin:
            # The label shows what was asked for while the plugin still runs the old config.
            rendered = replace(rendered, labels={**rendered.labels, nodes.PLUGIN_CONFIG_LABEL: gpu.requested_plugin})
        if gpu.paused:
            paused = {k: "0" for k in rendered.allocatable if k.startswith("nvidia.com/")}
            rendered = replace(
                rendered,
                labels={**rendered.labels, **node_render.paused_operand_labels()},
                allocatable={**rendered.allocatable, **paused},
            )
        return rendered

    # -- reconcile --------------------------------------------------------------------------------

    def gpu_pods_on(self, name: str) -> bool:
        entry = self.capacity.nodes.get(name)
        return entry is not None and any(
            any(is_gpu_resource(r) and n > 0 for r, n in use.requests.items()) for use in entry.pods.values()
        )

    def reconcile(self, name: str) -> None:
        """A node object changed (perhaps by a user): react to its labels and keep it consistent."""
        node = self.cluster.get_object("nodes", "", name)
        if node is None:
            self.capacity.remove_node(name)
            return
        sim = self.sims.get(name)
        if sim is None:  # a node created through the API: it simply is what it says
            self.capacity.set_node(node)
            return
        labels = node["metadata"].get("labels") or {}
        now = self.cluster.clock.now()
        if mig_manager.observe(
            sim.gpu, sim.spec, self.spec, labels, gpu_pods=self.gpu_pods_on(name), now=now, delay=self.mig_delay
        ):
            sim.rendered = self._render(sim.spec, sim.gpu, sim.lost, sim.rendered)
        self.publish(name)

    def next_due(self) -> datetime | None:
        """When the next pending MIG or device-plugin change lands, if any."""
        times = [t for s in self.sims.values() if (t := mig_manager.due(s.gpu)) is not None]
        return min(times, default=None)

    def land_due_changes(self) -> None:
        now = self.cluster.clock.now()
        for name, sim in self.sims.items():
            if mig_manager.due(sim.gpu) is None:
                continue
            if mig_manager.apply_due(sim.gpu, now, gpu_pods=self.gpu_pods_on(name)):
                sim.rendered = self._render(sim.spec, sim.gpu, sim.lost, sim.rendered)
                self.publish(name)

    def publish(self, name: str) -> JSON | None:
        """Write the node object for the simulated state, keeping what users set on it."""
        sim = self.sims[name]
        with self.cluster.store.lock:
            node = self.cluster.get_object("nodes", "", name)
            if node is None:
                return None
            unschedulable = bool(node.get("spec", {}).get("unschedulable"))
            built = node_objects.build_node_object(
                sim.spec,
                sim.rendered,
                created=sim.created,
                ready=sim.ready,
                unschedulable=unschedulable,
                heartbeat=sim.ready_since,
                ready_since=sim.ready_since,
            )
            labels = {k: v for k, v in (node["metadata"].get("labels") or {}).items() if k not in sim.managed_labels}
            # The user's request for a layout is the label's value; the rendering echoes it back.
            labels |= built["metadata"]["labels"]
            sim.managed_labels = frozenset(built["metadata"]["labels"])
            user_taints = [t for t in node.get("spec", {}).get("taints", []) if _taint_key(t) not in sim.managed_taints]
            built_taints = built["spec"].get("taints", [])
            sim.managed_taints = tuple(_taint_key(t) for t in built_taints)
            spec = {**node.get("spec", {}), **{k: v for k, v in built["spec"].items() if k != "taints"}}
            spec.pop("taints", None)
            if built_taints or user_taints:
                spec["taints"] = built_taints + user_taints
            if not unschedulable:
                spec.pop("unschedulable", None)
            new = {
                **node,
                "metadata": {**node["metadata"], "labels": labels},
                "spec": spec,
                "status": built["status"],
            }
            stored = self.cluster.system_update("nodes", new)
            self.capacity.set_node(stored)
            return stored

    # -- faults -----------------------------------------------------------------------------------

    def _sim(self, name: str) -> SimNode:
        sim = self.sims.get(name)
        if sim is None:
            raise ApiError(404, "NotFound", f'nodes "{name}" not found', name=name, kind="nodes")
        return sim

    def set_ready(self, name: str, ready: bool) -> JSON:
        sim = self._sim(name)
        if sim.ready != ready:
            sim.ready = ready
            sim.ready_since = self.cluster.now_text()
            node = self.publish(name)
            if node is not None:
                reason, message = (
                    ("NodeReady", f"Node {name} status is now: NodeReady")
                    if ready
                    else ("NodeNotReady", f"Node {name} status is now: NodeNotReady")
                )
                self.cluster.emit_event(
                    scheduler.make_event(
                        node, reason, message, self.cluster.clock.now(), component="kubelet", host=name
                    )
                )
        return self._status(name)

    def lose_gpu(self, name: str, index: int) -> JSON:
        sim = self._sim(name)
        if not 0 <= index < sim.spec.gpu_count:
            raise ValueError(f"node {name} has no GPU {index}")
        sim.lost = sim.lost | {index}
        sim.rendered = self._render(sim.spec, sim.gpu, sim.lost, sim.rendered)
        self.publish(name)
        return self._status(name)

    def restore_gpu(self, name: str, index: int) -> JSON:
        sim = self._sim(name)
        sim.lost = sim.lost - {index}
        sim.rendered = self._render(sim.spec, sim.gpu, sim.lost, sim.rendered)
        self.publish(name)
        return self._status(name)

    def _status(self, name: str) -> JSON:
        sim = self.sims[name]
        return {
            "name": name,
            "ready": sim.ready,
            "lostGpus": sorted(sim.lost),
            "migConfig": sim.gpu.applied_mig,
            "migConfigState": sim.gpu.state if sim.spec.model and sim.spec.model.mig_capable else None,
            "pluginConfig": sim.gpu.applied_plugin,
            "allocatable": dict(sim.rendered.allocatable),
        }

    def summary(self) -> list[JSON]:
        return [self._status(name) for name in sorted(self.sims)]

    def not_ready(self) -> list[str]:
        return [n for n, s in self.sims.items() if not s.ready]

    def rendered(self, name: str) -> RenderedNode | None:
        sim = self.sims.get(name)
        return sim.rendered if sim else None
