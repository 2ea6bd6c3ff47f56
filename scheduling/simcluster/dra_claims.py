"""Dynamic Resource Allocation in the simulated control plane: the driver's published devices, the
resourceclaim controller, and the scheduler's DynamicResources filter and reservation.

- The NVIDIA DRA driver installs its DeviceClasses and keeps one ResourceSlice per DRA node in step with the
  node's GPUs (MIG layout changes and lost GPUs included), bumping the pool generation on every change.
- The resourceclaim controller creates a claim per pod for each ``resourceClaimTemplateName`` entry
  (``<pod>-<entry>-<5 chars>``, owned by the pod, so the garbage collector deletes it with the pod) and
  records it in ``status.resourceClaimStatuses``; when a pod ends it leaves every claim's ``reservedFor``,
  and a claim nobody reserves any more is deallocated.
- The scheduler filters nodes by whether the pod's claims can be allocated there (an allocated claim pins
  its node), then writes ``status.allocation`` and adds the pod to ``reservedFor`` (at most 256) before the
  pod binds. Pods naming one claim share its devices: each gets a replica slot of the device, so telemetry
  sees them as co-tenants, as on a time-sliced GPU. A node that cannot allocate is not a preemption
  candidate here (the real PostFilter may deallocate claims of lower-priority pods).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduling.simcluster import dra_allocation, dra_devices
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.dra_allocation import AllocationError

if TYPE_CHECKING:
    from scheduling.simcluster.api import Cluster
    from scheduling.simcluster.node_render import RenderedNode
    from scheduling.simcluster.nodes import ClusterSpec

JSON = dict[str, Any]

CLAIMS = "resourceclaims"
SLICES = "resourceslices"
CLASSES = "deviceclasses"
TEMPLATES = "resourceclaimtemplates"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
MAX_RESERVED = 256


@dataclass(frozen=True)
class _Snapshot:
    devices: dict[str, list[dra_allocation.Device]]  # node -> its published devices
    classes: dict[str, JSON]  # DeviceClass name -> object
    in_use: dict[str, set[tuple[str, str, str]]]  # node -> (driver, pool, device) held by allocated claims


def pod_claim_entries(pod: Mapping[str, Any]) -> list[JSON]:
    return list((pod.get("spec") or {}).get("resourceClaims") or [])


def uses_claims(pod: Mapping[str, Any]) -> bool:
    return bool(pod_claim_entries(pod))


class ClaimController:
    def __init__(self, cluster: Cluster, spec: ClusterSpec) -> None:
        self.cluster = cluster
        self.spec = spec
        self.dra_nodes = frozenset(n.name for n in spec.nodes if n.dra)
        self._refs: dict[str, dict[str, DeviceRef]] = {}  # node -> published device name -> device

    # -- the driver -------------------------------------------------------------------------------

    def install(self) -> None:
        if not self.dra_nodes:
            return
        for device_class in dra_devices.device_classes():
            if self.cluster.get_object(CLASSES, "", device_class["metadata"]["name"]) is None:
                self.cluster.system_create(CLASSES, device_class)

    def publish(self, rendered: RenderedNode) -> None:
        """Create or refresh the node's ResourceSlice when its devices changed."""
        if rendered.name not in self.dra_nodes:
            return
        self._refs[rendered.name] = dra_devices.device_refs(rendered)
        name = dra_devices.slice_name(rendered.name)
        with self.cluster.store.lock:
            current = self.cluster.get_object(SLICES, "", name)
            generation = 1 if current is None else current["spec"]["pool"]["generation"]
            built = dra_devices.resource_slice(
                rendered,
                driver_version=self.spec.driver_version,
                cuda_version=self.spec.cuda_version,
                generation=generation,
            )
            if current is None:
                self.cluster.system_create(SLICES, built)
            elif current["spec"]["devices"] != built["spec"]["devices"]:
                built["spec"]["pool"]["generation"] = generation + 1
                self.cluster.system_update(SLICES, {**current, "spec": built["spec"]})

    # -- the resourceclaim controller -------------------------------------------------------------

    def claim_names(self, pod: Mapping[str, Any]) -> dict[str, str | None]:
        """Entry name -> the claim it uses (``None``: the template's claim is not created yet)."""
        listed = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        statuses = {s["name"]: s.get("resourceClaimName") for s in listed}
        return {
            e["name"]: e["resourceClaimName"] if e.get("resourceClaimName") else statuses.get(e["name"])
            for e in pod_claim_entries(pod)
        }

    def ensure_template_claims(self, pod: JSON) -> JSON:
        """Create the pod's claims from its templates; the pod with ``status.resourceClaimStatuses`` filled in."""
        meta = pod["metadata"]
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        known = {s["name"] for s in statuses}
        changed = False
        for entry in pod_claim_entries(pod):
            template_name = entry.get("resourceClaimTemplateName")
            if not template_name or entry["name"] in known:
                continue
            template = self.cluster.get_object(TEMPLATES, meta["namespace"], template_name)
            if template is None:
                continue  # the scheduler says so; the claim is made once the template exists
            suffix = hashlib.sha256(f"{meta['uid']}/{entry['name']}".encode()).hexdigest()[:5]
            template_meta = template["spec"].get("metadata") or {}
            claim_meta: JSON = {
                "name": f"{meta['name']}-{entry['name']}-{suffix}",
                "namespace": meta["namespace"],
                "annotations": {**template_meta.get("annotations", {}), POD_CLAIM_NAME: entry["name"]},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            }
            if labels := template_meta.get("labels"):
                claim_meta["labels"] = dict(labels)
            claim = {"apiVersion": dra_devices.API_VERSION, "kind": "ResourceClaim", "metadata": claim_meta}
            claim["spec"] = template["spec"]["spec"]
            self.cluster.system_create(CLAIMS, claim)
            statuses.append({"name": entry["name"], "resourceClaimName": claim_meta["name"]})
            changed = True
        if not changed:
            return pod
        status = {**(pod.get("status") or {}), "resourceClaimStatuses": statuses}
        return self.cluster.system_update("pods", {**pod, "status": status})

    def release(self, namespace: str, uid: str, claim_names: list[str]) -> None:
        """The pod ended or is gone: leave reservedFor; deallocate a claim nobody reserves any more."""
        for name in claim_names:
            claim = self.cluster.get_object(CLAIMS, namespace, name)
            if claim is None:
                continue
            status = dict(claim.get("status") or {})
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            if len(reserved) == len(status.get("reservedFor") or []):
                continue
            if reserved:
                status["reservedFor"] = reserved
            else:
                status.pop("reservedFor", None)
                status.pop("allocation", None)
            self.cluster.system_update(CLAIMS, {**claim, "status": status})

    # -- the scheduler's DynamicResources plugin --------------------------------------------------

    def _claims(self, pod: Mapping[str, Any]) -> list[JSON] | str:
        namespace = pod["metadata"]["namespace"]
        claims = []
        for entry, name in self.claim_names(pod).items():
            if name is None:
                return f'waiting for resource claim of entry "{entry}" to be created'
            claim = self.cluster.get_object(CLAIMS, namespace, name)
            if claim is None:
                return f'resourceclaim.resource.k8s.io "{name}" not found'
            if claim["metadata"].get("deletionTimestamp"):
                return f'resourceclaim "{name}" is being deleted'
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if len(reserved) >= MAX_RESERVED and not any(r.get("uid") == pod["metadata"]["uid"] for r in reserved):
                return f'resourceclaim "{name}" is reserved for {MAX_RESERVED} consumers, the maximum'
            claims.append(claim)
        return claims

    def _snapshot(self) -> _Snapshot:
        """The devices, classes and allocations one scheduling attempt decides on, read once."""
        devices: dict[str, list[dra_allocation.Device]] = {}
        for s in self.cluster.list_objects(SLICES):
            devices.setdefault(s["spec"].get("nodeName", ""), []).extend(dra_allocation.slice_devices([s]))
        in_use: dict[str, set[tuple[str, str, str]]] = {}
        for claim in self.cluster.list_objects(CLAIMS):
            if (node := dra_allocation.allocated_node(claim)) is not None:
                in_use.setdefault(node, set()).update(dra_allocation.allocated_devices(claim))
        classes = {c["metadata"]["name"]: c for c in self.cluster.list_objects(CLASSES)}
        return _Snapshot(devices, classes, in_use)

    def _plan(self, claims: list[JSON], node_name: str, snapshot: _Snapshot) -> dict[str, JSON]:
        """New allocations (claim name -> allocation) that make every claim usable on the node."""
        devices = snapshot.devices.get(node_name, [])
        in_use = set(snapshot.in_use.get(node_name, ()))
        plans: dict[str, JSON] = {}
        for claim in claims:
            pinned = dra_allocation.allocated_node(claim)
            if pinned is not None:
                if pinned != node_name:
                    raise AllocationError(dra_allocation.CANNOT_ALLOCATE)
                continue
            allocation = dra_allocation.allocate(claim, snapshot.classes, devices, frozenset(in_use), node_name)
            in_use.update((r["driver"], r["pool"], r["device"]) for r in allocation["devices"]["results"])
            plans[claim["metadata"]["name"]] = allocation
        return plans

    def node_filter(self, pod: Mapping[str, Any]) -> Callable[[str], str | None]:
        """The DynamicResources filter for one scheduling attempt: node name -> why the pod's claims cannot
        be allocated there, or None."""
        claims = self._claims(pod)
        if isinstance(claims, str):
            return lambda node: claims
        if len({n for c in claims if (n := dra_allocation.allocated_node(c))}) > 1:
            return lambda node: dra_allocation.CANNOT_ALLOCATE
        snapshot = self._snapshot()

        def check(node_name: str) -> str | None:
            try:
                self._plan(claims, node_name, snapshot)
            except AllocationError as exc:
                return str(exc)
            return None

        return check

    def reserve(
        self, pod: Mapping[str, Any], node_name: str, held: Container[DeviceRef]
    ) -> tuple[DeviceRef, ...] | str:
        """Allocate the pod's claims on the node and reserve them for it; the devices it gets, or why not.

        ``held``: the node's devices already handed to pods; a pod sharing a claimed device gets the first
        free replica slot of it.
        """
        claims = self._claims(pod)
        if isinstance(claims, str):
            return claims
        try:
            plans = self._plan(claims, node_name, self._snapshot())
        except AllocationError as exc:
            return str(exc)
        meta = pod["metadata"]
        refs = self._refs.get(node_name, {})
        devices: list[DeviceRef] = []
        for claim in claims:
            status = dict(claim.get("status") or {})
            if claim["metadata"]["name"] in plans:
                status["allocation"] = plans[claim["metadata"]["name"]]
            reserved = list(status.get("reservedFor") or [])
            if not any(r.get("uid") == meta["uid"] for r in reserved):
                reserved.append({"resource": "pods", "name": meta["name"], "uid": meta["uid"]})
            status["reservedFor"] = reserved
            stored = self.cluster.system_update(CLAIMS, {**claim, "status": status})
            for _, _, device in dra_allocation.allocated_devices(stored):
                ref = refs.get(device)
                if ref is not None:
                    devices.append(_free_slot(ref, held, devices))
        return tuple(devices)


def _free_slot(ref: DeviceRef, held: Container[DeviceRef], chosen: list[DeviceRef]) -> DeviceRef:
    candidate, replica = ref, 0
    while candidate in held or candidate in chosen:
        replica += 1
        candidate = DeviceRef(ref.gpu_index, ref.gi_id, replica)
    return candidate
