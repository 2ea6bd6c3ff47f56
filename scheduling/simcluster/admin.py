"""The simulator's own control endpoints under `/_sim/`: faults, node health, GPU loss, evictions,
watch drops and the clock. Tests and demos drive the cluster's misfortunes through these only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduling.simcluster import pod_actions
from scheduling.simcluster.errors import ApiError, bad_request, method_not_allowed

if TYPE_CHECKING:
    from scheduling.simcluster.server import SimServer

JSON = dict[str, Any]


def handle(sim: SimServer, method: str, parts: list[str], body: Any) -> tuple[int, JSON]:
    body = body if isinstance(body, dict) else {}
    route = tuple(parts)
    try:
        if route == ():
            return 200, sim.describe()
        if route == ("faults",):
            if method == "GET":
                return 200, {"faults": sim.faults.pending()}
            if method == "DELETE":
                sim.faults.clear()
                return 200, {"faults": []}
            if method == "POST":
                return 201, {"fault": sim.faults.add(body).describe()}
        if route == ("clock",):
            if method == "POST":
                if "speed" in body:
                    sim.clock.set_speed(float(body["speed"]))
                if "advance_s" in body:
                    sim.clock.advance(float(body["advance_s"]))
                sim.controllers.wake()
            return 200, {"now": sim.clock.now().isoformat(), "speed": sim.clock.speed}
        if route == ("watches", "drop") and method == "POST":
            return 200, {"dropped": sim.cluster.store.drop_watches()}
        if route == ("watches", "compact") and method == "POST":
            return 200, {"compactedTo": str(sim.cluster.store.compact())}
        if route == ("settle",) and method == "POST":
            sim.controllers.settle(float(body.get("timeout_s", 5.0)))
            return 200, sim.describe()
        if len(route) == 3 and route[0] == "nodes" and method == "POST":
            with sim.controllers.exclusive():
                result = _node_action(sim, route[1], route[2], body)
            sim.controllers.wake()
            return 200, result
        if len(route) == 4 and route[0] == "pods" and method == "POST":
            return 200, _pod_action(sim, route[1], route[2], route[3], body)
    except (ValueError, TypeError) as exc:
        raise bad_request(str(exc)) from exc
    if route and route[0] in ("faults", "clock", "watches", "settle", "nodes", "pods"):
        raise method_not_allowed()
    raise ApiError(404, "NotFound", f"no simulator endpoint /_sim/{'/'.join(parts)}")


def _node_action(sim: SimServer, name: str, action: str, body: JSON) -> JSON:
    nodes = sim.controllers.nodes
    if action == "not-ready":
        return nodes.set_ready(name, False)
    if action == "ready":
        return nodes.set_ready(name, True)
    if action == "lose-gpu":
        return nodes.lose_gpu(name, int(body.get("index", 0)))
    if action == "restore-gpu":
        return nodes.restore_gpu(name, int(body.get("index", 0)))
    raise ApiError(404, "NotFound", f"unknown node action {action}")


def _pod_action(sim: SimServer, namespace: str, name: str, action: str, body: JSON) -> JSON:
    if action == "evict":
        return pod_actions.evict_by_kubelet(sim.cluster, namespace, name, str(body.get("message", "")))
    if action == "fail":
        reason = str(body.get("reason", "Error"))
        message = str(body.get("message", "injected failure"))
        return pod_actions.fail_by_kubelet(sim.cluster, namespace, name, reason=reason, message=message)
    raise ApiError(404, "NotFound", f"unknown pod action {action}")
