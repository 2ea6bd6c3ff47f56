"""Pod subresources that go through the kubelet or the eviction machinery: logs, the Eviction API,
and the simulator's own kubelet-side failures (node-pressure eviction, a crashing workload)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from scheduling.simcluster import kubelet, pod_logs
from scheduling.simcluster.api_deletion import TERMINAL_PHASES, DeleteOptions
from scheduling.simcluster.errors import bad_request, not_found, success_status
from scheduling.simcluster.resources import PODS

if TYPE_CHECKING:
    from scheduling.simcluster.api import Cluster

JSON = dict[str, Any]
FOLLOW_POLL_S = 0.5
FOLLOW_LIMIT_S = 3600.0


def _pod(cluster: Cluster, namespace: str, name: str) -> JSON:
    pod = cluster.get_object("pods", namespace, name)
    if pod is None:
        raise not_found("pods", name)
    return pod


def _container(pod: JSON, wanted: str) -> str:
    names = [c["name"] for c in pod["spec"].get("containers", [])]
    name = pod["metadata"]["name"]
    if not wanted:
        if len(names) != 1:
            raise bad_request(f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]")
        return str(names[0])
    if wanted not in names:
        raise bad_request(f"container {wanted} is not valid for pod {name}")
    return wanted


def pod_log(cluster: Cluster, namespace: str, name: str, query: dict[str, str]) -> str | Iterator[bytes]:
    pod = _pod(cluster, namespace, name)
    container = _container(pod, query.get("container", ""))
    if not pod["spec"].get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    statuses = pod.get("status", {}).get("containerStatuses", [])
    status: JSON = next((s for s in statuses if s["name"] == container), {})
    if not ({"running", "terminated"} & set(status.get("state", {})) or status.get("lastState", {}).get("terminated")):
        waiting = status.get("state", {}).get("waiting", {}).get("reason", "ContainerCreating")
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {waiting}')
    lines = pod_logs.pod_log_lines(pod, cluster.clock.now(), container)
    tail = int(query["tailLines"]) if query.get("tailLines") else None
    shown = lines[-tail:] if tail is not None else lines
    if query.get("follow", "").lower() != "true":
        return _limit("".join(line + "\n" for line in shown), query)
    return _follow(cluster, namespace, name, container, shown, lines)


def _limit(text: str, query: dict[str, str]) -> str:
    limit = int(query["limitBytes"]) if query.get("limitBytes") else None
    return text if limit is None else text.encode()[:limit].decode(errors="ignore")


def _follow(
    cluster: Cluster, namespace: str, name: str, container: str, shown: list[str], seen: list[str]
) -> Iterator[bytes]:
    """Stream new lines until the container ends or the pod goes away."""
    if shown:
        yield "".join(line + "\n" for line in shown).encode()
    last = seen[-1] if seen else None
    deadline = time.monotonic() + FOLLOW_LIMIT_S
    while time.monotonic() < deadline:
        time.sleep(FOLLOW_POLL_S)
        pod = cluster.get_object("pods", namespace, name)
        if pod is None:
            return
        lines = pod_logs.pod_log_lines(pod, cluster.clock.now(), container)
        start = len(lines) - lines[::-1].index(last) if last in lines else 0
        fresh = lines[start:]
        if fresh:
            last = fresh[-1]
            yield "".join(line + "\n" for line in fresh).encode()
        if pod.get("status", {}).get("phase") in TERMINAL_PHASES or pod["metadata"].get("deletionTimestamp"):
            return


def evict(cluster: Cluster, namespace: str, name: str, body: JSON) -> JSON:
    """policy/v1 Eviction: allowed at once (no PodDisruptionBudgets here), then a graceful delete."""
    pod = _pod(cluster, namespace, name)
    options = DeleteOptions.parse(body.get("deleteOptions"), {})
    if pod["spec"].get("nodeName") and pod.get("status", {}).get("phase") not in TERMINAL_PHASES:
        status = dict(pod.get("status") or {})
        status["conditions"] = [
            *(c for c in status.get("conditions", []) if c["type"] != "DisruptionTarget"),
            kubelet.eviction_api_condition(cluster.clock.now()),
        ]
        cluster.system_update("pods", {**pod, "status": status})
    cluster.delete(PODS, namespace, name, options)
    return success_status(201)


def fail_by_kubelet(cluster: Cluster, namespace: str, name: str, *, reason: str, message: str) -> JSON:
    """The workload crashes on its own: its containers stop and the pod fails."""
    pod = _pod(cluster, namespace, name)
    status = kubelet.fail_pod(pod, cluster.clock.now(), reason, message)
    return cluster.system_update("pods", {**pod, "status": status})


def evict_by_kubelet(cluster: Cluster, namespace: str, name: str, message: str) -> JSON:
    """Node-pressure eviction: the pod fails with reason Evicted and stays until someone deletes it."""
    pod = _pod(cluster, namespace, name)
    now = cluster.clock.now()
    status = kubelet.evict_pod(pod, now, message) if message else kubelet.evict_pod(pod, now)
    return cluster.system_update("pods", {**pod, "status": status})
