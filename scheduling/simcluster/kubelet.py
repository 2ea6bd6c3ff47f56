"""The kubelet as a pure state machine over pod status.

A bound pod goes Pending (containers creating) -> Running after a start delay. Pods with the
annotation `sim.gpuportal.io/duration-seconds` behave like jobs: their containers exit after that
long with `sim.gpuportal.io/exit-code` (default 0), and restartPolicy decides what follows
(Never: the pod ends; OnFailure: failed containers restart; Always: every exit restarts, with
CrashLoopBackOff delays of 0, 10 s, 20 s, ... 5 min). Pods without it run until stopped, like
notebooks. `spec.activeDeadlineSeconds` counts from status.startTime. On an MPS-shared GPU a workload that
allocates more than its client's memory limit fails as it starts (:mod:`~scheduling.simcluster.mps`).
Container logs are :mod:`~scheduling.simcluster.pod_logs`.

advance_pod() replays every transition that is due up to `now` at its own due time, so the result
does not depend on how often the caller ticks. Nothing here mutates its input.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduling.simcluster import mps
from scheduling.simcluster.defaults import format_time, parse_time, qos_class
from scheduling.simcluster.patch import clone
from scheduling.simcluster.scheduler import effective_taints, make_event, node_ready_status, tolerates

Obj = dict[str, Any]

DURATION_ANNOTATION = "sim.gpuportal.io/duration-seconds"
EXIT_CODE_ANNOTATION = "sim.gpuportal.io/exit-code"
DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
KILLED_EXIT_CODE = 137  # SIGKILL after the grace period
_INITIAL_BACKOFF, _MAX_BACKOFF = 10, 300
_BACKOFF_RESET = 2 * _MAX_BACKOFF  # a container that ran this long restarts without delay
_CONDITION_ORDER = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


@dataclass(frozen=True)
class KubeletEvent:
    """An event to record about the pod; container sets involvedObject.fieldPath."""

    type: str
    reason: str
    message: str
    container: str | None = None
    component: str = "kubelet"


@dataclass(frozen=True)
class PodUpdate:
    """The pod's complete new status (replace status with it) and the events to record
    (pod_events() turns them into Event objects)."""

    status: Obj
    events: tuple[KubeletEvent, ...] = ()


# ---------------------------------------------------------------------------------------------
# Identities derived from names, so reruns give the same IPs and IDs


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def node_internal_ip(node: Mapping[str, Any]) -> str:
    """The node's InternalIP address, or a stable 10.0.x.y derived from its name."""
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return _derived_host_ip(node["metadata"]["name"])


def _derived_host_ip(node_name: str) -> str:
    n = int(_digest("node", node_name), 16)
    return f"10.0.{n % 250 + 1}.{(n >> 8) % 250 + 2}"


def pod_ip(pod: Mapping[str, Any], node: Mapping[str, Any] | None) -> str:
    """A stable address inside the node's spec.podCIDR (or a per-node 10.244.x.0/24)."""
    cidr = ((node or {}).get("spec") or {}).get("podCIDR")
    node_name = (pod.get("spec") or {}).get("nodeName", "")
    if not cidr:
        cidr = f"10.244.{int(_digest('cidr', node_name), 16) % 250 + 1}.0/24"
    network = ipaddress.ip_network(cidr, strict=False)
    meta = pod.get("metadata") or {}
    offset = int(_digest("pod", meta.get("uid") or meta.get("name")), 16) % max(network.num_addresses - 3, 1)
    return str(network.network_address + 2 + offset)


def normalized_image(image: str) -> str:
    """The fully qualified reference containerd reports: "nginx" -> "docker.io/library/nginx:latest"."""
    name, _, digest = image.partition("@")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        domain, path = first, rest
    else:
        domain, path = "docker.io", name
        if "/" not in path:
            path = f"library/{path}"
    if digest:
        return f"{domain}/{path}@{digest}"
    return f"{domain}/{path}" if ":" in path.rsplit("/", 1)[-1] else f"{domain}/{path}:latest"


def image_id(image: str) -> str:
    repository = normalized_image(image).split("@")[0].rsplit(":", 1)[0]
    return f"{repository}@sha256:{_digest('image', normalized_image(image))}"


def _container_id(pod: Mapping[str, Any], name: str, restarts: int) -> str:
    return f"containerd://{_digest('container', (pod.get('metadata') or {}).get('uid'), name, restarts)}"


# ---------------------------------------------------------------------------------------------
# Conditions


def _condition(kind: str, status: str, now: datetime, reason: str | None = None, message: str | None = None) -> Obj:
    out: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": format_time(now)}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _set_conditions(status: Obj, new: Sequence[Obj]) -> None:
    """Merge conditions by type, keeping lastTransitionTime when the status did not change."""
    current = {c["type"]: c for c in status.get("conditions") or []}
    for condition in new:
        old = current.get(condition["type"])
        if old is not None and old.get("status") == condition["status"]:
            condition = condition | {"lastTransitionTime": old.get("lastTransitionTime")}
        current[condition["type"]] = condition

    def order(c: Obj) -> int:
        return _CONDITION_ORDER.index(c["type"]) if c["type"] in _CONDITION_ORDER else len(_CONDITION_ORDER)

    status["conditions"] = sorted(current.values(), key=order)


def _names(names: Sequence[str]) -> str:
    return "[" + " ".join(names) + "]"  # Go's %s of a []string


def _phase_conditions(pod: Mapping[str, Any], status: Obj, now: datetime) -> list[Obj]:
    """PodReadyToStartContainers, Initialized, Ready and ContainersReady for the current phase."""
    phase = status.get("phase")
    if phase in ("Succeeded", "Failed"):
        reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        return [
            _condition("PodReadyToStartContainers", "False", now),
            _condition("Initialized", "True", now, "PodCompleted" if phase == "Succeeded" else None),
            _condition("Ready", "False", now, reason),
            _condition("ContainersReady", "False", now, reason),
        ]
    statuses = status.get("containerStatuses") or []
    unready = [s["name"] for s in statuses if not s.get("ready")]
    started = phase == "Running"
    init_names = [c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []]
    conditions = [
        _condition("PodReadyToStartContainers", "True" if started else "False", now),
        _condition("Initialized", "True", now)
        if started or not init_names
        else _condition(
            "Initialized",
            "False",
            now,
            "ContainersNotInitialized",
            f"containers with incomplete status: {_names(init_names)}",
        ),
    ]
    if unready:
        message = f"containers with unready status: {_names(unready)}"
        conditions += [
            _condition("Ready", "False", now, "ContainersNotReady", message),
            _condition("ContainersReady", "False", now, "ContainersNotReady", message),
        ]
    else:
        conditions += [_condition("Ready", "True", now), _condition("ContainersReady", "True", now)]
    return conditions


# ---------------------------------------------------------------------------------------------
# Container states


def _waiting(container: Mapping[str, Any], reason: str) -> Obj:
    return {
        "name": container["name"],
        "state": {"waiting": {"reason": reason}},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": container.get("image", ""),
        "imageID": "",
        "started": False,
    }


def _running(pod: Mapping[str, Any], container: Mapping[str, Any], at: datetime, restarts: int, last: Obj) -> Obj:
    out: Obj = {
        "name": container["name"],
        "state": {"running": {"startedAt": format_time(at)}},
        "lastState": last,
        "ready": True,
        "restartCount": restarts,
        "image": normalized_image(container.get("image", "")),
        "imageID": image_id(container.get("image", "")),
        "containerID": _container_id(pod, container["name"], restarts),
        "started": True,
    }
    if container.get("resources"):
        out["resources"] = clone(container["resources"])
    return out


def _terminate(
    container_status: Obj, at: datetime, exit_code: int, reason: str | None = None, message: str | None = None
) -> None:
    """Move a running (or waiting) container to terminated at `at`."""
    running = container_status["state"].get("running")
    started = running["startedAt"] if running else format_time(at)
    terminated: Obj = {
        "exitCode": exit_code,
        "reason": reason or ("Completed" if exit_code == 0 else "Error"),
        "startedAt": started,
        "finishedAt": format_time(at),
        "containerID": container_status.get("containerID", ""),
    }
    if message:
        terminated["message"] = message  # what the kubelet reads from the termination log or the log's tail
    container_status["state"] = {"terminated": terminated}
    container_status["ready"] = False
    container_status["started"] = False


def _backoff_seconds(restarts: int, ran_for: float) -> int:
    """Seconds before the next start: none for the first restart or after a long run, then 10 s
    doubling to 5 min."""
    if restarts == 0 or ran_for >= _BACKOFF_RESET:
        return 0
    return min(_INITIAL_BACKOFF << (restarts - 1), _MAX_BACKOFF)


def _go_duration(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


# ---------------------------------------------------------------------------------------------
# Public entry points


def status_on_bind(pod: Mapping[str, Any], node_name: str, now: datetime, *, host_ip: str | None = None) -> Obj:
    """The status right after binding: PodScheduled True, Pending, containers being created.

    host_ip defaults to an address derived from the node name; pass node_internal_ip(node) to
    agree with the node object. The caller also sets spec.nodeName.
    """
    spec = pod.get("spec") or {}
    init = spec.get("initContainers") or []
    ip = host_ip or _derived_host_ip(node_name)
    status: Obj = {
        "phase": "Pending",
        "hostIP": ip,
        "hostIPs": [{"ip": ip}],
        "startTime": format_time(now),
        "qosClass": (pod.get("status") or {}).get("qosClass") or qos_class(pod),
        "containerStatuses": [
            _waiting(c, "PodInitializing" if init else "ContainerCreating") for c in spec.get("containers") or []
        ],
    }
    if init:
        status["initContainerStatuses"] = [_waiting(c, "PodInitializing") for c in init]
    if claims := (pod.get("status") or {}).get("resourceClaimStatuses"):
        status["resourceClaimStatuses"] = claims  # written by the resourceclaim controller before scheduling
    _set_conditions(status, [*_phase_conditions(pod, status, now), _condition("PodScheduled", "True", now)])
    return status


def advance_pod(
    pod: Mapping[str, Any],
    node: Mapping[str, Any] | None,
    now: datetime,
    *,
    start_delay: timedelta,
    workload_speed: float = 1.0,
    gpu_memory_limit_mib: int | None = None,
) -> PodUpdate | None:
    """Every transition due by `now`, or None when nothing changes.

    ``gpu_memory_limit_mib`` is the pod's MPS client memory limit, when it holds an MPS replica.

    Terminal and unbound pods never change. On a node that is not Ready nothing progresses (the
    API cannot hear from the kubelet) and the pod's Ready condition turns False, as the node
    lifecycle controller does; progress resumes, catching up, once the node is Ready again.
    """
    status = pod.get("status") or {}
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name or status.get("phase") in ("Succeeded", "Failed"):
        return None
    if not status.get("startTime"):
        host = node_internal_ip(node) if node else None
        return PodUpdate(status_on_bind(pod, node_name, now, host_ip=host))
    if node is None or node_ready_status(node)[0] != "True":
        return _mark_not_ready(status, now)
    working = clone(dict(status))
    events: list[KubeletEvent] = []
    oom = mps.out_of_memory(gpu_memory_limit_mib, (pod.get("metadata") or {}).get("annotations"))
    while (step := _next_step(pod, working, start_delay, workload_speed, oom)) is not None and step[0] <= now:
        at, action = step
        events += action(pod, working, at, node)
    if working.get("phase") == "Running":
        _set_conditions(working, _phase_conditions(pod, working, now))  # e.g. Ready again after a node outage
    if working == status:
        return None
    return PodUpdate(working, tuple(events))


def _mark_not_ready(status: Mapping[str, Any], now: datetime) -> PodUpdate | None:
    ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return None
    working = clone(dict(status))
    _set_conditions(working, [_condition("Ready", "False", now)])
    event = KubeletEvent("Warning", "NodeNotReady", "Node is not ready", component="node-controller")
    return PodUpdate(working, (event,))


# A transition: (pod, status being edited, the instant it happens, node) -> events it causes.
_Action = Callable[[Mapping[str, Any], Obj, datetime, Mapping[str, Any] | None], list[KubeletEvent]]


def _next_step(
    pod: Mapping[str, Any], status: Obj, start_delay: timedelta, workload_speed: float = 1.0, oom: str | None = None
) -> tuple[datetime, _Action] | None:
    """The earliest pending transition; the deadline wins ties."""
    phase = status.get("phase")
    if phase in ("Succeeded", "Failed"):
        return None
    steps: list[tuple[datetime, int, _Action]] = []
    start_time = parse_time(status["startTime"])
    deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if deadline is not None:
        steps.append((start_time + timedelta(seconds=int(deadline)), 0, _expire))
    if phase == "Pending":
        steps.append((start_time + start_delay, 1, _start))
    else:
        for container_status in status.get("containerStatuses") or []:
            due = _container_due(pod, container_status, workload_speed, oom)
            if due is not None:
                steps.append((due[0], 1, due[1]))
    if not steps:
        return None
    at, _, action = min(steps, key=lambda s: (s[0], s[1]))
    return at, action


def duration_seconds(pod: Mapping[str, Any], workload_speed: float = 1.0) -> float | None:
    """How long the pod's containers run on the clock, from its duration annotation (None: until stopped)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    duration = annotations.get(DURATION_ANNOTATION)
    return None if duration is None else float(duration) / workload_speed


def _container_due(
    pod: Mapping[str, Any], container_status: Mapping[str, Any], workload_speed: float = 1.0, oom: str | None = None
) -> tuple[datetime, _Action] | None:
    state = container_status["state"]
    if "running" in state and oom is not None:  # its first allocation fails
        return parse_time(state["running"]["startedAt"]), _out_of_memory(oom)
    duration = duration_seconds(pod, workload_speed)
    if "running" in state and duration is not None:
        started = parse_time(state["running"]["startedAt"])
        return started + timedelta(seconds=duration), _finish
    waiting = state.get("waiting") or {}
    if waiting.get("reason") == "CrashLoopBackOff":
        last = container_status["lastState"]["terminated"]
        finished = parse_time(last["finishedAt"])
        delay = _backoff_seconds(
            container_status["restartCount"], (finished - parse_time(last["startedAt"])).total_seconds()
        )
        return finished + timedelta(seconds=delay), _restart
    return None


def _pull_events(container: Mapping[str, Any]) -> list[KubeletEvent]:
    image, name = container.get("image", ""), container["name"]
    if container.get("imagePullPolicy") == "Always":
        pulled = [
            KubeletEvent("Normal", "Pulling", f'Pulling image "{image}"', name),
            KubeletEvent(
                "Normal",
                "Pulled",
                f'Successfully pulled image "{image}" in 1.2s (1.2s including waiting)',
                name,
            ),
        ]
    else:
        pulled = [KubeletEvent("Normal", "Pulled", f'Container image "{image}" already present on machine', name)]
    return [
        *pulled,
        KubeletEvent("Normal", "Created", f"Created container: {name}", name),
        KubeletEvent("Normal", "Started", f"Started container {name}", name),
    ]


def _start(pod: Mapping[str, Any], status: Obj, at: datetime, node: Mapping[str, Any] | None) -> list[KubeletEvent]:
    spec = pod.get("spec") or {}
    events: list[KubeletEvent] = []
    init_statuses = []
    for container in spec.get("initContainers") or []:
        events += _pull_events(container)
        init_status = _running(pod, container, at, 0, {})
        if container.get("restartPolicy") != "Always":  # sidecars keep running, the rest complete
            _terminate(init_status, at, 0)
        init_statuses.append(init_status)
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    status["containerStatuses"] = []
    for container in spec.get("containers") or []:
        events += _pull_events(container)
        status["containerStatuses"].append(_running(pod, container, at, 0, {}))
    ip = pod_ip(pod, node)
    status.update(phase="Running", podIP=ip, podIPs=[{"ip": ip}])
    _set_conditions(status, _phase_conditions(pod, status, at))
    return events


def _exit_code(pod: Mapping[str, Any]) -> int:
    return int(((pod.get("metadata") or {}).get("annotations") or {}).get(EXIT_CODE_ANNOTATION, 0))


def _finish(pod: Mapping[str, Any], status: Obj, at: datetime, node: Mapping[str, Any] | None) -> list[KubeletEvent]:
    """The simulated workload ends: restart the containers or end the pod, per restartPolicy."""
    return _exit(pod, status, at, _exit_code(pod))


def _out_of_memory(message: str) -> _Action:
    def action(pod: Mapping[str, Any], status: Obj, at: datetime, node: Mapping[str, Any] | None) -> list[KubeletEvent]:
        return _exit(pod, status, at, mps.OOM_EXIT_CODE, message)

    return action


def _exit(
    pod: Mapping[str, Any], status: Obj, at: datetime, code: int, message: str | None = None
) -> list[KubeletEvent]:
    """The running containers exit with ``code``; they restart or the pod ends, per restartPolicy."""
    policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
    restart = policy == "Always" or (policy == "OnFailure" and code != 0)
    events: list[KubeletEvent] = []
    for container_status in status["containerStatuses"]:
        if "running" not in container_status["state"]:
            continue
        _terminate(container_status, at, code, message=message)
        if restart:
            events += _schedule_restart(pod, container_status, at)
    if not restart:
        events += _end_pod(status, "Succeeded" if code == 0 else "Failed", at)
    _set_conditions(status, _phase_conditions(pod, status, at))
    return events


def _schedule_restart(pod: Mapping[str, Any], container_status: Obj, at: datetime) -> list[KubeletEvent]:
    terminated = container_status["state"]["terminated"]
    ran_for = (at - parse_time(terminated["startedAt"])).total_seconds()
    delay = _backoff_seconds(container_status["restartCount"], ran_for)
    container_status["lastState"] = {"terminated": terminated}
    if delay == 0:
        return _restart_container(pod, container_status, at)
    meta = pod.get("metadata") or {}
    name = container_status["name"]
    pod_ref = f"{meta.get('name')}_{meta.get('namespace', 'default')}({meta.get('uid')})"
    container_status["state"] = {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off {_go_duration(delay)} restarting failed container={name} pod={pod_ref}",
        }
    }
    return [KubeletEvent("Warning", "BackOff", f"Back-off restarting failed container {name} in pod {pod_ref}", name)]


def _restart(pod: Mapping[str, Any], status: Obj, at: datetime, node: Mapping[str, Any] | None) -> list[KubeletEvent]:
    events: list[KubeletEvent] = []
    for container_status in status["containerStatuses"]:
        if (container_status["state"].get("waiting") or {}).get("reason") == "CrashLoopBackOff":
            events += _restart_container(pod, container_status, at)
    _set_conditions(status, _phase_conditions(pod, status, at))
    return events


def _restart_container(pod: Mapping[str, Any], container_status: Obj, at: datetime) -> list[KubeletEvent]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == container_status["name"])
    container_status.update(
        _running(pod, container, at, container_status["restartCount"] + 1, container_status["lastState"])
    )
    return _pull_events(container)


def _end_pod(status: Obj, phase: str, at: datetime) -> list[KubeletEvent]:
    """Terminal phase: whatever still runs is killed (sidecars included)."""
    events = []
    for group in ("initContainerStatuses", "containerStatuses"):
        for container_status in status.get(group) or []:
            if "running" in container_status["state"]:
                _terminate(container_status, at, KILLED_EXIT_CODE if phase == "Failed" else 0)
                events.append(
                    KubeletEvent(
                        "Normal",
                        "Killing",
                        f"Stopping container {container_status['name']}",
                        container_status["name"],
                    )
                )
    status["phase"] = phase
    return events


def _expire(pod: Mapping[str, Any], status: Obj, at: datetime, node: Mapping[str, Any] | None) -> list[KubeletEvent]:
    events = [KubeletEvent("Normal", DEADLINE_REASON, DEADLINE_MESSAGE)]
    events += _end_pod(status, "Failed", at)
    status.update(reason=DEADLINE_REASON, message=DEADLINE_MESSAGE)
    _set_conditions(status, _phase_conditions(pod, status, at))
    return events


def fail_pod(pod: Mapping[str, Any], now: datetime, reason: str, message: str) -> Obj:
    """An injected failure (e.g. reason "UnexpectedAdmissionError"): the new status, phase Failed."""
    status: Obj = clone(dict(pod.get("status") or {}))
    _end_pod(status, "Failed", now)
    status.update(reason=reason, message=message)
    _set_conditions(status, _phase_conditions(pod, status, now))
    return status


def evict_pod(pod: Mapping[str, Any], now: datetime, message: str = "The node was low on resource: memory. ") -> Obj:
    """Node-pressure eviction by the kubelet: phase Failed, reason Evicted, DisruptionTarget condition."""
    status = fail_pod(pod, now, "Evicted", message)
    _set_conditions(status, [_condition("DisruptionTarget", "True", now, "TerminationByKubelet", message)])
    return status


def eviction_api_condition(now: datetime) -> Obj:
    """DisruptionTarget added when a pod is evicted through the pods/eviction subresource."""
    return _condition("DisruptionTarget", "True", now, "EvictionByEvictionAPI", "Eviction API: evicting")


def taint_eviction_condition(now: datetime) -> Obj:
    """DisruptionTarget added by the taint eviction controller before it deletes a pod."""
    return _condition(
        "DisruptionTarget",
        "True",
        now,
        "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint",
    )


def noexecute_eviction_due(pod: Mapping[str, Any], node: Mapping[str, Any], now: datetime) -> bool:
    """Whether the taint eviction controller deletes this pod now: a NoExecute taint it does not
    tolerate, or one whose shortest tolerationSeconds has run out since the taint's timeAdded."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in effective_taints(node):
        if taint.get("effect") != "NoExecute":
            continue
        matching = [t for t in tolerations if tolerates(t, taint)]
        if not matching:
            return True
        limits = [t["tolerationSeconds"] for t in matching if t.get("tolerationSeconds") is not None]
        if limits:
            added = parse_time(taint["timeAdded"]) if taint.get("timeAdded") else now
            if now >= added + timedelta(seconds=max(min(limits), 0)):
                return True
    return False


def pod_events(pod: Mapping[str, Any], update: PodUpdate, now: datetime) -> list[Obj]:
    """Event objects for an update's events (kubelet events carry the node as source.host)."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    return [
        make_event(
            pod,
            e.reason,
            e.message,
            now,
            component=e.component,
            event_type=e.type,
            host=node_name if e.component == "kubelet" else None,
            field_path=f"spec.containers{{{e.container}}}" if e.container else None,
        )
        for e in update.events
    ]
