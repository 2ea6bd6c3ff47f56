"""What the cluster has free, as the placement engine sees it, and which node the next pod should go to.

Built each scheduling cycle from the cluster's Node and Pod objects, in two views that are kept in step:

- the engine's :class:`~scheduling.engine.state.ClusterState`: one row per schedulable node, its GPU mode
  read from GPU Feature Discovery (MIG when the device plugin advertises MIG instances, time-sliced when
  ``nvidia.com/gpu.replicas`` > 1, else whole GPUs), CPU and memory from allocatable, minus bound pods;
- the device plugin's counts per extended resource (allocatable minus the requests of bound pods), which
  is what kube-scheduler checks and so what decides whether a pod fits at all.

Choosing a node narrows the engine to the nodes whose labels, taints and counts admit the pod, and asks
the portal's policy (``ours``: FGD's fragmentation plus the GPUs that CPU and memory strand; MIG and
time-slicing placers for those modes). The device plugin, not the portal, picks the GPU, MIG instance or
replica on the node, so the GPU and slot the engine records are notional: they feed its fragmentation
measure. Where the notional layout has no room but the counts do (say, the plugin put a MIG instance
elsewhere than the engine assumed, or a node mixes MIG and whole GPUs), the counts win and the node with
the fewest such devices left is taken.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt
from kubernetes.utils import parse_quantity

from scheduling.dra import DraView
from scheduling.engine import gpus, mig
from scheduling.engine.policies import make_policy
from scheduling.engine.policies.router import Router
from scheduling.engine.shapes import MILLI, Placement, PodShape
from scheduling.engine.state import EXCLUSIVE, MIG, TIME_SLICED, ClusterState, build_state
from scheduling.kube.keys import GPU_RESOURCE, GPU_TAINT_KEY, workspace_id_of
from scheduling.node_gpus import NodeGpus, capacity_by_model, read_node

TERMINAL_PHASES = ("Succeeded", "Failed")
MIB = 1024 * 1024

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


def succeeded_workspace(pod: Mapping[str, Any]) -> int | None:
    """The workspace of a pod that ran to completion; None for any other pod."""
    return workspace_id_of(pod) if pod.get("status", {}).get("phase") == "Succeeded" else None


@dataclass(frozen=True)
class Demand:
    """What one pod of a workspace needs; ``pods`` of them must fit (one per worker)."""

    resource_name: str  # extended resource, or "" for CPU-only pods
    count: int
    cpu_millis: int
    memory_mib: int
    node_selector: Mapping[str, str]
    pods: int = 1
    sharing: str = ""  # "exclusive" | "mig" | "time-sliced" | "mps" ("" for CPU only)
    gpu_model: str = ""  # catalogue key, e.g. H100-80GB-HBM3
    mig_profile: str = ""
    replicas: int = 1  # time-slicing replicas per GPU
    claim: bool = False  # asked with a DRA claim: only nodes whose GPUs the DRA driver publishes will do


@dataclass(frozen=True)
class Held:
    """What one bound pod took from its node, as taken, so that it can be given back exactly."""

    node: int
    workspace: int | None
    host: PodShape  # CPU and memory taken (less than asked where the cluster overcommitted the node)
    devices: tuple[tuple[str, int], ...]  # device-plugin counts
    noted: tuple[tuple[PodShape, Placement], ...]  # the engine's notional GPUs, MIG slots and replicas


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: dict[str, str]
    gpu_tainted: bool
    dra: bool = False  # the DRA driver publishes its GPUs; the device plugin does not run there


def _pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = {}
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        # Extended resources live in limits; requests default to limits when absent.
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, quantity in merged.items():
            totals[name] = totals.get(name, Decimal(0)) + Decimal(parse_quantity(quantity))
    return totals


def _taints(node: Mapping[str, Any]) -> tuple[bool, bool]:
    """(has the GPU taint, has any other NoSchedule/NoExecute taint our pods do not tolerate)."""
    gpu, other = False, False
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if taint.get("key") == GPU_TAINT_KEY:
            gpu = True
        else:
            other = True
    return gpu, other


def _gpu_layout(node: NodeGpus) -> tuple[str, int, int, int]:
    """(catalogue model or "", GPU count, engine mode, replicas) of a node."""
    if not node.model or not node.count:
        return "", 0, EXCLUSIVE, 0
    if node.has_mig_devices:
        try:
            mig.geometry_for(node.model)
        except gpus.MigNotSupported:
            return node.model, 0, EXCLUSIVE, 0
        return node.model, node.count, MIG, 0
    if node.replicas > 1:
        return node.model, node.count, TIME_SLICED, node.replicas
    # The engine sees only the healthy GPUs.
    return node.model, node.healthy_whole_gpus, EXCLUSIVE, 0


def _profile_of(model: str, resource: str) -> str | None:
    profile = gpus.profile_for_resource(model, resource) if model else None
    return profile.name if profile is not None else None


def device_shapes(sharing: str, model: str, count: int, *, profile: str = "", replicas: int = 1) -> list[PodShape]:
    """``count`` device-plugin units as engine shapes, GPU part only (no CPU or memory): MIG instances and
    time-sliced replicas one shape each, whole GPUs one shape for all."""
    models = frozenset({model}) if model else None
    if count <= 0:
        return []
    if sharing == "mig":
        return [PodShape(0, 0, 1, MILLI, models, profile)] * count
    if sharing in ("time-sliced", "mps"):  # one replica each; the engine places MPS replicas alike
        return [PodShape(0, 0, 1, MILLI // max(replicas, 1), models, replica=True)] * count
    return [PodShape(0, 0, count, MILLI, models)]


_router: Router | None = None
_router_lock = threading.Lock()


def live_router() -> Router:
    """The portal's policy, kept for the life of the process so that it keeps learning the workload."""
    global _router
    with _router_lock:
        if _router is None:
            _router = Router(make_policy("ours", (), np.random.default_rng(0)))
        return _router


@dataclass
class Capacity:
    nodes: list[NodeInfo]
    state: ClusterState
    free: dict[str, I64]  # device-plugin resource -> free count per node
    bound_pods: Counter[int] = field(default_factory=Counter)  # bound pods per workspace
    # Pods per workspace that ran to completion (phase Succeeded): with none left on a node, its work is done
    # before the reconcile pass writes so (see the scheduling cycle).
    succeeded_pods: Counter[int] = field(default_factory=Counter)
    by_model: dict[str, int] = field(default_factory=dict)  # quota capacity per GPU model (node_gpus)
    router: Router = field(default_factory=live_router)
    _selectors: dict[tuple[tuple[str, str], ...], Mask] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._index = {node.name: i for i, node in enumerate(self.nodes)}
        self._gpu_tainted = np.array([node.gpu_tainted for node in self.nodes], dtype=np.bool_)
        self._dra = np.array([node.dra for node in self.nodes], dtype=np.bool_)

    @classmethod
    def from_objects(
        cls,
        nodes: Iterable[Mapping[str, Any]],
        pods: Iterable[Mapping[str, Any]],
        router: Router | None = None,
        *,
        dra: DraView | None = None,
        claims: Iterable[Mapping[str, Any]] = (),
    ) -> Capacity:
        """From Node and Pod objects; with ``dra``, DRA nodes' devices count as device-plugin units and each
        allocated claim of ``claims`` takes its devices (scheduling/dra.py)."""
        infos: list[NodeInfo] = []
        allocs: list[dict[str, int]] = []
        layouts: list[tuple[str, int, int, int]] = []
        cpu: list[int] = []
        memory: list[int] = []
        read_all: list[NodeGpus] = []
        for node in nodes:
            if dra is not None:
                node = dra.with_devices(node)
            gpu_tainted, other_taints = _taints(node)
            read = read_node(node)
            read_all.append(read)
            if not read.ready or read.cordoned or other_taints:
                continue
            allocatable = node["status"].get("allocatable") or {}
            infos.append(
                NodeInfo(read.name, dict(read.labels), gpu_tainted, dra is not None and read.name in dra.devices)
            )
            allocs.append(dict(read.devices))
            layouts.append(_gpu_layout(read))
            cpu.append(int(Decimal(parse_quantity(allocatable.get("cpu", 0))) * 1000))
            memory.append(int(Decimal(parse_quantity(allocatable.get("memory", 0))) // MIB))
        state = build_state(
            [n.name for n in infos],
            [layout[0] for layout in layouts],
            [layout[1] for layout in layouts],
            cpu,
            memory,
            modes=[layout[2] for layout in layouts],
            replicas=[layout[3] for layout in layouts],
        )
        names = sorted({name for alloc in allocs for name in alloc})
        free = {name: np.array([alloc.get(name, 0) for alloc in allocs], dtype=np.int64) for name in names}
        capacity = cls(infos, state, free, by_model=capacity_by_model(read_all), router=router or live_router())
        capacity._occupy_all(pods)
        if dra is not None:
            for claim in claims:
                capacity.occupy_claim(claim, dra)
        return capacity

    # -- building: what bound pods already hold ------------------------------------------------------

    def _occupy_all(self, pods: Iterable[Mapping[str, Any]]) -> None:
        for pod in pods:
            self.occupy(pod)
            self.count_succeeded(pod)

    def occupy(self, pod: Mapping[str, Any]) -> Held | None:
        """Take what a bound pod holds on its node; answers it (to give back with :meth:`vacate`), or None
        for a pod that holds nothing here (not bound to a schedulable node, or finished)."""
        node = self._index.get(pod.get("spec", {}).get("nodeName") or "")
        if node is None or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
            return None
        workspace = workspace_id_of(pod)
        requests = _pod_requests(pod)
        host = PodShape(
            math.ceil(requests.get("cpu", Decimal(0)) * 1000), math.ceil(requests.get("memory", Decimal(0)) / MIB)
        )
        cpu_before, memory_before = int(self.state.cpu_free[node]), int(self.state.mem_free[node])
        self._apply_or_clamp(host, node)
        devices, noted = self._take_devices(node, {name: int(amount) for name, amount in requests.items()})
        if workspace is not None:
            self.bound_pods[workspace] += 1
        taken = PodShape(cpu_before - int(self.state.cpu_free[node]), memory_before - int(self.state.mem_free[node]))
        return Held(node, workspace, taken, devices, noted)

    def count_succeeded(self, pod: Mapping[str, Any]) -> int | None:
        """Count a pod that ran to completion for its workspace; answers the workspace (to give back with
        :meth:`uncount_succeeded` when the pod changes or goes), or None for any other pod."""
        workspace = succeeded_workspace(pod)
        if workspace is not None:
            self.succeeded_pods[workspace] += 1
        return workspace

    def uncount_succeeded(self, workspace: int) -> None:
        self.succeeded_pods[workspace] -= 1
        if self.succeeded_pods[workspace] <= 0:
            del self.succeeded_pods[workspace]

    def occupy_claim(self, claim: Mapping[str, Any], dra: DraView) -> Held | None:
        """Take the devices an allocated ResourceClaim holds (its pods take only their CPU and memory);
        answers it for :meth:`vacate`, or None for a claim that holds nothing on a schedulable node."""
        held = dra.held_by(claim)
        node = self._index.get(held[0]) if held else None
        if held is None or node is None:
            return None
        devices, noted = self._take_devices(node, held[1])
        return Held(node, None, PodShape(0, 0), devices, noted)

    def _take_devices(
        self, node: int, amounts: Mapping[str, int]
    ) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[PodShape, Placement], ...]]:
        devices: list[tuple[str, int]] = []
        noted: list[tuple[PodShape, Placement]] = []
        for name, amount in amounts.items():
            if name in self.free:
                self.free[name][node] -= amount
                devices.append((name, amount))
                for shape in self._device_shapes(node, name, amount):
                    placement = self._note(shape, node)
                    if placement is not None:
                        noted.append((shape, placement))
        return tuple(devices), tuple(noted)

    def vacate(self, held: Held) -> None:
        """Give back exactly what :meth:`occupy` took (the pod finished, moved or is gone)."""
        for shape, placement in reversed(held.noted):
            self.state.release(shape, placement)
        for name, amount in held.devices:
            self.free[name][held.node] += amount
        self.state.release(held.host, Placement(held.node))
        if held.workspace is not None:
            self.bound_pods[held.workspace] -= 1
            if self.bound_pods[held.workspace] <= 0:
                del self.bound_pods[held.workspace]

    @property
    def bound(self) -> Set[int]:
        """Workspaces with at least one pod on a node."""
        return self.bound_pods.keys()

    def copy(self) -> Capacity:
        """An independent copy to decide on (the node list, its selector masks and the router are shared)."""
        twin = replace(self, state=self.state.copy(), free={k: v.copy() for k, v in self.free.items()})
        twin.bound_pods = Counter(self.bound_pods)
        twin.succeeded_pods = Counter(self.succeeded_pods)
        twin._lock = threading.Lock()
        return twin

    def _apply_or_clamp(self, host: PodShape, node: int) -> None:
        """Take a bound pod's CPU and memory; a node the cluster overcommitted is simply left at zero."""
        try:
            self.state.apply(host, Placement(node))
        except ValueError:
            self.state.cpu_free[node] = max(0, int(self.state.cpu_free[node]) - host.cpu_milli)
            self.state.mem_free[node] = max(0, int(self.state.mem_free[node]) - host.memory_mib)

    def _device_shapes(self, node: int, resource: str, count: int) -> list[PodShape]:
        """The engine shapes (GPU part only) of ``count`` units of ``resource`` held on ``node``."""
        mode = int(self.state.mode[node])
        model = self.state.models[int(self.state.model_idx[node])]
        if not model:
            return []
        if mode == MIG:
            profile = _profile_of(model, resource)
            return device_shapes("mig", model, count, profile=profile) if profile else []
        if resource != GPU_RESOURCE:
            return []
        if mode == TIME_SLICED:
            return device_shapes("time-sliced", model, count, replicas=int(self.state.ts_replicas[node]))
        return device_shapes("exclusive", model, count)

    def _note(self, shape: PodShape, node: int) -> Placement | None:
        """Record ``shape`` on ``node`` in the engine's notional layout, if that layout has room for it;
        answers where it went (None: nowhere, the counts alone hold it)."""
        with self.state.restricted(self._one(node)):
            if shape.mig_profile is not None:
                placement = self.router.mig.choose(self.state, shape)
            elif shape.replica:
                placement = self.router.replica.choose(self.state, shape)
            elif self.state.full_free[node] >= shape.num_gpu:
                placement = Placement(node, self.state.whole_gpus(node, shape.num_gpu))
            else:
                placement = None
        if placement is not None:
            self.state.apply(shape, placement)
        return placement

    # -- deciding ------------------------------------------------------------------------------------

    def _selector_mask(self, selector: Mapping[str, str]) -> Mask:
        key = tuple(sorted(selector.items()))
        if key not in self._selectors:
            self._selectors[key] = np.array(
                [all(n.labels.get(k) == v for k, v in key) for n in self.nodes], dtype=np.bool_
            )
        return self._selectors[key]

    def _served(self, demand: Demand) -> Mask:
        """Nodes that can serve ``demand``'s GPUs: the DRA driver's for a claim, the device plugin's otherwise."""
        return self._dra if demand.claim else ~self._dra

    def _units_free(self, resource: str) -> I64:
        return self.free.get(resource, np.zeros(len(self.nodes), dtype=np.int64))

    def _admits(self, demand: Demand) -> Mask:
        """Nodes whose labels, taints and free counts admit one pod of ``demand`` now."""
        ok = self._selector_mask(demand.node_selector).copy()
        if demand.resource_name:
            ok &= (self._units_free(demand.resource_name) >= demand.count) & self._served(demand)
        else:  # CPU-only pods do not tolerate the GPU taint
            ok &= ~self._gpu_tainted
        ok &= (self.state.cpu_free >= demand.cpu_millis) & (self.state.mem_free >= demand.memory_mib)
        return ok

    def _shapes(self, demand: Demand) -> list[PodShape]:
        """One pod of ``demand`` as engine shapes; the first carries the pod's CPU and memory."""
        if not demand.resource_name or demand.count == 0:
            return [PodShape(demand.cpu_millis, demand.memory_mib)]
        sharing = demand.sharing if demand.mig_profile or demand.sharing != "mig" else "exclusive"
        first, *rest = device_shapes(
            sharing, demand.gpu_model, demand.count, profile=demand.mig_profile, replicas=demand.replicas
        )
        return [replace(first, cpu_milli=demand.cpu_millis, memory_mib=demand.memory_mib), *rest]

    def _fallback(self, ok: Mask, demand: Demand) -> int:
        """The admitted node with the least left of what ``demand`` asks for (best fit on the counts)."""
        nodes = np.flatnonzero(ok)
        left = self._units_free(demand.resource_name)[nodes] if demand.resource_name else self.state.cpu_free[nodes]
        return int(nodes[np.argmin(left)])

    def _place_pod(self, demand: Demand, within: Mask | None) -> int | None:
        ok = self._admits(demand)
        if within is not None:
            ok &= within
        if not ok.any():
            return None
        shapes = self._shapes(demand)
        sole = self._sole_node(ok, shapes[0])
        if sole is not None:  # its one candidate, whatever the policy
            fits = self.state.fits(shapes[0])[sole]
            choice = Placement(sole, self.state.whole_gpus(sole, shapes[0].num_gpu)) if fits else None
        else:
            with self.state.restricted(ok):
                choice = self.router.choose(self.state, shapes[0])
        if choice is not None:
            node = choice.node
            self.state.apply(shapes[0], choice)
            rest = shapes[1:]
        else:
            node = self._fallback(ok, demand)
            self._apply_or_clamp(PodShape(demand.cpu_millis, demand.memory_mib), node)
            rest = [replace(s, cpu_milli=0, memory_mib=0) for s in shapes if s.num_gpu]
        for shape in rest:
            self._note(shape, node)
        if demand.resource_name:
            self.free[demand.resource_name][node] -= demand.count
        return node

    def _sole_node(self, ok: Mask, pod: PodShape) -> int | None:
        """The one node that admits ``pod``, if it is the only one and the pod's GPUs are whole (or none): it
        then takes that node's lowest free GPUs without asking the policy. A pinned workspace's room is held
        again every cycle, so the policy's cost would be spent for nothing."""
        if pod.is_sharing or pod.mig_profile is not None or pod.replica:
            return None
        nodes = np.flatnonzero(ok)
        return int(nodes[0]) if len(nodes) == 1 else None

    def _snapshot(self) -> tuple[ClusterState, dict[str, I64]]:
        return self.state.copy(), {k: v.copy() for k, v in self.free.items()}

    def _restore(self, saved: tuple[ClusterState, dict[str, I64]]) -> None:
        self.state, self.free = saved

    def place(self, demand: Demand) -> list[str] | None:
        """Reserve room for every pod of ``demand`` (all or nothing); returns the chosen node per pod.

        Pods of one workspace go to the node of the first if they fit there (so a job can be pinned to
        one node and share its home volume); otherwise each pod goes where the engine chooses.
        """
        with self._lock:
            saved = self._snapshot()
            chosen: list[int] = []
            for _ in range(demand.pods):
                node = self._place_pod(demand, self._one(chosen[0])) if chosen else None
                if node is None:
                    node = self._place_pod(demand, None)
                if node is None:
                    self._restore(saved)
                    return None
                chosen.append(node)
            return [self.nodes[n].name for n in chosen]

    def reserve(self, demand: Demand, node_name: str) -> bool:
        """Hold room for ``demand`` on the node it was pinned to; False if that node cannot take it."""
        index = self._index.get(node_name)
        if index is None:
            return False
        with self._lock:
            saved = self._snapshot()
            for _ in range(demand.pods):
                if self._place_pod(demand, self._one(index)) is None:
                    self._restore(saved)
                    return False
            return True

    def _one(self, node: int) -> Mask:
        mask = np.zeros(len(self.nodes), dtype=np.bool_)
        mask[node] = True
        return mask

    # -- reporting -----------------------------------------------------------------------------------

    def place_would_fail(self, demand: Demand) -> bool:
        """True when no node could take a pod of ``demand`` right now (nothing is reserved)."""
        with self._lock:
            return not self._admits(demand).any()

    def free_units(self, demand: Demand) -> int:
        """How many single-unit pods like ``demand`` the cluster could start now (CPU pods: by CPU)."""
        ok = self._selector_mask(demand.node_selector)
        if demand.resource_name:
            return int(self._units_free(demand.resource_name)[ok & self._served(demand)].sum())
        untainted = ok & ~self._gpu_tainted
        return int((self.state.cpu_free[untainted] // max(demand.cpu_millis, 1)).sum())

    def explain(self, demand: Demand) -> str:
        """Why ``demand`` fits nowhere, counted per reason like kube-scheduler's message (each node counts
        once, for the first of these it fails)."""
        left = np.ones(len(self.nodes), dtype=np.bool_)
        checks: list[tuple[str, Mask]] = [
            ("node(s) didn't match the offering's node selector", ~self._selector_mask(demand.node_selector))
        ]
        if demand.resource_name:
            driver = "the DRA driver" if demand.claim else "the device plugin"
            checks.append((f"node(s) whose GPUs {driver} does not serve", ~self._served(demand)))
            short = self._units_free(demand.resource_name) < demand.count
            checks.append((f"Insufficient {demand.resource_name}", short))
        else:
            checks.append(("node(s) are GPU nodes", self._gpu_tainted))
        reasons: dict[str, int] = {}
        for reason, failing in checks:
            hit = failing & left
            if hit.any():
                reasons[reason] = int(hit.sum())
            left &= ~hit
        if left.any():
            reasons["Insufficient cpu or memory"] = int(left.sum())
        parts = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        return f"0/{len(self.nodes)} nodes are available: {parts}."
