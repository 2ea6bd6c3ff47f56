"""Defaults and validation the API server applies to ``resource.k8s.io/v1`` objects beyond their schema.

Requests default to ``allocationMode: ExactCount`` with ``count: 1``; every CEL selector must compile; a
request is ``exactly`` or ``firstAvailable``, never both; request names are unique; constraints name existing
requests; a claim's (and a template's) spec cannot change after creation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from scheduling.simcluster import dra_cel
from scheduling.simcluster.errors import Cause
from scheduling.simcluster.validation import forbidden, invalid_value, required

if TYPE_CHECKING:
    from scheduling.simcluster.api import Cluster

JSON = dict[str, Any]


def _default_exact(exact: JSON) -> None:
    exact.setdefault("allocationMode", "ExactCount")
    if exact["allocationMode"] == "ExactCount":
        exact.setdefault("count", 1)


def _default_devices(devices: JSON | None) -> None:
    for request in (devices or {}).get("requests") or []:
        if request.get("exactly") is not None:
            _default_exact(request["exactly"])
        for sub in request.get("firstAvailable") or []:
            _default_exact(sub)


def default_claim(cluster: Cluster, claim: JSON) -> JSON:
    _default_devices((claim.get("spec") or {}).get("devices"))
    return claim


def default_template(cluster: Cluster, template: JSON) -> JSON:
    _default_devices(((template.get("spec") or {}).get("spec") or {}).get("devices"))
    return template


def _selector_causes(selectors: Any, path: str) -> Iterator[Cause]:
    for i, selector in enumerate(selectors or []):
        expression = (selector.get("cel") or {}).get("expression")
        if expression is None:
            continue
        if (error := dra_cel.compile_error(expression)) is not None:
            yield invalid_value(f"{path}[{i}].cel.expression", expression, error)


def _devices_causes(devices: Mapping[str, Any] | None, path: str) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, request in enumerate((devices or {}).get("requests") or []):
        at = f"{path}.requests[{i}]"
        name = request.get("name", "")
        if name in names:
            causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{at}.name"))
        names.add(name)
        exact, first = request.get("exactly"), request.get("firstAvailable")
        if exact is not None and first:
            causes.append(forbidden(f"{at}.firstAvailable", "exactly one of `exactly` or `firstAvailable` is required"))
        elif exact is None and not first:
            causes.append(required(at, "exactly one of `exactly` or `firstAvailable` is required"))
        for sub_path, sub in (
            [(f"{at}.exactly", exact)]
            if exact
            else [(f"{at}.firstAvailable[{j}]", s) for j, s in enumerate(first or [])]
        ):
            if not sub.get("deviceClassName"):
                causes.append(required(f"{sub_path}.deviceClassName"))
            if sub.get("allocationMode", "ExactCount") == "ExactCount" and int(sub.get("count") or 1) < 1:
                causes.append(invalid_value(f"{sub_path}.count", sub.get("count"), "must be greater than zero"))
            causes.extend(_selector_causes(sub.get("selectors"), f"{sub_path}.selectors"))
    for i, constraint in enumerate((devices or {}).get("constraints") or []):
        for j, name in enumerate(constraint.get("requests") or []):
            if name not in names:
                causes.append(
                    invalid_value(
                        f"{path}.constraints[{i}].requests[{j}]", name, "must be the name of a request in the claim"
                    )
                )
    return causes


def _immutable(new: Any, old: Any, devices: Callable[[Any], Any]) -> list[Cause]:
    # An update's body has not been defaulted yet: compare it as it would be stored.
    new = copy.deepcopy(new)
    _default_devices(devices(new))
    return [] if new == old else [invalid_value("spec", "", "field is immutable")]


def validate_claim(cluster: Cluster, claim: JSON, old: JSON | None) -> list[Cause]:
    causes = _devices_causes((claim.get("spec") or {}).get("devices"), "spec.devices")
    if old is not None:
        causes += _immutable(claim.get("spec"), old.get("spec"), lambda spec: (spec or {}).get("devices"))
    return causes


def validate_template(cluster: Cluster, template: JSON, old: JSON | None) -> list[Cause]:
    spec = (template.get("spec") or {}).get("spec") or {}
    causes = _devices_causes(spec.get("devices"), "spec.spec.devices")
    if old is not None:
        causes += _immutable(
            template.get("spec"), old.get("spec"), lambda spec: ((spec or {}).get("spec") or {}).get("devices")
        )
    return causes


def validate_class(cluster: Cluster, device_class: JSON, old: JSON | None) -> list[Cause]:
    return list(_selector_causes((device_class.get("spec") or {}).get("selectors"), "spec.selectors"))
