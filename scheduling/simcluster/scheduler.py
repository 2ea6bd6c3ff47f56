"""A kube-scheduler stand-in: filter, score, preempt, and say why in kube-scheduler 1.34's words.

Filters run in the default profile's order and a node reports only its first failing plugin:
NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector + required node affinity),
NodeResourcesFit (pods, cpu, memory, ephemeral-storage and every extended resource, against
`status.allocatable` minus the requests of the node's non-terminal pods).

Scoring deviates from the default profile on purpose: for pods that ask for extended resources
(GPUs, MIG slices) the resource score is *most*-allocated on those resources, so partly used GPU
nodes fill up before empty ones and whole nodes stay free for large requests. Other pods get the
default least-allocated cpu/memory score. Preferred node affinity (weight 2) and PreferNoSchedule
taints (weight 3) are added as in the default profile; ties go to the lexically first node name so
every decision is deterministic.

Preemption follows DefaultPreemption: only nodes that failed on resources are candidates; all
lower-priority pods are removed, then the most important ones are reprieved while the pod still
fits; the node with the lowest highest-victim priority, then lowest priority sum, then fewest
victims, then latest-started victims wins.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from scheduling.simcluster import quantity
from scheduling.simcluster.defaults import DEFAULT_SCHEDULER, format_micro_time, format_time, parse_time
from scheduling.simcluster.selectors import match_node_selector_term, match_node_selector_terms

Obj = dict[str, Any]
PriorityOf = Callable[[Mapping[str, Any]], int]
ClaimsFilter = Callable[[str], str | None]  # node name -> why the pod's ResourceClaims cannot be allocated there
Resources = dict[str, int]  # cpu in millicores, everything else in whole units (bytes, devices)

# Filter reasons, exactly as kube-scheduler 1.34 words them. The taint reason no longer names the
# taint (kubernetes#134740, backported to 1.34 patch releases): taints may be sensitive.
UNSCHEDULABLE_NODE = "node(s) were unschedulable"
UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
# PostFilter messages: DynamicResources (enabled by default since DRA went GA in 1.34) runs first.
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NO_CLAIMS = "no new claims to deallocate"
NEVER_PREEMPT = "not eligible due to preemptionPolicy=Never."
NO_NODES = "no nodes available to schedule pods"

TERMINAL_PHASES = ("Succeeded", "Failed")
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_CORE = ("cpu", "memory", "ephemeral-storage")
_DEFAULT_MAX_PODS = 110  # kubelet's --max-pods default, for nodes that do not publish "pods"
_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Decision:
    """The outcome of one scheduling attempt.

    node_name set: bind there. node_name None: set the PodScheduled=False condition
    (unschedulable_condition(message, now)) and a FailedScheduling event; if nominated_node is set
    too, evict each victim (namespace, name) with preemption_condition() and a Preempted event,
    delete it, and write status.nominatedNodeName so the next attempt binds there.
    """

    node_name: str | None
    message: str = ""
    nominated_node: str | None = None
    victims: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------------------------------------
# Requests


def _add(total: dict[str, Fraction], amounts: Mapping[str, Fraction]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, Fraction(0)) + amount


def _parsed(listed: Mapping[str, Any]) -> dict[str, Fraction]:
    return {name: quantity.value(raw) for name, raw in listed.items()}


def _container_requests(container: Mapping[str, Any]) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    # Requests default to limits; a pod that skipped defaulting is counted the same way.
    return _parsed(dict(resources.get("limits") or {}) | dict(resources.get("requests") or {}))


def pod_requests(pod: Mapping[str, Any]) -> Resources:
    """resourcehelper.PodRequests: max(sum of containers + sidecars, each init container + the
    sidecars started before it) + overhead; cpu in millicores, the rest in whole units."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        _add(total, _container_requests(container))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            during = dict(sidecars)
        else:
            during = dict(requests)
            _add(during, sidecars)
        for name, amount in during.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), amount)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, Fraction(0)), amount)
    _add(total, _parsed(spec.get("overhead") or {}))
    return {name: _units(name, amount) for name, amount in total.items()}


def _units(name: str, amount: Fraction) -> int:
    return math.ceil(amount * 1000) if name == "cpu" else math.ceil(amount)


def node_allocatable(node: Mapping[str, Any]) -> Resources:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    out = {name: _units(name, quantity.value(raw)) for name, raw in allocatable.items()}
    out.setdefault("pods", _DEFAULT_MAX_PODS)
    return out


def pod_priority(pod: Mapping[str, Any]) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


# ---------------------------------------------------------------------------------------------
# Taints, tolerations, affinity


def node_ready_status(node: Mapping[str, Any]) -> tuple[str, str | None]:
    """(status of the Ready condition, its lastTransitionTime); a node without one is not ready."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status", "Unknown"), condition.get("lastTransitionTime")
    return "False", None


def effective_taints(node: Mapping[str, Any]) -> list[Obj]:
    """spec.taints plus the not-ready/unreachable taints the node lifecycle controller would add
    for a node whose Ready condition is False/Unknown (the scheduler filters through taints, not
    conditions)."""
    taints = [dict(t) for t in (node.get("spec") or {}).get("taints") or []]
    ready, since = node_ready_status(node)
    if ready == "True":
        return taints
    key = NOT_READY_TAINT if ready == "False" else UNREACHABLE_TAINT
    for effect in ("NoSchedule", "NoExecute"):
        if not any(t.get("key") == key and t.get("effect") == effect for t in taints):
            taint: Obj = {"key": key, "effect": effect}
            if effect == "NoExecute" and since:
                taint["timeAdded"] = since
            taints.append(taint)
    return taints


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Toleration.ToleratesTaint: an empty effect or key matches any; Exists ignores the value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated_taint(
    tolerations: Sequence[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]], effects: Sequence[str]
) -> Mapping[str, Any] | None:
    """The first taint with one of effects that no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}


def matches_node_affinity(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """spec.nodeSelector AND required node affinity (nodeSelectorTerms ORed)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    return required is None or match_node_selector_terms(required.get("nodeSelectorTerms") or [], node)


# ---------------------------------------------------------------------------------------------
# Filtering


@dataclass
class _NodeState:
    node: Obj
    name: str
    allocatable: Resources
    pods: list[Obj] = field(default_factory=list)  # bound, non-terminal: the possible victims
    nominated: list[Obj] = field(default_factory=list)  # pending pods already promised this node


@dataclass(frozen=True)
class _Status:
    reasons: tuple[str, ...]
    resolvable: bool  # Unschedulable (preemption may help) vs UnschedulableAndUnresolvable


def _used(pods: Iterable[Mapping[str, Any]]) -> Resources:
    used: Resources = {}
    for pod in pods:
        for name, amount in pod_requests(pod).items():
            used[name] = used.get(name, 0) + amount
    return used


def _fit(request: Resources, allocatable: Resources, pods: Sequence[Mapping[str, Any]]) -> _Status | None:
    """NodeResourcesFit.fitsRequest: every insufficient resource is a reason; a request larger than
    the whole node is unresolvable."""
    used = _used(pods)
    reasons: list[str] = []
    resolvable = True
    if len(pods) + 1 > allocatable["pods"]:
        reasons.append(TOO_MANY_PODS)
    scalars = sorted(name for name in request if name not in (*_CORE, "pods"))
    for name in (*_CORE, *scalars):
        want = request.get(name, 0)
        if want <= 0:
            continue
        have = allocatable.get(name, 0)
        if want > have - used.get(name, 0):
            reasons.append(f"Insufficient {name}")
            resolvable = resolvable and want <= have
    return _Status(tuple(reasons), resolvable) if reasons else None


def _filter(
    pod: Mapping[str, Any], request: Resources, state: _NodeState, claims: ClaimsFilter | None = None
) -> _Status | None:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    if (state.node.get("spec") or {}).get("unschedulable") and not any(
        tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in tolerations
    ):
        return _Status((UNSCHEDULABLE_NODE,), False)
    if untolerated_taint(tolerations, effective_taints(state.node), ("NoSchedule", "NoExecute")):
        return _Status((UNTOLERATED_TAINT,), False)
    if not matches_node_affinity(pod, state.node):
        return _Status((AFFINITY_MISMATCH,), False)
    fit = _fit(request, state.allocatable, [*state.pods, *state.nominated])
    if fit is not None or claims is None:
        return fit
    # DynamicResources runs after the resource filters; preemption is not tried for its failures here.
    reason = claims(state.name)
    return None if reason is None else _Status((reason,), False)


def _histogram(reasons: Iterable[str]) -> str:
    # Go's sort.Strings over "<count> <reason>": counts sort as text ("10 ..." before "2 ...").
    return ", ".join(sorted(f"{count} {reason}" for reason, count in Counter(reasons).items()))


def _fit_error(total: int, statuses: Iterable[_Status]) -> str:
    return f"0/{total} nodes are available: {_histogram(r for s in statuses for r in s.reasons)}."


# ---------------------------------------------------------------------------------------------
# Scoring


def _resource_score(request: Resources, state: _NodeState) -> float:
    used = _used([*state.pods, *state.nominated])
    devices = [n for n, amount in request.items() if n not in (*_CORE, "pods") and amount > 0]
    if devices:
        # Most-allocated: pack devices onto nodes already in use, keeping whole nodes free.
        return sum((used.get(n, 0) + request[n]) * 100 / state.allocatable[n] for n in devices) / len(devices)
    scores = []
    for name in ("cpu", "memory"):
        capacity = state.allocatable.get(name, 0)
        free = capacity - used.get(name, 0) - request.get(name, 0)
        scores.append(free * 100 / capacity if capacity else 0.0)
    return sum(scores) / len(scores)


def _preferred_affinity(pod: Mapping[str, Any], node: Mapping[str, Any]) -> int:
    preferred = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return sum(int(term.get("weight", 0)) for term in preferred if match_node_selector_term(term["preference"], node))


def _intolerable_prefer_no_schedule(pod: Mapping[str, Any], node: Mapping[str, Any]) -> int:
    tolerations = [
        t for t in (pod.get("spec") or {}).get("tolerations") or [] if t.get("effect") in (None, "", "PreferNoSchedule")
    ]
    taints = [t for t in effective_taints(node) if t.get("effect") == "PreferNoSchedule"]
    return sum(1 for t in taints if not any(tolerates(tol, t) for tol in tolerations))


def _best_node(pod: Mapping[str, Any], request: Resources, feasible: Sequence[_NodeState]) -> str:
    affinity = {s.name: _preferred_affinity(pod, s.node) for s in feasible}
    taints = {s.name: _intolerable_prefer_no_schedule(pod, s.node) for s in feasible}
    max_affinity, max_taints = max(affinity.values()), max(taints.values())

    def score(state: _NodeState) -> float:
        # Default-profile weights: TaintToleration 3, NodeAffinity 2, resources 1.
        affinity_score = affinity[state.name] * 100 / max_affinity if max_affinity else 0
        taint_score = 100 - taints[state.name] * 100 / max_taints if max_taints else 100
        return _resource_score(request, state) + 2 * affinity_score + 3 * taint_score

    return min(feasible, key=lambda s: (-score(s), s.name)).name


# ---------------------------------------------------------------------------------------------
# Preemption


def _start_time(pod: Mapping[str, Any]) -> datetime:
    stamp = (pod.get("status") or {}).get("startTime") or (pod.get("metadata") or {}).get("creationTimestamp")
    return parse_time(stamp) if stamp else _FAR_FUTURE


@dataclass(frozen=True)
class _Candidate:
    state: _NodeState
    victims: tuple[Obj, ...]


def _select_victims(
    request: Resources, state: _NodeState, priority: int, priority_of: PriorityOf
) -> _Candidate | _Status:
    lower = [p for p in state.pods if priority_of(p) < priority]
    if not lower:
        return _Status((NO_VICTIMS,), False)
    kept = [p for p in state.pods if priority_of(p) >= priority] + state.nominated
    failure = _fit(request, state.allocatable, kept)
    if failure is not None:
        return failure
    victims = []
    # Reprieve the most important pods first (higher priority, then earlier start).
    for pod in sorted(lower, key=lambda p: (-priority_of(p), _start_time(p))):
        if _fit(request, state.allocatable, [*kept, pod]) is None:
            kept.append(pod)
        else:
            victims.append(pod)
    return _Candidate(state, tuple(victims))


def _candidate_rank(candidate: _Candidate, priority_of: PriorityOf) -> tuple[int, int, int, float]:
    """pickOneNodeForPreemption's criteria as an ascending sort key (PDBs aside)."""
    victims = candidate.victims
    if not victims:
        return (-(2**63), 0, 0, 0.0)
    highest = max(priority_of(v) for v in victims)
    # Shifted so that more victims always weigh more, whatever their (possibly negative) priority.
    priority_sum = sum(priority_of(v) + 2**31 for v in victims)
    earliest = min(_start_time(v) for v in victims if priority_of(v) == highest)
    return (highest, priority_sum, len(victims), -earliest.timestamp())


def _preempt(
    pod: Mapping[str, Any],
    request: Resources,
    states: Sequence[_NodeState],
    statuses: Mapping[str, _Status],
    priority_of: PriorityOf,
) -> _Candidate | str:
    """The chosen candidate, or DefaultPreemption's message explaining why preemption cannot help."""
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return NEVER_PREEMPT
    priority = priority_of(pod)
    candidates: list[_Candidate] = []
    outcomes: list[_Status] = []
    for state in states:
        status = statuses[state.name]
        if not status.resolvable:
            outcomes.append(_Status((NOT_HELPFUL,), False))
            continue
        result = _select_victims(request, state, priority, priority_of)
        if isinstance(result, _Candidate):
            candidates.append(result)
        else:
            outcomes.append(result)
    if not candidates:
        return _fit_error(len(states), outcomes)
    return min(candidates, key=lambda c: _candidate_rank(c, priority_of))


def _same_pod(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    ma, mb = a.get("metadata") or {}, b.get("metadata") or {}
    if ma.get("uid") and mb.get("uid"):
        return bool(ma["uid"] == mb["uid"])
    return (ma.get("namespace"), ma.get("name")) == (mb.get("namespace"), mb.get("name"))


def schedule_pod(
    pod: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    bound_pods: Iterable[Mapping[str, Any]],
    priority_of: PriorityOf | None = None,
    *,
    nominated_pods: Iterable[Mapping[str, Any]] = (),
    claims: ClaimsFilter | None = None,
) -> Decision:
    """One scheduling cycle for a pending pod.

    bound_pods: every pod with spec.nodeName set (terminal ones are ignored here).
    nominated_pods: pending pods carrying status.nominatedNodeName; those at least as important as
    this pod hold their node's room, as kube-scheduler's nominator does.
    priority_of defaults to spec.priority (set by default_pod's Priority admission).
    claims: the DynamicResources filter for a pod with spec.resourceClaims.
    """
    priority_of = priority_of or pod_priority
    if not nodes:
        return Decision(None, NO_NODES)
    states = {n["metadata"]["name"]: _NodeState(dict(n), n["metadata"]["name"], node_allocatable(n)) for n in nodes}
    for bound in bound_pods:
        node_name = (bound.get("spec") or {}).get("nodeName")
        if node_name in states and not is_terminal(bound) and not _same_pod(bound, pod):
            states[node_name].pods.append(dict(bound))
    priority = priority_of(pod)
    for other in nominated_pods:
        node_name = (other.get("status") or {}).get("nominatedNodeName")
        if node_name in states and not _same_pod(other, pod) and priority_of(other) >= priority:
            states[node_name].nominated.append(dict(other))

    request = pod_requests(pod)
    statuses = {name: _filter(pod, request, state, claims) for name, state in states.items()}
    feasible = [states[name] for name, status in statuses.items() if status is None]
    if feasible:
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        if nominated in {s.name for s in feasible}:
            return Decision(nominated)
        return Decision(_best_node(pod, request, feasible))

    failures = {name: status for name, status in statuses.items() if status is not None}
    message = _fit_error(len(states), failures.values())
    outcome = _preempt(pod, request, list(states.values()), failures, priority_of)
    if isinstance(outcome, str):
        # PostFilter messages joined: DynamicResources', then DefaultPreemption's.
        return Decision(None, f"{message} {NO_CLAIMS}, preemption: {outcome}")
    # Least important first: lowest priority, then most recently started.
    ordered = sorted(outcome.victims, key=lambda v: (priority_of(v), -_start_time(v).timestamp()))
    victims = tuple((v["metadata"].get("namespace", "default"), v["metadata"]["name"]) for v in ordered)
    return Decision(None, message, nominated_node=outcome.state.name, victims=victims)


# ---------------------------------------------------------------------------------------------
# Conditions and events


def unschedulable_condition(message: str, now: datetime) -> Obj:
    """The PodScheduled=False condition the scheduler writes to a pod it could not place."""
    return {
        "type": "PodScheduled",
        "status": "False",
        "lastProbeTime": None,
        "lastTransitionTime": format_time(now),
        "reason": "Unschedulable",
        "message": message,
    }


def preemption_condition(preemptor: Mapping[str, Any], now: datetime) -> Obj:
    """The DisruptionTarget condition added to each victim before it is deleted."""
    scheduler = (preemptor.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": format_time(now),
        "reason": "PreemptionByScheduler",
        "message": f"{scheduler}: preempting to accommodate a higher priority pod",
    }


def scheduled_message(pod: Mapping[str, Any], node_name: str) -> str:
    meta = pod.get("metadata") or {}
    return f"Successfully assigned {meta.get('namespace', 'default')}/{meta.get('name')} to {node_name}"


def preempted_message(preemptor: Mapping[str, Any], node_name: str) -> str:
    return f"Preempted by pod {(preemptor.get('metadata') or {}).get('uid')} on node {node_name}"


def make_event(
    obj: Mapping[str, Any],
    reason: str,
    message: str,
    now: datetime,
    *,
    component: str,
    event_type: str = "Normal",
    action: str | None = None,
    host: str | None = None,
    field_path: str | None = None,
) -> Obj:
    """A core/v1 Event about obj, named `<name>.<hex nanoseconds>` like client-go's recorder.

    The name mixes a checksum of reason/message/fieldPath into the sub-millisecond digits so that
    several events emitted at the same simulated instant do not collide.
    """
    meta = obj.get("metadata") or {}
    stamp = format_time(now)
    nanos = int(now.timestamp()) * 10**9 + now.microsecond * 1000
    nanos += zlib.crc32(f"{reason}|{message}|{field_path}".encode()) % 1_000_000
    involved: Obj = {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Pod")}
    involved |= {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion") if meta.get(key)}
    if field_path:
        involved["fieldPath"] = field_path
    source: Obj = {"component": component} | ({"host": host} if host else {})
    event: Obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name')}.{nanos:x}",
            "namespace": meta.get("namespace", "default"),
            "creationTimestamp": stamp,
        },
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        # Only recorders that name an action (the events.k8s.io style, like the scheduler's) set
        # eventTime; the API server then requires action, as it does reportingInstance.
        "eventTime": format_micro_time(now) if action else None,
        "count": 1,
        "type": event_type,
        "reportingComponent": component,
        "reportingInstance": host or component,
    }
    if action:
        event["action"] = action
    return event


_SCHEDULER_ACTIONS = {"FailedScheduling": "Scheduling", "Scheduled": "Binding", "Preempted": "Preempting"}


def scheduler_event(pod: Mapping[str, Any], reason: str, message: str, now: datetime) -> Obj:
    """FailedScheduling (Warning), Scheduled or Preempted (Normal) from default-scheduler.

    Messages: the Decision's message, scheduled_message(pod, node), preempted_message(preemptor, node)
    (a Preempted event is about the victim).
    """
    return make_event(
        pod,
        reason,
        message,
        now,
        component=DEFAULT_SCHEDULER,
        event_type="Warning" if reason == "FailedScheduling" else "Normal",
        action=_SCHEDULER_ACTIONS.get(reason),
    )
