"""Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for, with the columns and
cell formats of the real API server's printers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from scheduling.simcluster.clock import parse_time

JSON = dict[str, Any]
Row = list[Any]

NONE = "<none>"


def human_duration(seconds: float) -> str:
    """Kubernetes `duration.HumanDuration`, as the AGE column shows it."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def _since(value: str | None, now: datetime) -> str:
    if not value:
        return "<unknown>"
    return human_duration((now - parse_time(value)).total_seconds())


def _age(obj: JSON, now: datetime) -> str:
    return _since(obj["metadata"].get("creationTimestamp"), now)


# -- per-kind printers --------------------------------------------------------------------------------


def _pod_status(pod: JSON) -> tuple[str, int, int, int]:
    status = pod.get("status", {})
    reason = status.get("reason") or status.get("phase", "Pending")
    statuses = status.get("containerStatuses") or []
    ready = restarts = 0
    running = False
    for cs in reversed(statuses):
        restarts += cs.get("restartCount", 0)
        state = cs.get("state", {})
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or (
                f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            )
        elif "running" in state and cs.get("ready"):
            running = True
            ready += 1
    if reason == "Completed" and running:
        conditions = {c["type"]: c["status"] for c in status.get("conditions", [])}
        reason = "Running" if conditions.get("Ready") == "True" else "NotReady"
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    total = len(pod.get("spec", {}).get("containers", []))
    return reason, ready, total, restarts


def _pod_row(pod: JSON, now: datetime) -> Row:
    reason, ready, total, restarts = _pod_status(pod)
    status, spec = pod.get("status", {}), pod.get("spec", {})
    gates = spec.get("readinessGates") or []
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        reason,
        restarts,
        _age(pod, now),
        status.get("podIP") or NONE,
        spec.get("nodeName") or NONE,
        status.get("nominatedNodeName") or NONE,
        f"0/{len(gates)}" if gates else NONE,
    ]


def _node_row(node: JSON, now: datetime) -> Row:
    status, labels = node.get("status", {}), node["metadata"].get("labels", {})
    ready = next((c["status"] for c in status.get("conditions", []) if c["type"] == "Ready"), "Unknown")
    states = ["Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"]
    if node.get("spec", {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    info = status.get("nodeInfo", {})
    addresses = {a["type"]: a["address"] for a in status.get("addresses", [])}
    return [
        node["metadata"]["name"],
        ",".join(states),
        ",".join(roles) or NONE,
        _age(node, now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", NONE),
        addresses.get("ExternalIP", NONE),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _job_status(job: JSON) -> str:
    conditions = {c["type"]: c["status"] for c in job.get("status", {}).get("conditions", [])}
    for kind in ("Complete", "Failed"):
        if conditions.get(kind) == "True":
            return kind
    if job["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if conditions.get(kind) == "True":
            return kind
    return "Running"


def _job_row(job: JSON, now: datetime) -> Row:
    spec, status = job.get("spec", {}), job.get("status", {})
    succeeded = status.get("succeeded", 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif (spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    duration = ""
    if status.get("startTime"):
        end = parse_time(status["completionTime"]) if status.get("completionTime") else now
        duration = human_duration((end - parse_time(status["startTime"])).total_seconds())
    containers = spec.get("template", {}).get("spec", {}).get("containers", [])
    selector = spec.get("selector", {}).get("matchLabels", {})
    return [
        job["metadata"]["name"],
        _job_status(job),
        completions,
        duration,
        _age(job, now),
        ",".join(c["name"] for c in containers),
        ",".join(c.get("image", "") for c in containers),
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or NONE,
    ]


def _event_row(event: JSON, now: datetime) -> Row:
    involved = event.get("involvedObject", {})
    last = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
    first = event.get("firstTimestamp") or event.get("eventTime")
    source = event.get("source", {})
    source_text = ", ".join(v for v in (source.get("component", ""), source.get("host", "")) if v)
    return [
        _since(last, now),
        event.get("type", ""),
        event.get("reason", ""),
        f"{involved.get('kind', '').lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        source_text or event.get("reportingComponent", ""),
        event.get("message", "").strip(),
        _since(first, now),
        event.get("count", 1),
        event["metadata"]["name"],
    ]


def _namespace_row(ns: JSON, now: datetime) -> Row:
    return [ns["metadata"]["name"], ns.get("status", {}).get("phase", "Active"), _age(ns, now)]


def _service_row(svc: JSON, now: datetime) -> Row:
    spec = svc.get("spec", {})
    ports = ",".join(
        (f"{p['port']}:{p['nodePort']}" if p.get("nodePort") else str(p.get("port", "")))
        + f"/{p.get('protocol', 'TCP')}"
        for p in spec.get("ports", [])
    )
    ingress = svc.get("status", {}).get("loadBalancer", {}).get("ingress", [])
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress) or (
        "<pending>" if spec.get("type") == "LoadBalancer" else NONE
    )
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items())) or NONE
    return [
        svc["metadata"]["name"],
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or NONE,
        external,
        ports or NONE,
        _age(svc, now),
        selector,
    ]


_ACCESS_MODES = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def _pvc_row(pvc: JSON, now: datetime) -> Row:
    spec, status = pvc.get("spec", {}), pvc.get("status", {})
    modes = ",".join(_ACCESS_MODES.get(m, m) for m in status.get("accessModes", []))
    return [
        pvc["metadata"]["name"],
        status.get("phase", "Pending"),
        spec.get("volumeName", ""),
        status.get("capacity", {}).get("storage", ""),
        modes,
        spec.get("storageClassName") or NONE,
        spec.get("volumeAttributesClassName") or "<unset>",
        _age(pvc, now),
        spec.get("volumeMode", "Filesystem"),
    ]


def _priority_class_row(pc: JSON, now: datetime) -> Row:
    return [
        pc["metadata"]["name"],
        pc.get("value", 0),
        bool(pc.get("globalDefault", False)),
        _age(pc, now),
        pc.get("preemptionPolicy", "PreemptLowerPriority"),
    ]


def _generic_row(obj: JSON, now: datetime) -> Row:
    return [obj["metadata"]["name"], _age(obj, now)]


def _col(name: str, kind: str = "string", priority: int = 0, fmt: str = "", description: str = "") -> JSON:
    return {"name": name, "type": kind, "format": fmt, "description": description, "priority": priority}


_NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
_AGE = _col(
    "Age", description="CreationTimestamp is a timestamp representing the server time when this object was created."
)

PRINTERS: dict[str, tuple[list[JSON], Callable[[JSON, datetime], Row]]] = {
    "pods": (
        [
            _NAME,
            _col("Ready", description="The aggregate readiness state of this pod for accepting traffic."),
            _col("Status", description="The aggregate status of the containers in this pod."),
            _col(
                "Restarts",
                "integer",
                description="The number of times the containers in this pod have been restarted.",
            ),
            _AGE,
            _col("IP", priority=1, description="IP address allocated to the pod."),
            _col("Node", priority=1, description="Name of the node where the pod is running."),
            _col("Nominated Node", priority=1, description="Name of the node the pod is nominated to."),
            _col("Readiness Gates", priority=1, description="Pod readiness gates."),
        ],
        _pod_row,
    ),
    "nodes": (
        [
            _NAME,
            _col("Status", description="The status of the node"),
            _col("Roles", description="The roles of the node"),
            _AGE,
            _col("Version", description="Kubelet Version reported by the node."),
            _col("Internal-IP", priority=1, description="List of internal IPs that the node has."),
            _col("External-IP", priority=1, description="List of external IPs that the node has."),
            _col("OS-Image", priority=1, description="OS Image reported by the node."),
            _col("Kernel-Version", priority=1, description="Kernel Version reported by the node."),
            _col("Container-Runtime", priority=1, description="Container Runtime Version reported by the node."),
        ],
        _node_row,
    ),
    "jobs": (
        [
            _NAME,
            _col("Status", description="Status of the job."),
            _col(
                "Completions",
                description="The desired number of successfully finished pods the job should be run with.",
            ),
            _col("Duration", description="Time required to complete the job."),
            _AGE,
            _col("Containers", priority=1, description="Names of each container in the template."),
            _col("Images", priority=1, description="Images referenced by each container in the template."),
            _col("Selector", priority=1, description="A label query over pods that should match the pod count."),
        ],
        _job_row,
    ),
    "events": (
        [
            _col("Last Seen", description="The last time this event was observed."),
            _col(
                "Type",
                description="Type of this event (Normal, Warning), new types could be added in the future.",
            ),
            _col("Reason", description="The reason the transition into the object's current status."),
            _col("Object", description="The object that this event is about."),
            _col("Subobject", priority=1, description="The subobject this event is about."),
            _col("Source", priority=1, description="The component reporting this event."),
            _col("Message", description="A human-readable description of the status of this operation."),
            _col("First Seen", priority=1, description="The time at which the event was first recorded."),
            _col("Count", "integer", priority=1, description="The number of times this event has occurred."),
            _col("Name", priority=1, fmt="name", description="Name must be unique within a namespace."),
        ],
        _event_row,
    ),
    "namespaces": (
        [_NAME, _col("Status", description="The status of the namespace"), _AGE],
        _namespace_row,
    ),
    "services": (
        [
            _NAME,
            _col("Type", description="The type of the service."),
            _col("Cluster-IP", description="The cluster IP of the service."),
            _col("External-IP", description="The external IP of the service."),
            _col("Port(s)", description="The ports of the service."),
            _AGE,
            _col("Selector", priority=1, description="The selector of the service."),
        ],
        _service_row,
    ),
    "persistentvolumeclaims": (
        [
            _NAME,
            _col("Status", description="The status of the PVC."),
            _col("Volume", description="The volume bound to the PVC."),
            _col("Capacity", description="The capacity of the volume."),
            _col("Access Modes", description="The access modes of the volume."),
            _col("StorageClass", description="The storage class of the PVC."),
            _col("VolumeAttributesClass", description="The volume attributes class of the PVC."),
            _AGE,
            _col("VolumeMode", priority=1, description="The volume mode of the PVC."),
        ],
        _pvc_row,
    ),
    "priorityclasses": (
        [
            _NAME,
            _col("Value", "integer", description="The value of the priority class."),
            _col("Global-Default", "boolean", description="Whether this is the default priority class."),
            _AGE,
            _col("PreemptionPolicy", description="The preemption policy of the priority class."),
        ],
        _priority_class_row,
    ),
}


def table(
    resource: str,
    objects: list[JSON],
    now: datetime,
    *,
    list_meta: JSON,
    include_object: str,
    with_columns: bool = True,
    kind: str = "",
    api_version: str = "",
) -> JSON:
    columns, printer = PRINTERS.get(resource, ([_NAME, _AGE], _generic_row))
    rows = []
    for obj in objects:
        row: JSON = {"cells": printer(obj, now)}
        if include_object == "Object":
            row["object"] = {"kind": kind, "apiVersion": api_version, **obj}
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(row)
    body: JSON = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta}
    if with_columns:
        body["columnDefinitions"] = columns
    body["rows"] = rows
    return body
