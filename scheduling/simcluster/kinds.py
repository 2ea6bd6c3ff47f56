"""What differs between resource types: server-side defaults and admission, field validation beyond the
schema, update rules, generation counting and status subresources."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduling.simcluster import defaults, dra_validation, jobs, quantity
from scheduling.simcluster.clock import parse_time
from scheduling.simcluster.errors import Cause, bad_request
from scheduling.simcluster.errors import forbidden as forbidden_error
from scheduling.simcluster.validation import forbidden, invalid_value, required

if TYPE_CHECKING:
    from scheduling.simcluster.api import Cluster

JSON = dict[str, Any]

MAX_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASSES = defaults.SYSTEM_PRIORITY_CLASSES


@dataclass(frozen=True)
class Kind:
    # Server-side defaults and admission on create; returns the object to store (it may change the
    # private copy it gets in place and return it).
    default: Callable[[Cluster, JSON], JSON] = lambda cluster, obj: obj
    # Field errors on create (old is None) or update.
    validate: Callable[[Cluster, JSON, JSON | None], list[Cause]] = lambda cluster, obj, old: []
    # metadata.generation counts spec changes.
    generation: bool = False
    # The main resource ignores status writes; only the status subresource changes it.
    status_subresource: bool = False


# -- namespaces ---------------------------------------------------------------------------------------


def _default_namespace(cluster: Cluster, ns: JSON) -> JSON:
    ns.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    ns["status"] = {"phase": "Active"}
    ns["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = ns["metadata"]["name"]
    return ns


# -- pods -----------------------------------------------------------------------------------------


def _default_pod(cluster: Cluster, pod: JSON) -> JSON:
    classes = cluster.list_objects("priorityclasses")
    global_default = next((pc["metadata"]["name"] for pc in classes if pc.get("globalDefault")), None)
    try:
        return defaults.default_pod(
            pod,
            uid=pod["metadata"]["uid"],
            now=parse_time(pod["metadata"]["creationTimestamp"]),
            priority_classes={pc["metadata"]["name"]: pc.get("value", 0) for pc in classes},
            preemption_policies={
                pc["metadata"]["name"]: pc.get("preemptionPolicy", "PreemptLowerPriority") for pc in classes
            },
            global_default_class=global_default,
        )
    except defaults.AdmissionError as exc:
        raise forbidden_error("pods", pod["metadata"]["name"], str(exc)) from exc


def _field_errors(errors: list[defaults.FieldError]) -> list[Cause]:
    return [Cause(e.reason, e.message, e.field) for e in errors]


def _resource_errors(obj: JSON, path: str) -> list[Cause]:
    try:
        return _field_errors(defaults.extended_resource_errors(obj, path=path))
    except quantity.QuantityError as exc:
        kind = "Pod" if path == "spec" else "Job"
        raise bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: {exc}') from exc


def _container_causes(spec: JSON, path: str) -> list[Cause]:
    """Rules of the API server's pod spec validation that the OpenAPI schema leaves out."""
    causes = []
    if not spec.get("containers"):
        causes.append(required(f"{path}.containers"))
    for group in ("initContainers", "containers"):
        names: set[str] = set()
        for i, container in enumerate(spec.get(group) or []):
            if not container.get("image"):
                causes.append(required(f"{path}.{group}[{i}].image"))
            if container.get("name") in names:
                causes.append(
                    Cause("FieldValueDuplicate", f'Duplicate value: "{container["name"]}"', f"{path}.{group}[{i}].name")
                )
            names.add(container.get("name", ""))
    return causes


def _validate_pod(cluster: Cluster, pod: JSON, old: JSON | None) -> list[Cause]:
    causes = _container_causes(pod.get("spec") or {}, "spec") + _resource_errors(pod, "spec")
    if old is not None:
        causes.extend(_pod_update_causes(old, pod))
    return causes


# Fields of a pod's spec that an update may change (the real rule also lets tolerations grow).
_MUTABLE_POD_SPEC = (
    "activeDeadlineSeconds",
    "tolerations",
    "terminationGracePeriodSeconds",
    "schedulingGates",
)


def _pod_update_causes(old: JSON, new: JSON) -> list[Cause]:
    old_spec, new_spec = old.get("spec", {}), new.get("spec", {})
    causes = []
    old_deadline, new_deadline = old_spec.get("activeDeadlineSeconds"), new_spec.get("activeDeadlineSeconds")
    if old_deadline is not None and (new_deadline is None or new_deadline > old_deadline):
        causes.append(
            invalid_value("spec.activeDeadlineSeconds", new_deadline, "must be less than or equal to previous value")
        )

    def comparable(spec: JSON) -> JSON:
        out = {k: v for k, v in spec.items() if k not in _MUTABLE_POD_SPEC}
        for key in ("containers", "initContainers"):
            if key in out:
                out[key] = [{k: v for k, v in c.items() if k != "image"} for c in out[key]]
        return out

    if comparable(old_spec) != comparable(new_spec):
        causes.append(
            forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                "(allow it to be set to 1 if it was previously negative)",
            )
        )
    return causes


# -- jobs -----------------------------------------------------------------------------------------


def _default_job(cluster: Cluster, job: JSON) -> JSON:
    return jobs.default_job(job)


def _validate_job(cluster: Cluster, job: JSON, old: JSON | None) -> list[Cause]:
    template = {"spec": job.get("spec", {}).get("template", {}).get("spec", {})}
    causes = _container_causes(template["spec"], "spec.template.spec") + _resource_errors(
        template, "spec.template.spec"
    )
    causes += _field_errors(jobs.job_errors(job))
    if old is not None:
        for key in ("template", "selector", "completionMode"):
            if old.get("spec", {}).get(key) != job.get("spec", {}).get(key):
                causes.append(invalid_value(f"spec.{key}", job["spec"].get(key), "field is immutable"))
        if old.get("spec", {}).get("completions") != job.get("spec", {}).get("completions") and not jobs.elastic(job):
            causes.append(invalid_value("spec.completions", job["spec"].get("completions"), "field is immutable"))
    return causes


# -- services -------------------------------------------------------------------------------------


def _default_service(cluster: Cluster, svc: JSON) -> JSON:
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        spec.setdefault("clusterIP", cluster.allocate_service_ip())
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports", []):
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    svc["status"] = {"loadBalancer": {}}
    return svc


def _validate_service(cluster: Cluster, svc: JSON, old: JSON | None) -> list[Cause]:
    spec = svc.get("spec", {})
    causes: list[Cause] = []
    if spec.get("type", "ClusterIP") != "ExternalName" and not spec.get("ports"):
        causes.append(required("spec.ports"))
    ip = spec.get("clusterIP")
    if ip not in (None, "", "None"):
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            causes.append(
                invalid_value("spec.clusterIP", ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
            )
    if old is not None and old["spec"].get("clusterIP") != spec.get("clusterIP"):
        causes.append(invalid_value("spec.clusterIP", spec.get("clusterIP"), "field is immutable"))
    return causes


# -- persistent volume claims -----------------------------------------------------------------------


def _default_pvc(cluster: Cluster, pvc: JSON) -> JSON:
    """Bind at once, as a dynamic provisioner with Immediate binding would."""
    spec = pvc.setdefault("spec", {})
    spec.setdefault("volumeMode", "Filesystem")
    spec.setdefault("storageClassName", "standard")
    spec["volumeName"] = "pvc-" + pvc["metadata"]["uid"]
    pvc["metadata"].setdefault("annotations", {}).update(
        {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.beta.kubernetes.io/storage-provisioner": "sim.gpuportal.io/hostpath",
            "volume.kubernetes.io/storage-provisioner": "sim.gpuportal.io/hostpath",
        }
    )
    pvc["status"] = {
        "phase": "Bound",
        "accessModes": list(spec.get("accessModes", [])),
        "capacity": {"storage": spec.get("resources", {}).get("requests", {}).get("storage", "0")},
    }
    return pvc


def _validate_pvc(cluster: Cluster, pvc: JSON, old: JSON | None) -> list[Cause]:
    spec = pvc.get("spec", {})
    causes = []
    if not spec.get("accessModes"):
        causes.append(required("spec.accessModes", "at least 1 access mode is required"))
    if "storage" not in spec.get("resources", {}).get("requests", {}):
        causes.append(required("spec.resources[storage]"))
    return causes


# -- priority classes -------------------------------------------------------------------------------


def _default_priority_class(cluster: Cluster, pc: JSON) -> JSON:
    pc.setdefault("preemptionPolicy", "PreemptLowerPriority")
    return pc


def _validate_priority_class(cluster: Cluster, pc: JSON, old: JSON | None) -> list[Cause]:
    name, value = pc["metadata"].get("name", ""), pc.get("value")
    causes = []
    if value is None:
        causes.append(required("value"))
    elif name in SYSTEM_PRIORITY_CLASSES:
        if value != SYSTEM_PRIORITY_CLASSES[name]:
            causes.append(invalid_value("value", value, "value of system priority class is fixed"))
    elif name.startswith("system-"):
        causes.append(invalid_value("metadata.name", name, "priority class names with 'system-' prefix are reserved"))
    elif value > MAX_USER_PRIORITY:
        causes.append(forbidden("value", f"maximum allowed value of a user defined priority is {MAX_USER_PRIORITY}"))
    if old is not None and old.get("value") != value:
        causes.append(forbidden("value", "may not be changed in an update."))
    if pc.get("globalDefault") and old is None:
        other = next((p for p in cluster.list_objects("priorityclasses") if p.get("globalDefault")), None)
        if other is not None:
            causes.append(
                invalid_value("globalDefault", True, f"globalDefault is already set by {other['metadata']['name']}")
            )
    return causes


# -- events -----------------------------------------------------------------------------------------


def _default_event(cluster: Cluster, event: JSON) -> JSON:
    event.setdefault("count", 1)
    event.setdefault("source", {})
    return event


def _validate_event(cluster: Cluster, event: JSON, old: JSON | None) -> list[Cause]:
    involved = event.get("involvedObject", {})
    namespace = event["metadata"].get("namespace", "")
    if involved.get("namespace") and involved["namespace"] != namespace:
        return [invalid_value("involvedObject.namespace", involved["namespace"], "does not match event.namespace")]
    return []


KINDS: dict[str, Kind] = {
    "namespaces": Kind(_default_namespace, status_subresource=True),
    "nodes": Kind(status_subresource=True),
    "pods": Kind(_default_pod, _validate_pod, generation=True, status_subresource=True),
    "jobs": Kind(_default_job, _validate_job, generation=True, status_subresource=True),
    "services": Kind(_default_service, _validate_service, status_subresource=True),
    "persistentvolumeclaims": Kind(_default_pvc, _validate_pvc, status_subresource=True),
    "priorityclasses": Kind(_default_priority_class, _validate_priority_class),
    "events": Kind(_default_event, _validate_event),
    "secrets": Kind(lambda cluster, secret: {"type": "Opaque", **secret}),
    "poddisruptionbudgets": Kind(generation=True, status_subresource=True),
    "deviceclasses": Kind(validate=dra_validation.validate_class, generation=True),
    "resourceclaims": Kind(
        dra_validation.default_claim, dra_validation.validate_claim, generation=True, status_subresource=True
    ),
    "resourceclaimtemplates": Kind(dra_validation.default_template, dra_validation.validate_template),
}

GENERIC = Kind()


def kind_for(store_key: str) -> Kind:
    return KINDS.get(store_key, GENERIC)
