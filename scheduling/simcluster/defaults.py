"""What the API server does to a pod between the request and storage: defaulting, admission and
the resource validation rules that matter for GPUs.

Pure functions over API-shaped dicts; they never mutate their input. Also holds the timestamp and
QoS helpers the other simcluster modules share.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from scheduling.simcluster import quantity
from scheduling.simcluster.patch import clone

Obj = dict[str, Any]

DEFAULT_SCHEDULER = "default-scheduler"
# Built into every cluster (pkg/apis/scheduling SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
# DefaultTolerationSeconds admission plugin: every pod may outlive a lost node for five minutes.
DEFAULT_TOLERATION_SECONDS = 300
_NODE_PROBLEM_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


# ---------------------------------------------------------------------------------------------
# Time


def format_time(moment: datetime) -> str:
    """metav1.Time as served: RFC 3339, whole seconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """metav1.MicroTime as served (Event.eventTime)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    """Parse a metav1.Time / MicroTime string into an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


# ---------------------------------------------------------------------------------------------
# Errors in the API server's words


class AdmissionError(ValueError):
    """An admission plugin refused the object: answer 403 Forbidden,
    message `pods "<name>" is forbidden: <str(error)>`."""


class FieldError(NamedTuple):
    """One field.Error: `field` is the path, `message` the rest of the line ("Invalid value: ...")."""

    field: str
    message: str

    @property
    def reason(self) -> str:
        """StatusCause.reason for the 422 body."""
        kind = self.message.split(":", 1)[0]
        return {
            "Invalid value": "FieldValueInvalid",
            "Required value": "FieldValueRequired",
            "Unsupported value": "FieldValueNotSupported",
            "Forbidden": "FieldValueForbidden",
        }.get(kind, "FieldValueInvalid")

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def invalid_message(kind: str, name: str, errors: Sequence[FieldError]) -> str:
    """The 422 Status message: `Pod "x" is invalid: <err>` or `... is invalid: [<err>, <err>]`.

    kind is the qualified kind as the server prints it: "Pod", "Job.batch".
    """
    details = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(map(str, errors)) + "]"
    return f'{kind} "{name}" is invalid: {details}'


def _invalid(path: str, value: str, detail: str) -> FieldError:
    return FieldError(path, f'Invalid value: "{value}": {detail}')


# ---------------------------------------------------------------------------------------------
# Resource names and the rules for extended resources


def is_native_resource(name: str) -> bool:
    return "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")


def is_extended_resource(name: str) -> bool:
    """Domain-qualified, outside kubernetes.io, and not a quota `requests.` name: nvidia.com/gpu."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_overcommit_allowed(name: str) -> bool:
    """Only native, non-hugepage resources may have requests below limits."""
    return is_native_resource(name) and not name.startswith("hugepages-")


def _requests_from_limits(resources: Mapping[str, Any]) -> Obj:
    # SetDefaults_Pod: a resource with a limit and no request requests its limit.
    limits = dict(resources.get("limits") or {})
    requests = dict(resources.get("requests") or {})
    return {name: requests.get(name, limit) for name, limit in limits.items()} | requests


def extended_resource_errors(pod: Mapping[str, Any], *, path: str = "spec") -> list[FieldError]:
    """Container resource errors the API server reports for a pod (or, with path
    "spec.template.spec" and a job passed as {"spec": template spec}, a pod template).

    Mirrors ValidateResourceRequirements: resource names, non-negative values, integers for
    extended resources, requests == limits for resources that cannot be overcommitted and limits
    required for them. Requests are defaulted from limits first, exactly as the server does before
    validating, so `nvidia.com/gpu: 0.5` in limits yields two errors (limits and requests).
    Raises quantity.QuantityError for strings that are not quantities (the server's 400).
    """
    spec = pod.get("spec") or {}
    errors: list[FieldError] = []
    for group in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(group) or []):
            base = f"{path}.{group}[{i}].resources"
            resources = container.get("resources") or {}
            limits = resources.get("limits") or {}
            requests = _requests_from_limits(resources)
            for name in sorted(limits):
                errors += _quantity_errors(f"{base}.limits[{name}]", name, limits[name])
            for name in sorted(requests):
                errors += _quantity_errors(f"{base}.requests[{name}]", name, requests[name])
                errors += _request_limit_errors(base, name, requests[name], limits.get(name))
    return errors


def _quantity_errors(path: str, name: str, raw: quantity.QuantityLike) -> list[FieldError]:
    errors = []
    if "/" not in name and name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
        errors.append(_invalid(path, name, "must be a standard resource for containers"))
    text = quantity.canonical(raw)
    if quantity.value(raw) < 0:
        errors.append(_invalid(path, text, "must be greater than or equal to 0"))
    if is_extended_resource(name) and not quantity.is_integer_quantity(raw):
        errors.append(_invalid(path, text, "must be an integer"))
    return errors


def _request_limit_errors(
    base: str, name: str, request: quantity.QuantityLike, limit: quantity.QuantityLike | None
) -> list[FieldError]:
    if limit is None:
        if is_overcommit_allowed(name):
            return []
        return [FieldError(f"{base}.limits", "Required value: Limit must be set for non overcommitable resources")]
    req, lim = quantity.value(request), quantity.value(limit)
    shown, limit_text = quantity.canonical(request), quantity.canonical(limit)
    if req != lim and not is_overcommit_allowed(name):
        return [_invalid(f"{base}.requests", shown, f"must be equal to {name} limit of {limit_text}")]
    if req > lim:
        return [_invalid(f"{base}.requests", shown, f"must be less than or equal to {name} limit of {limit_text}")]
    return []


# ---------------------------------------------------------------------------------------------
# QoS


def qos_class(pod: Mapping[str, Any]) -> str:
    """Guaranteed, Burstable or BestEffort (pkg/apis/core/v1/helper/qos.ComputePodQOS).

    Only positive cpu and memory count; Guaranteed needs both limits on every container and
    pod-wide request sums equal to the limit sums.
    """
    spec = pod.get("spec") or {}
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    guaranteed = True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for totals, listed in (
            (requests, _requests_from_limits(resources)),
            (limits, resources.get("limits") or {}),
        ):
            for name, raw in listed.items():
                if name in ("cpu", "memory") and quantity.value(raw) > 0:
                    totals[name] = totals.get(name, 0) + quantity.value(raw)
        positive_limits = {n for n, q in (resources.get("limits") or {}).items() if quantity.value(q) > 0}
        guaranteed = guaranteed and {"cpu", "memory"} <= positive_limits
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


# ---------------------------------------------------------------------------------------------
# Defaulting


def image_pull_policy(image: str) -> str:
    """Always for ":latest" or an untagged image, IfNotPresent for a tag or a digest."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def default_container(container: Mapping[str, Any]) -> Obj:
    """SetDefaults_Container and friends: the fields `kubectl get -o yaml` shows on every container."""
    out: Obj = clone(dict(container))
    _set_container_defaults(out)
    return out


def _set_container_defaults(out: Obj) -> None:
    out.setdefault("imagePullPolicy", image_pull_policy(out.get("image", "")))
    out.setdefault("terminationMessagePath", "/dev/termination-log")
    out.setdefault("terminationMessagePolicy", "File")
    resources = out.setdefault("resources", {})
    if resources.get("limits"):
        resources["requests"] = _requests_from_limits(resources)
    for port in out.get("ports") or []:
        port.setdefault("protocol", "TCP")
    for env in out.get("env") or []:
        field_ref = (env.get("valueFrom") or {}).get("fieldRef")
        if field_ref is not None:
            field_ref.setdefault("apiVersion", "v1")
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = out.get(probe_name)
        if probe is not None:
            for key, default in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1)):
                probe.setdefault(key, default)
            probe.setdefault("failureThreshold", 3)
            if "httpGet" in probe:
                probe["httpGet"].setdefault("scheme", "HTTP")


def default_pod_spec(spec: Mapping[str, Any]) -> Obj:
    """SetDefaults_PodSpec: also applied to pod templates (jobs), unlike admission."""
    out: Obj = clone(dict(spec))
    _set_pod_spec_defaults(out)
    return out


def _set_pod_spec_defaults(out: Obj) -> None:
    """default_pod_spec on a copy the caller owns (one copy per pod, not one per level)."""
    out.setdefault("restartPolicy", "Always")
    out.setdefault("dnsPolicy", "ClusterFirst")
    out.setdefault("schedulerName", DEFAULT_SCHEDULER)
    out.setdefault("terminationGracePeriodSeconds", 30)
    out.setdefault("securityContext", {})
    out.setdefault("enableServiceLinks", True)
    for group in ("initContainers", "containers"):
        for container in out.get(group) or []:
            _set_container_defaults(container)
    for volume in out.get("volumes") or []:
        for source in ("secret", "configMap", "projected"):
            if source in volume:
                volume[source].setdefault("defaultMode", 420)


def default_pod(
    pod: Mapping[str, Any],
    *,
    uid: str,
    now: datetime,
    priority_classes: Mapping[str, int],
    preemption_policies: Mapping[str, str] | None = None,
    global_default_class: str | None = None,
    extended_resource_toleration: bool = False,
) -> Obj:
    """The pod as the API server stores it on create: defaults, then the admission plugins
    (ServiceAccount name, Priority, DefaultTolerationSeconds, optionally ExtendedResourceToleration).

    priority_classes maps PriorityClass name -> value (system classes are always known);
    preemption_policies maps a class to "Never" where the class says so. Raises AdmissionError for
    an unknown class or a hand-set priority that disagrees with it. Does not validate: call
    extended_resource_errors() on the result and answer 422 if it returns anything.
    """
    out: Obj = clone(dict(pod))
    out["apiVersion"], out["kind"] = "v1", "Pod"
    metadata = out.setdefault("metadata", {})
    metadata["uid"] = uid
    metadata["creationTimestamp"] = format_time(now)
    spec = out.get("spec") or {}
    _set_pod_spec_defaults(spec)
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    _admit_priority(spec, priority_classes, preemption_policies or {}, global_default_class)
    spec["tolerations"] = _default_tolerations(spec, extended_resource_toleration)
    out["spec"] = spec
    out["status"] = {"phase": "Pending", "qosClass": qos_class(out)}
    return out


def _admit_priority(
    spec: Obj, classes: Mapping[str, int], policies: Mapping[str, str], global_default: str | None
) -> None:
    known = dict(SYSTEM_PRIORITY_CLASSES) | dict(classes)
    name = spec.get("priorityClassName") or global_default
    if name is None:
        priority, policy = 0, "PreemptLowerPriority"
    elif name not in known:
        raise AdmissionError(f"no PriorityClass with name {name} was found")
    else:
        priority, policy = known[name], policies.get(name, "PreemptLowerPriority")
        spec["priorityClassName"] = name
    if spec.get("priority") is not None and spec["priority"] != priority:
        raise AdmissionError(
            f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
            f"priority admission controller computed {priority} from the given PriorityClass name"
        )
    if spec.get("preemptionPolicy") not in (None, policy):
        raise AdmissionError(
            f"the string value of PreemptionPolicy ({spec['preemptionPolicy']}) must not be provided in "
            f"pod spec; priority admission controller computed {policy} from the given PriorityClass name"
        )
    spec["priority"], spec["preemptionPolicy"] = priority, policy


def _default_tolerations(spec: Obj, extended_resource_toleration: bool) -> list[Obj]:
    tolerations = list(spec.get("tolerations") or [])
    for key in _NODE_PROBLEM_TAINTS:
        # DefaultTolerationSeconds leaves alone a pod that already tolerates the taint's NoExecute.
        if not any(t.get("key") in (key, None, "") and t.get("effect") in ("NoExecute", None, "") for t in tolerations):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    if extended_resource_toleration:
        # ExtendedResourceToleration: tolerate the taint named after each extended resource requested.
        for name in sorted(_requested_extended_resources(spec)):
            if not any(t.get("key") == name for t in tolerations):
                tolerations.append({"key": name, "operator": "Exists", "effect": "NoSchedule"})
    return tolerations


def _requested_extended_resources(spec: Mapping[str, Any]) -> Collection[str]:
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        for container in spec.get(group) or []:
            resources = container.get("resources") or {}
            names |= {n for n in _requests_from_limits(resources) if is_extended_resource(n)}
    return names
