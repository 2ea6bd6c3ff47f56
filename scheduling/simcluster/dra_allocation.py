"""The structured-parameters allocator of kube-scheduler's DynamicResources plugin, for one claim on one node.

Pure. A request (``exactly``, or ``firstAvailable`` sub-requests tried in order) takes devices that its
DeviceClass's selectors and its own CEL selectors accept and that no other claim holds; ``count`` devices
(``allocationMode: ExactCount``, default 1) or every matching device (``All``). A claim-level
``matchAttribute`` constraint makes the listed requests' devices agree on that attribute (e.g.
``gpu.nvidia.com/parentUUID``). The search backtracks over device choices, as the real allocator does, so a
constraint is met whenever some choice meets it. Admin access, consumable capacity and device taints
(alpha in 1.34) are not modelled.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduling.simcluster import dra_cel

JSON = dict[str, Any]

# The DynamicResources filter's reason when a node cannot satisfy a pod's claims (kube-scheduler 1.34).
CANNOT_ALLOCATE = "cannot allocate all claims"


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    body: JSON  # the ResourceSlice's device entry

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified: str) -> Any:
        """A ``matchAttribute`` value: ``domain/name``, where the driver's own domain may be left out of the slice."""
        domain, _, short = qualified.rpartition("/")
        attributes = self.body.get("attributes") or {}
        value = attributes.get(qualified) if qualified in attributes else None
        if value is None and domain == self.driver:
            value = attributes.get(short)
        return None if value is None else tuple(sorted(value.items()))


class AllocationError(Exception):
    """The claim cannot be allocated; the message says why (a selector failure aborts with its CEL error)."""


def slice_devices(slices: Sequence[Mapping[str, Any]]) -> list[Device]:
    out: list[Device] = []
    for s in slices:
        spec = s.get("spec") or {}
        pool = (spec.get("pool") or {}).get("name", "")
        out.extend(Device(spec.get("driver", ""), pool, d["name"], d) for d in spec.get("devices") or [])
    return out


def _selected(device: Device, selectors: Sequence[Mapping[str, Any]]) -> bool:
    activation = dra_cel.device_activation(device.driver, device.body)
    for selector in selectors:
        expression = (selector.get("cel") or {}).get("expression")
        if expression is None:
            continue
        try:
            if not dra_cel.matches(expression, activation):
                return False
        except dra_cel.SelectorError as exc:
            raise AllocationError(f"device {device.name}: {exc}") from exc
    return True


@dataclass(frozen=True)
class _Want:
    request: str  # the result's request name: "<request>" or "<request>/<subrequest>"
    parent: str  # the claim-level request name constraints refer to
    candidates: tuple[Device, ...]
    count: int | None  # None: allocationMode All


def _want(name: str, parent: str, exact: Mapping[str, Any], classes: Classes, devices: Sequence[Device]) -> _Want:
    class_name = exact.get("deviceClassName", "")
    device_class = classes.get(class_name)
    if device_class is None:
        raise AllocationError(f"request {name}: device class {class_name} does not exist")
    selectors = [*((device_class.get("spec") or {}).get("selectors") or []), *(exact.get("selectors") or [])]
    candidates = tuple(d for d in devices if _selected(d, selectors))
    mode = exact.get("allocationMode") or "ExactCount"
    return _Want(name, parent, candidates, None if mode == "All" else int(exact.get("count") or 1))


def _options(request: Mapping[str, Any], classes: Classes, devices: Sequence[Device]) -> list[_Want]:
    name = request["name"]
    if request.get("exactly") is not None:
        return [_want(name, name, request["exactly"], classes, devices)]
    return [_want(f"{name}/{sub['name']}", name, sub, classes, devices) for sub in request.get("firstAvailable") or []]


Chosen = list[tuple["_Want", tuple[Device, ...]]]
Classes = Mapping[str, Mapping[str, Any]]


def _constraints_hold(chosen: Chosen, constraints: Sequence[Mapping[str, Any]]) -> bool:
    for constraint in constraints:
        attribute = constraint.get("matchAttribute")
        if not attribute:
            continue
        scope = set(constraint.get("requests") or ())
        values = {
            d.attribute(attribute) for want, picked in chosen if not scope or want.parent in scope for d in picked
        }
        if None in values or len(values) > 1:
            return False
    return True


def _search(
    options: Sequence[list[_Want]],
    constraints: Sequence[Mapping[str, Any]],
    in_use: frozenset[tuple[str, str, str]],
    chosen: list[tuple[_Want, tuple[Device, ...]]],
) -> Iterator[list[tuple[_Want, tuple[Device, ...]]]]:
    if not _constraints_hold(chosen, constraints):
        return
    if len(chosen) == len(options):
        yield list(chosen)
        return
    taken = in_use | {d.key for _, picked in chosen for d in picked}
    for want in options[len(chosen)]:
        if want.count is None:
            # All: every matching device, and all of them must be free.
            if want.candidates and not any(d.key in taken for d in want.candidates):
                yield from _search(options, constraints, in_use, [*chosen, (want, want.candidates)])
            continue
        free = [d for d in want.candidates if d.key not in taken]
        for picked in itertools.combinations(free, want.count):
            yield from _search(options, constraints, in_use, [*chosen, (want, picked)])


def allocate(
    claim: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    devices: Sequence[Device],
    in_use: frozenset[tuple[str, str, str]],
    node_name: str,
) -> JSON:
    """``status.allocation`` for the claim on this node's devices; :class:`AllocationError` when none fits."""
    spec = (claim.get("spec") or {}).get("devices") or {}
    options = [_options(r, classes, devices) for r in spec.get("requests") or []]
    found = next(_search(options, spec.get("constraints") or [], in_use, []), None)
    if found is None:
        raise AllocationError(CANNOT_ALLOCATE)
    results = [
        {"request": want.request, "driver": d.driver, "pool": d.pool, "device": d.name}
        for want, picked in found
        for d in picked
    ]
    config = []
    for want, _ in found:
        class_name = _class_of(spec, want)
        for entry in (classes.get(class_name) or {}).get("spec", {}).get("config") or []:
            config.append({"source": "FromClass", "requests": [want.request], **entry})
    for entry in spec.get("config") or []:
        config.append({"source": "FromClaim", **entry})
    allocation: JSON = {
        "devices": {"results": results},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
        },
    }
    if config:
        allocation["devices"]["config"] = config
    return allocation


def _class_of(spec: Mapping[str, Any], want: _Want) -> str:
    for request in spec.get("requests") or []:
        if request["name"] != want.parent:
            continue
        if request.get("exactly") is not None:
            return str(request["exactly"].get("deviceClassName", ""))
        sub = want.request.partition("/")[2]
        subs = request.get("firstAvailable") or []
        return next((str(s.get("deviceClassName", "")) for s in subs if s["name"] == sub), "")
    return ""


def allocated_node(claim: Mapping[str, Any]) -> str | None:
    """The node an allocated claim is bound to (its allocation's node selector), else ``None``."""
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return None
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return None


def allocated_devices(claim: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [(r["driver"], r["pool"], r["device"]) for r in (allocation.get("devices") or {}).get("results") or []]
