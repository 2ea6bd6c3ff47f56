"""The control plane and the kubelets behind the API server, run by one background thread.

The store's change feed marks what needs attention (new pending pods, pods whose state moved, jobs,
nodes, terminating namespaces); timers on the simulated clock wake the thread when a pod is due to
start, finish, expire or be removed after its grace period. Each pass then runs, in order: the node
controller and MIG manager, the scheduler (with preemption), the kubelets, the job controller, the
taint eviction controller and the namespace and garbage-collector finishers. The decisions are the
pure modules' (`scheduler`, `kubelet`, `jobs`, `mig_manager`); this module applies them to the store.
"""

from __future__ import annotations

import heapq
import logging
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduling.simcluster import defaults, device_plugin, dra_claims, jobs, kubelet, mps, scheduler, telemetry
from scheduling.simcluster.api import Cluster
from scheduling.simcluster.api_deletion import TERMINAL_PHASES
from scheduling.simcluster.capacity import Capacity
from scheduling.simcluster.clock import parse_time
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.errors import ApiError
from scheduling.simcluster.node_manager import NodeManager
from scheduling.simcluster.nodes import ClusterSpec
from scheduling.simcluster.resources import JOBS, PODS
from scheduling.simcluster.store import DELETED, Change

JSON = dict[str, Any]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timings:
    """Simulated seconds for the things that take time, and how often the thread looks around."""

    start_delay_s: float = 2.0  # bind -> Running (image pull, container start)
    termination_s: float = 1.0  # a deleted pod stops within this (or its grace period, if shorter)
    mig_reconfigure_s: float = 5.0  # a MIG or device-plugin config change stays pending this long
    retry_unschedulable_s: float = 300.0  # podMaxInUnschedulablePodsDuration, when nothing changes
    sweep_s: float = 1.0  # jobs and NoExecute evictions are re-examined at least this often
    max_idle_real_s: float = 0.2  # the thread never sleeps longer than this in real time


class Controllers:
    def __init__(self, cluster: Cluster, spec: ClusterSpec, *, seed: int, timings: Timings) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.spec = spec
        self.seed = seed
        self.timings = timings
        self.rng = random.Random(seed + 1)  # noqa: S311 - reproducible pod names, not secrets
        self.capacity = Capacity()
        self.nodes = NodeManager(cluster, spec, self.capacity, mig_delay_s=timings.mig_reconfigure_s)
        self.claims = dra_claims.ClaimController(cluster, spec)
        self._start_delay = timedelta(seconds=timings.start_delay_s)
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._pass_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # Noted by the change listener, under the store lock.
        self._dirty_pods: dict[str, JSON] = {}  # uid -> latest version seen
        self._dirty_nodes: set[str] = set()
        self._dirty_jobs: set[tuple[str, str]] = set()
        self._terminating: set[str] = set()
        self._foreground: set[tuple[str, str, str]] = set()
        # Scheduler and kubelet state.
        self._unscheduled: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name)
        self._failed_attempt: dict[str, tuple[int, datetime]] = {}  # uid -> (epoch, when)
        self._epoch = 0  # grows whenever room may have appeared somewhere
        self._timers: list[tuple[datetime, int, str, str, str]] = []  # (due, seq, uid, namespace, name)
        self._armed: dict[str, datetime] = {}
        self._seq = 0
        self._last_sweep: datetime | None = None
        self._claims_changed = False  # a claim or template changed: pods waiting on one may fit now
        self.store.add_listener(self._on_change)

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        self.nodes.register_all()
        self.claims.install()
        self._publish_slices()
        self._thread = threading.Thread(target=self._loop, name="simcluster-controllers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def wake(self) -> None:
        self._wakeup.set()

    def exclusive(self) -> threading.Lock:
        """Held while a pass runs: take it to change node state from another thread."""
        return self._pass_lock

    def _publish_slices(self) -> None:
        for name in sorted(self.claims.dra_nodes):
            rendered = self.nodes.rendered(name)
            if rendered is not None:
                self.claims.publish(rendered)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wakeup.wait(self._sleep_for())
            self._wakeup.clear()
            if self._stopping.is_set():
                return
            try:
                self.run_once()
            except Exception:
                log.exception("simcluster controllers: pass failed")

    def _sleep_for(self) -> float:
        limit = self.timings.max_idle_real_s
        due = [t for t in (self._timers[0][0] if self._timers else None, self.nodes.next_due()) if t is not None]
        if not due:
            return limit
        wait = (min(due) - self.cluster.clock.now()).total_seconds()
        return min(max(self.cluster.clock.real_seconds(wait), 0.0), limit)

    def settle(self, timeout_s: float) -> None:
        """Run passes until nothing is left to do right now (for tests and the admin API)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.run_once()
            now = self.cluster.clock.now()
            busy = (
                self._dirty_pods
                or self._dirty_nodes
                or self._dirty_jobs
                or (self._timers and self._timers[0][0] <= now)
            )
            if not busy:
                return

    # -- change feed ------------------------------------------------------------------------------

    def _on_change(self, change: Change) -> None:
        obj = change.obj
        meta = obj["metadata"]
        if change.resource == "pods":
            self._dirty_pods[meta["uid"]] = obj
            for ref in meta.get("ownerReferences") or ():
                if ref.get("kind") == "Job":
                    self._dirty_jobs.add((meta["namespace"], ref["name"]))
        elif change.resource == "nodes":
            self._dirty_nodes.add(meta["name"])
        elif change.resource == "jobs" and change.type != DELETED:
            self._dirty_jobs.add((meta["namespace"], meta["name"]))
        elif change.resource in (dra_claims.CLAIMS, dra_claims.TEMPLATES):
            self._claims_changed = True
        elif change.resource == "namespaces" and obj.get("status", {}).get("phase") == "Terminating":
            self._terminating.add(meta["name"])
        if change.type != DELETED and "foregroundDeletion" in (meta.get("finalizers") or ()):
            self._foreground.add((change.resource, meta.get("namespace", ""), meta["name"]))
        self._wakeup.set()

    def _take_dirty(self) -> tuple[dict[str, JSON], set[str], set[tuple[str, str]]]:
        with self.store.lock:
            pods, nodes_, jobs_ = self._dirty_pods, self._dirty_nodes, self._dirty_jobs
            self._dirty_pods, self._dirty_nodes, self._dirty_jobs = {}, set(), set()
            return pods, nodes_, jobs_

    # -- one pass ---------------------------------------------------------------------------------

    def run_once(self) -> None:
        with self._pass_lock:
            dirty_pods, dirty_nodes, dirty_jobs = self._take_dirty()
            for name in sorted(dirty_nodes):
                self.nodes.reconcile(name)
                self._epoch += 1
                for pod in self.store.pods_on_node(name):
                    # Readiness may have changed: the kubelet (or the node controller) reacts at once.
                    if pod.get("status", {}).get("phase") not in TERMINAL_PHASES:
                        self._advance(pod, self.cluster.clock.now())
            for uid, seen in dirty_pods.items():
                self._sync_pod(uid, seen)
            self.nodes.land_due_changes()
            if self.claims.dra_nodes and (dirty_nodes or self.nodes.next_due() is not None):
                self._publish_slices()
            if self._claims_changed:
                self._claims_changed = False
                self._epoch += 1
            self._schedule_pending()
            self._run_kubelets()
            now = self.cluster.clock.now()
            sweep = self._last_sweep is None or now >= self._last_sweep + timedelta(seconds=self.timings.sweep_s)
            if sweep:
                self._last_sweep = now
                dirty_jobs |= {(j["metadata"]["namespace"], j["metadata"]["name"]) for j in self.store.all("jobs")}
                self._evict_from_not_ready_nodes(now)
            for namespace, name in sorted(dirty_jobs):
                self._sync_job(namespace, name)
            self._finish_deletions()

    def _sync_pod(self, uid: str, seen: JSON) -> None:
        meta = seen["metadata"]
        current = self.store.get("pods", meta["namespace"], meta["name"])
        if current is None or current["metadata"]["uid"] != uid:
            self._unscheduled.pop(uid, None)
            self._failed_attempt.pop(uid, None)
            if self.capacity.release(uid) is not None:
                self._epoch += 1
            self._release_claims(seen)
            return
        node_name = current["spec"].get("nodeName")
        if not node_name:
            # Pods for another scheduler wait for it (or for a Binding), as with the real kube-scheduler.
            ours = current["spec"].get("schedulerName", defaults.DEFAULT_SCHEDULER) == defaults.DEFAULT_SCHEDULER
            if ours and not current["metadata"].get("deletionTimestamp"):
                if dra_claims.uses_claims(current):
                    self.claims.ensure_template_claims(current)
                self._unscheduled[uid] = (meta["namespace"], meta["name"])
            return
        self._unscheduled.pop(uid, None)
        if current.get("status", {}).get("phase") in TERMINAL_PHASES:
            if self.capacity.release(uid) is not None:
                self._epoch += 1
            self._release_claims(current)
        elif self.capacity.node_of(uid) is None and not current.get("status", {}).get("startTime"):
            self._admit(current, node_name)  # bound by the client itself (spec.nodeName or a Binding)
        self._arm(current, self.cluster.clock.now())

    def _release_claims(self, pod: JSON) -> None:
        if dra_claims.uses_claims(pod):
            names = [n for n in self.claims.claim_names(pod).values() if n]
            self.claims.release(pod["metadata"]["namespace"], pod["metadata"]["uid"], names)

    # -- scheduler --------------------------------------------------------------------------------

    def _schedule_pending(self) -> None:
        if not self._unscheduled:
            return
        retry = timedelta(seconds=self.timings.retry_unschedulable_s)
        queue = []
        for uid, (namespace, name) in list(self._unscheduled.items()):
            pod = self.store.get("pods", namespace, name)
            if pod is None or pod["metadata"]["uid"] != uid or pod["spec"].get("nodeName"):
                self._unscheduled.pop(uid, None)
                continue
            queue.append(pod)
        # The active queue's order: higher priority first, then first come.
        queue.sort(
            key=lambda p: (-scheduler.pod_priority(p), p["metadata"]["creationTimestamp"], p["metadata"]["name"])
        )
        # Pods holding a nomination keep room on their node for the pods behind them.
        nominated = [p for p in queue if p.get("status", {}).get("nominatedNodeName")]
        for pod in queue:
            uid = pod["metadata"]["uid"]
            failed = self._failed_attempt.get(uid)
            now = self.cluster.clock.now()
            if failed is not None and failed[0] == self._epoch and now < failed[1] + retry:
                continue
            if self._schedule_one(pod, now, nominated) is not None:
                nominated = [p for p in nominated if p["metadata"]["uid"] != uid]

    def _schedule_one(self, pod: JSON, now: datetime, nominated: list[JSON]) -> str | None:
        """One scheduling cycle; the node the pod was bound to, if any."""
        request = scheduler.pod_requests(pod)
        claims = None
        if dra_claims.uses_claims(pod):
            pod = self.claims.ensure_template_claims(pod)  # its template may have come after the pod
            claims = self.claims.node_filter(pod)
        with self.store.lock:
            candidates = self.capacity.candidates(pod, request)
            decision = None
            if candidates:
                keep = {n for p in nominated if (n := p.get("status", {}).get("nominatedNodeName"))}
                views, usage = self.capacity.views(pod, candidates, request, keep)
                decision = scheduler.schedule_pod(pod, views, usage, nominated_pods=nominated, claims=claims)
            if decision is None or decision.node_name is None:
                # Nothing fits at a glance: ask with the whole cluster, for the message and preemption.
                all_nodes = [e.node for e in self.capacity.nodes.values()]
                bound = [p for n in self.capacity.nodes for p in self.store.pods_on_node(n)]
                decision = scheduler.schedule_pod(pod, all_nodes, bound, nominated_pods=nominated, claims=claims)
            if decision.node_name is not None:
                self._bind(pod, decision.node_name, now, announce=True)
                return decision.node_name
            self._record_unschedulable(pod, decision, now)
            return None

    def _record_unschedulable(self, pod: JSON, decision: scheduler.Decision, now: datetime) -> None:
        uid = pod["metadata"]["uid"]
        self._failed_attempt[uid] = (self._epoch, now)
        status = dict(pod.get("status") or {})
        condition = scheduler.unschedulable_condition(decision.message, now)
        previous = next((c for c in status.get("conditions", []) if c["type"] == "PodScheduled"), None)
        if previous is not None and previous.get("status") == "False":
            condition["lastTransitionTime"] = previous.get("lastTransitionTime")
        status["conditions"] = [c for c in status.get("conditions", []) if c["type"] != "PodScheduled"] + [condition]
        if decision.nominated_node:
            status["nominatedNodeName"] = decision.nominated_node
        self.cluster.system_update("pods", {**pod, "status": status})
        self.cluster.emit_event(scheduler.scheduler_event(pod, "FailedScheduling", decision.message, now))
        for namespace, name in decision.victims:
            victim = self.store.get("pods", namespace, name)
            if victim is None or victim["metadata"].get("deletionTimestamp"):
                continue
            victim_status = dict(victim.get("status") or {})
            victim_status["conditions"] = [
                *(c for c in victim_status.get("conditions", []) if c["type"] != "DisruptionTarget"),
                scheduler.preemption_condition(pod, now),
            ]
            victim = self.cluster.system_update("pods", {**victim, "status": victim_status})
            message = scheduler.preempted_message(pod, decision.nominated_node or "")
            self.cluster.emit_event(scheduler.scheduler_event(victim, "Preempted", message, now))
            self.cluster.system_delete(PODS, namespace, name)

    def _bind(self, pod: JSON, node_name: str, now: datetime, *, announce: bool) -> JSON:
        """Set spec.nodeName and let the node's kubelet admit the pod: GPU devices are handed out here."""
        entry = self.capacity.nodes[node_name]
        status = {k: v for k, v in (pod.get("status") or {}).items() if k != "nominatedNodeName"}
        bound = {**pod, "spec": {**pod["spec"], "nodeName": node_name}, "status": status}
        bound["status"] = kubelet.status_on_bind(bound, node_name, now, host_ip=kubelet.node_internal_ip(entry.node))
        refusal, devices = self._devices_for(bound, node_name)
        if refusal is not None:
            reason, message = refusal
            bound["status"] = kubelet.fail_pod(bound, now, reason, message)
        else:
            self.capacity.bind(node_name, bound, devices)
        stored = self.cluster.system_update("pods", bound)
        if announce:
            message = scheduler.scheduled_message(pod, node_name)
            self.cluster.emit_event(scheduler.scheduler_event(stored, "Scheduled", message, now))
        self._unscheduled.pop(pod["metadata"]["uid"], None)
        self._failed_attempt.pop(pod["metadata"]["uid"], None)
        self._arm(stored, now)
        return stored

    def _devices_for(self, pod: JSON, node_name: str) -> tuple[tuple[str, str] | None, tuple[DeviceRef, ...]]:
        """Kubelet admission: room on the node, and the device plugin's allocation of GPU devices."""
        entry = self.capacity.nodes[node_name]
        request = scheduler.pod_requests(pod)
        if not entry.fits(request):
            short = next(
                (r for r, n in sorted(request.items()) if n > entry.allocatable.get(r, 0) - entry.used.get(r, 0)),
                "pods",
            )
            message = (
                f"Pod was rejected: Node didn't have enough resource: {short}, requested: {request.get(short, 1)}, "
                f"used: {entry.used.get(short, len(entry.pods))}, capacity: {entry.allocatable.get(short, 0)}"
            )
            return (f"OutOf{short}", message), ()
        if dra_claims.uses_claims(pod):
            # The scheduler's PreBind writes the allocation; the kubelet then prepares the claimed devices.
            reserved = self.claims.reserve(pod, node_name, entry.devices)
            if isinstance(reserved, str):
                return ("UnexpectedAdmissionError", f"Allocate failed for resource claims: {reserved}"), ()
            return None, reserved
        limits = {r: n for r, n in request.items() if device_plugin.is_gpu_resource(r) and n > 0}
        rendered = self.nodes.rendered(node_name)
        if not limits or rendered is None:
            return None, ()
        refused = device_plugin.admission_error(rendered, limits)
        if refused is not None:
            wanted = ", ".join(f"'{r}: {n}'" for r, n in sorted(limits.items()))
            message = f"Allocate failed due to rpc error: code = Unknown desc = request for {wanted} too large: {refused}, which is unexpected"  # noqa: E501
            return ("UnexpectedAdmissionError", message), ()
        devices = device_plugin.allocate(rendered, limits, set(entry.devices))
        if devices is None:
            resource = sorted(limits)[0]
            message = (
                f"Allocate failed due to requested number of devices unavailable for {resource}. "
                f"Requested: {limits[resource]}, Available: 0, which is unexpected"
            )
            return ("UnexpectedAdmissionError", message), ()
        return None, tuple(devices)

    def _admit(self, pod: JSON, node_name: str) -> None:
        if node_name not in self.capacity.nodes:
            return  # a pod bound to a node that does not exist stays Pending, as it would for real
        self._bind(pod, node_name, self.cluster.clock.now(), announce=False)

    def bind(self, namespace: str, name: str, node_name: str) -> JSON:
        """The pods/binding subresource."""
        with self._pass_lock, self.store.lock:
            pod = self.store.get("pods", namespace, name)
            if pod is None:
                raise ApiError(404, "NotFound", f'pods "{name}" not found', name=name, kind="pods")
            if pod["spec"].get("nodeName"):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": '
                    f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"',
                    name=name,
                    kind="pods/binding",
                )
            if node_name not in self.capacity.nodes:
                return self.cluster.system_update("pods", {**pod, "spec": {**pod["spec"], "nodeName": node_name}})
            return self._bind(pod, node_name, self.cluster.clock.now(), announce=False)

    # -- kubelets ---------------------------------------------------------------------------------

    def _next_check(self, pod: JSON, now: datetime) -> datetime | None:
        """When the kubelet should look at this pod next; a hint only, advance_pod decides."""
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("deletionTimestamp"):
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            began = parse_time(meta["deletionTimestamp"]) - timedelta(seconds=grace)
            return began + timedelta(seconds=min(grace, self.timings.termination_s))
        if not pod["spec"].get("nodeName") or status.get("phase") in TERMINAL_PHASES:
            return None
        if not status.get("startTime"):
            return now
        start = parse_time(status["startTime"])
        times = []
        deadline = pod["spec"].get("activeDeadlineSeconds")
        if deadline is not None:
            times.append(start + timedelta(seconds=int(deadline)))
        if status.get("phase") == "Pending":
            times.append(start + self._start_delay)
        duration = kubelet.duration_seconds(pod, self.cluster.clock.workload_speed)
        for cs in status.get("containerStatuses") or []:
            running = cs.get("state", {}).get("running")
            if running and duration is not None:
                times.append(parse_time(running["startedAt"]) + timedelta(seconds=duration))
            if cs.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff":
                times.append(now + timedelta(seconds=5))
        return min(times) if times else None

    def _arm(self, pod: JSON, now: datetime) -> None:
        due = self._next_check(pod, now)
        uid = pod["metadata"]["uid"]
        if due is None:
            return
        armed = self._armed.get(uid)
        if armed is not None and armed <= due:
            return
        self._armed[uid] = due
        self._seq += 1
        heapq.heappush(self._timers, (due, self._seq, uid, pod["metadata"]["namespace"], pod["metadata"]["name"]))

    def _run_kubelets(self) -> None:
        now = self.cluster.clock.now()
        while self._timers and self._timers[0][0] <= now:
            due, _, uid, namespace, name = heapq.heappop(self._timers)
            if self._armed.get(uid) == due:
                del self._armed[uid]
            pod = self.store.get("pods", namespace, name)
            if pod is None or pod["metadata"]["uid"] != uid:
                continue
            self._advance(pod, now)

    def _advance(self, pod: JSON, now: datetime) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            finish = self._next_check(pod, now)
            if finish is not None and finish <= now:
                self.cluster.remove_terminated_pod(pod)
                if self.capacity.release(meta["uid"]) is not None:
                    self._epoch += 1
            else:
                self._arm(pod, now)
            return
        node = self.store.get("nodes", "", pod["spec"]["nodeName"])
        update = kubelet.advance_pod(
            pod,
            node,
            now,
            start_delay=self._start_delay,
            workload_speed=self.cluster.clock.workload_speed,
            gpu_memory_limit_mib=self._mps_memory_limit(pod),
        )
        if update is None:
            self._arm(pod, now)
            return
        stored = self.cluster.system_update("pods", {**pod, "status": update.status})
        for event in kubelet.pod_events(stored, update, now):
            self.cluster.emit_event(event)
        if update.status.get("phase") in TERMINAL_PHASES and self.capacity.release(meta["uid"]) is not None:
            self._epoch += 1
        self._arm(stored, now)

    def _mps_memory_limit(self, pod: JSON) -> int | None:
        """The pod's MPS client memory limit, when the device plugin gave it an MPS replica."""
        use = self.capacity.use_of(pod["metadata"]["uid"])
        rendered = self.nodes.rendered(pod["spec"]["nodeName"]) if use and use.devices else None
        return mps.client_memory_limit_mib(rendered, use.devices) if rendered and use else None

    def _evict_from_not_ready_nodes(self, now: datetime) -> None:
        """The taint eviction controller: pods that stop tolerating a NoExecute taint are deleted."""
        for node_name in self.nodes.not_ready():
            node = self.store.get("nodes", "", node_name)
            if node is None:
                continue
            for pod in self.store.pods_on_node(node_name):
                if pod["metadata"].get("deletionTimestamp") or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
                    continue
                if not kubelet.noexecute_eviction_due(pod, node, now):
                    continue
                status = dict(pod.get("status") or {})
                status["conditions"] = [
                    *(c for c in status.get("conditions", []) if c["type"] != "DisruptionTarget"),
                    kubelet.taint_eviction_condition(now),
                ]
                pod = self.cluster.system_update("pods", {**pod, "status": status})
                message = f"Marking for deletion Pod {pod['metadata']['namespace']}/{pod['metadata']['name']}"
                self.cluster.emit_event(
                    scheduler.make_event(
                        pod, "TaintManagerEviction", message, now, component="taint-eviction-controller"
                    )
                )
                self.cluster.system_delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])

    # -- job controller ---------------------------------------------------------------------------

    def _sync_job(self, namespace: str, name: str) -> None:
        job = self.store.get("jobs", namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        owned = [
            pod
            for key, ns, pod_name in self.store.dependents(job["metadata"]["uid"])
            if key == "pods" and (pod := self.store.get("pods", ns, pod_name)) is not None
        ]
        now = self.cluster.clock.now()
        actions = jobs.reconcile_job(job, owned, now, rng=self.rng)
        for pod in actions.create_pods:
            try:
                self.cluster.create(PODS, namespace, pod)
            except ApiError as exc:
                log.warning("job %s/%s: pod not created: %s", namespace, name, exc)
        for pod_name in actions.delete_pods:
            self.cluster.system_delete(PODS, namespace, pod_name)
        stored = job
        if actions.status != job.get("status"):
            stored = self.cluster.system_update("jobs", {**job, "status": actions.status})
        for event in jobs.job_events(stored, actions, now):
            self.cluster.emit_event(event)
        if actions.delete_job:
            self.cluster.system_delete(JOBS, namespace, name, propagation="Background")

    # -- namespaces and foreground deletion --------------------------------------------------------

    def _finish_deletions(self) -> None:
        with self.store.lock:  # the change listener adds to these sets from request threads
            terminating, foreground = sorted(self._terminating), sorted(self._foreground)
        for name in terminating:
            ns = self.store.get("namespaces", "", name)
            if ns is None:
                self._terminating.discard(name)
            else:
                self.cluster.finish_namespace(ns)
        for key, namespace, name in foreground:
            obj = self.store.get(key, namespace, name)
            if obj is None or "foregroundDeletion" not in (obj["metadata"].get("finalizers") or ()):
                self._foreground.discard((key, namespace, name))
            else:
                self.cluster.finish_foreground(key, obj)

    # -- telemetry --------------------------------------------------------------------------------

    def metrics_text(self) -> str:
        uses = []
        clock = self.cluster.clock
        now = clock.now()
        with self._pass_lock, self.store.lock:
            for name, sim in sorted(self.nodes.sims.items()):
                if not sim.rendered.devices:
                    continue
                holders: dict[DeviceRef, telemetry.PodRef] = {}
                entry = self.capacity.nodes.get(name)
                for use in entry.pods.values() if entry else ():
                    pod = self.store.get("pods", use.namespace, use.name)
                    if pod is None or pod.get("status", {}).get("phase") != "Running":
                        continue
                    meta = pod["metadata"]
                    ref = telemetry.PodRef(
                        name=use.name,
                        namespace=use.namespace,
                        container=pod["spec"]["containers"][0]["name"],
                        uid=use.uid,
                        profile=telemetry.profile_for_pod(meta.get("annotations"), meta.get("labels")),
                        started_at=clock.workload_start(
                            parse_time(pod["status"].get("startTime") or meta["creationTimestamp"]), now
                        ),
                        busy_seconds=telemetry.busy_seconds_for_pod(meta.get("annotations")),
                        gpu_memory_mib=mps.gpu_memory_asked_mib(meta.get("annotations")),
                        memory_limit_mib=mps.client_memory_limit_mib(sim.rendered, use.devices),
                        dra_claim=next(iter(filter(None, self.claims.claim_names(pod).values())), None),
                    )
                    holders.update(dict.fromkeys(use.devices, ref))
                uses.extend(telemetry.device_uses(name, sim.rendered.devices, holders))
        return telemetry.render_metrics(
            uses,
            at=now,
            seed=self.seed,
            driver_version=self.spec.driver_version,
            virtual_gpus=self.spec.dcgm_virtual_gpus,
        )
