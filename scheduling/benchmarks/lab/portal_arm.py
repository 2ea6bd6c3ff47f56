"""Arm "portal" in simulated time: the portal's own decisions, the code the live cycle runs, on the arm's
cluster.

- A request goes to the first offering in its arm's list for its kind (and notebook size) whose team has
  room for it now and whose nodes could take it now; else it waits for the first. A job asks its GPU count
  of that offering (an offering that does not allow the count is skipped); a notebook one unit.
- Every ``CYCLE_S`` seconds with something new, the admission engine (``scheduling/engine/admission.py``,
  the live policy: reclaim and priority preemption, fair share decayed with the live half-life) decides on
  the queue, and the placement inventory (``scheduling/inventory.py``, the live policy ``ours`` with MIG and
  time-slicing placers) places what it admits; what cannot be placed drops out and the rest is decided
  again, as the live cycle does. A preempted job keeps its GPUs for the live notice period
  (``PREEMPTION_NOTICE_S``), then goes back to the queue and starts again from scratch when admitted again.
  Notebooks are interactive: never borrowing, never victims.
- With ``idle_reclaim`` a notebook is stopped when the idle rule would reclaim it (``runs.Plan``); an owner
  who was still working in it asks again when they come back.
- With ``dynamic_mig`` the arm's MIG layouts follow demand: ``dynamic_arm.DynamicArm`` adds the portal's
  repartition passes.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from scheduling.benchmarks.lab.arrivals import Calendar, Request
from scheduling.benchmarks.lab.fleet import Fleet
from scheduling.benchmarks.lab.model import Arm, LabModel
from scheduling.benchmarks.lab.outcome import ArmOutcome, Step
from scheduling.benchmarks.lab.runs import Plan, Run, Wait, plan
from scheduling.discovery import OfferingProposal
from scheduling.engine.admission import AdmissionState, WaitReason, decide
from scheduling.engine.fairshare import decay_all
from scheduling.engine.quota import Kind, Workload, to_units
from scheduling.inventory import Demand, Held
from scheduling.kube.keys import WORKSPACE_ID
from scheduling.kube.spec import SHARING_OF_KIND

CYCLE_S = 10.0
MAX_ROUNDS = 8  # decide() passes per cycle while preemptions or unplaceable admissions change the picture
HALF_LIFE_S = 4 * 3600.0  # the live default (FAIR_SHARE_HALF_LIFE_SECONDS)
PREEMPTION_NOTICE_S = 120.0  # the live default (PREEMPTION_NOTICE_SECONDS)
_END, _RECLAIM, _PREEMPT, _ARRIVE, PASS = 0, 1, 2, 3, 4  # PASS: a repartition pass (dynamic_arm.py)


@dataclass
class _Queued:
    request: Request
    offering: OfferingProposal
    workload: Workload
    demand: Demand
    gpu_eq: float
    attempt: int = 0


@dataclass
class _Running:
    queued: _Queued
    workload: Workload
    held: list[Held]
    start: float
    plan: Plan
    pods: list[dict[str, Any]]  # its bound pods, to take their place again in a rebuilt inventory


class PortalArm:
    def __init__(self, model: LabModel, arm: Arm, requests: Sequence[Request], horizon: float | None = None) -> None:
        self.model, self.arm = model, arm
        self.fleet = Fleet.build(model, whole_gpus_only=arm.whole_gpus_only, every_layout=arm.dynamic_mig)
        problems = self.fleet.check({"job": arm.job_offerings, **(arm.notebook_offerings or {})}, arm.name)
        if problems:
            raise ValueError("; ".join(problems))
        self.cal = Calendar(model)
        self.pools = {m: u / 1000 for m, u in self.fleet.quotas.capacity.items()}  # GPUs per model, for figures
        self.horizon = model.days * 86400.0 if horizon is None else horizon
        self.requests = {q.id: q for q in requests}
        self.events: list[tuple[float, int, int, str, int]] = [
            (q.at, _ARRIVE, i, q.id, 0) for i, q in enumerate(requests)
        ]
        heapq.heapify(self.events)
        self.seq = len(self.events)
        self.queue: dict[str, _Queued] = {}
        self.running: dict[str, _Running] = {}
        self.runs: list[Run] = []
        self.first_start: dict[str, float] = {}
        self.in_quota: dict[str, bool] = {}
        # After each cycle: (time, held per GPU model, asked per GPU model), in GPU-equivalents.
        self.samples: list[tuple[float, dict[str, float], dict[str, float]]] = []
        self.never_fits: set[str] = set()
        self.dirty: set[str] = set()  # flavours with an arrival or a departure since they were last decided
        self.decayed: dict[tuple[str, str], float] = {}
        self.last_cycle = 0.0
        self.pods = 0
        self.on_node: Counter[str] = Counter()  # GPU pods bound per node
        self.reasons: dict[str, WaitReason] = {}  # why each queued request waited at its last decision
        self.repartitions = 0

    # -- requests --------------------------------------------------------------------------------------

    def _held_units(self, team: str, flavour: str) -> int:
        return sum(
            r.workload.units for r in self.running.values() if r.workload.team == team and r.workload.flavour == flavour
        )

    def _queued(self, q: Request, offering: OfferingProposal) -> _Queued | None:
        count = q.gpus if q.kind == "job" else 1
        if count not in offering.allowed_counts:
            return None
        gpu_eq = float(offering.gpu_equivalents) * count * q.pods
        kind = Kind.BATCH if q.kind == "job" else Kind.INTERACTIVE
        workload = Workload(q.id, q.team, offering.gpu_model, to_units(gpu_eq), 0, kind, q.at)
        demand = Demand(
            offering.resource_name,
            count,
            offering.cpu_millis_default * count,
            offering.memory_mib_default * count,
            dict(offering.node_selector),
            q.pods,
            SHARING_OF_KIND[offering.kind],
            offering.gpu_model,
            offering.mig_profile,
            offering.replicas,
        )
        return _Queued(q, offering, workload, demand, gpu_eq)

    def _arrive(self, q: Request, t: float) -> None:
        slugs = self.arm.job_offerings if q.kind == "job" else (self.arm.notebook_offerings or {})[q.size]
        options = [x for x in (self._queued(q, self.fleet.offerings[s]) for s in slugs) if x is not None]
        if not options:  # no offering allows its GPU count: it never starts (its wait says so)
            return
        quotas = self.fleet.quotas
        for option in options:
            w = option.workload
            room = self._held_units(w.team, w.flavour) + w.units <= quotas.quota(w.team, w.flavour).limit(w.kind)
            if room and not self.fleet.capacity.place_would_fail(option.demand):
                break
        else:
            option = options[0]
        w = option.workload
        # In quota: it fits its team's guarantee with what the team holds and already waits for there.
        ahead = sum(
            x.workload.units
            for x in self.queue.values()
            if (x.workload.team, x.workload.flavour) == (w.team, w.flavour)
        )
        in_quota = self._held_units(w.team, w.flavour) + ahead + w.units <= quotas.quota(w.team, w.flavour).guaranteed
        self.in_quota.setdefault(q.id, in_quota)
        self.queue[q.id] = option
        self.dirty.add(w.flavour)

    # -- starting and stopping -------------------------------------------------------------------------

    def _pod(self, node: str, d: Demand) -> dict[str, Any]:
        self.pods += 1
        requests = {"cpu": f"{d.cpu_millis}m", "memory": f"{d.memory_mib}Mi", d.resource_name: str(d.count)}
        return {
            "metadata": {"labels": {WORKSPACE_ID: str(self.pods)}},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": requests}}]},
            "status": {"phase": "Running"},
        }

    def _start(self, q: _Queued, nodes: list[str], now: float, borrowing: bool) -> None:
        pods = [self._pod(node, q.demand) for node in nodes]
        held = [self.fleet.capacity.occupy(pod) for pod in pods]
        self.on_node.update(nodes)
        p = plan(q.request, now, self.cal, self.model.seed, attempt=q.attempt)
        workload = replace(q.workload, admitted_at=now, borrowing=borrowing)
        run = _Running(q, workload, [h for h in held if h], now, p, pods)
        self.running[q.request.id] = run
        self.first_start.setdefault(q.request.id, now)
        self._push(now + p.length, _END, q.request.id, q.attempt)
        reclaim = p.reclaim_after(self.model.idle) if self.arm.idle_reclaim else None
        if reclaim is not None and reclaim < p.length:
            self._push(now + reclaim, _RECLAIM, q.request.id, q.attempt)

    def _stop(self, wid: str, t: float, outcome: str, *, requeue: bool = False) -> None:
        run = self.running.pop(wid)
        self.dirty.add(run.workload.flavour)
        for h in run.held:
            self.fleet.capacity.vacate(h)
        self.on_node.subtract(pod["spec"]["nodeName"] for pod in run.pods)
        q = run.queued
        self.runs.append(Run(q.request, q.offering.slug, q.gpu_eq, run.start, t, outcome, run.plan))
        if requeue:
            self.queue[wid] = replace(q, attempt=q.attempt + 1)
        elif outcome == "reclaimed" and t - run.start < run.plan.in_use:
            back = run.plan.back_after(t - run.start)
            if back is not None:  # its owner comes back, finds it stopped, and asks again for the rest
                again = replace(q.request, id=f"{q.request.id}+", at=run.start + back, session_s=run.plan.in_use - back)
                self.requests[again.id] = again
                self._push(again.at, _ARRIVE, again.id, 0)

    def _push(self, at: float, kind: int, wid: str, attempt: int) -> None:
        heapq.heappush(self.events, (at, kind, self.seq, wid, attempt))
        self.seq += 1

    # -- the cycle -------------------------------------------------------------------------------------

    def _cycle(self, now: float) -> None:
        held: dict[tuple[str, str], float] = defaultdict(float)
        for r in self.running.values():
            held[r.workload.team, r.workload.flavour] += r.workload.units
        self.decayed = decay_all(self.decayed, held, now - self.last_cycle, HALF_LIFE_S)
        self.last_cycle = now
        # Flavours never share capacity (the engine decides each on its own): one where nothing arrived or
        # left since its last decision would be decided the same way again, so only the others are.
        dirty, self.dirty = self.dirty, set()
        if not dirty:
            return
        blocked: set[str] = set()
        for _ in range(MAX_ROUNDS):
            admitted = [r.workload for r in self.running.values() if r.workload.flavour in dirty]
            state = AdmissionState(self.fleet.quotas, admitted, self.decayed)
            queue = [q.workload for wid, q in self.queue.items() if wid not in blocked and q.workload.flavour in dirty]
            decided = decide(state, queue)
            for p in decided.preempt:  # the victim is told now and gone after the notice
                victim = self.running[p.workload_id]
                victim.workload = replace(victim.workload, preempting=True)
                self._push(now + PREEMPTION_NOTICE_S, _PREEMPT, p.workload_id, victim.queued.attempt)
            refused = False
            for a in decided.admit:
                q = self.queue[a.workload_id]
                nodes = self.fleet.capacity.copy().place(q.demand)
                if nodes is None:
                    blocked.add(a.workload_id)
                    self.reasons[a.workload_id] = WaitReason.NO_CAPACITY  # admitted, but no node has room
                    refused = True
                    continue
                del self.queue[a.workload_id]
                self.reasons.pop(a.workload_id, None)
                self._start(q, nodes, now, a.borrowing)
            if not (refused and decided.waiting):
                break
        # What is asked for: what runs and what waits, except what the engine says can never start here.
        self.never_fits = {
            wid for wid in self.never_fits if self.queue.get(wid) and self.queue[wid].workload.flavour not in dirty
        }
        self.never_fits |= {w.workload_id for w in decided.waiting if w.reason is WaitReason.NEVER_FITS}
        self.reasons.update((w.workload_id, w.reason) for w in decided.waiting)
        held_eq: dict[str, float] = defaultdict(float)
        for r in self.running.values():
            held_eq[r.workload.flavour] += r.queued.gpu_eq
        asked_eq = dict(held_eq)
        for wid, q in self.queue.items():
            if wid not in self.never_fits:
                asked_eq[q.workload.flavour] = asked_eq.get(q.workload.flavour, 0.0) + q.gpu_eq
        self.samples.append((now, held_eq, asked_eq))

    def _event(self, wid: str, t: float, kind: int) -> None:
        if kind == _PREEMPT:
            self._stop(wid, t, "preempted", requeue=self.requests[wid].kind == "job")
        elif kind == _RECLAIM:
            self._stop(wid, t, "reclaimed")
        else:
            self._stop(wid, t, "done" if self.requests[wid].kind == "job" else "closed")

    def _pass(self, t: float) -> None:
        """A repartition pass: only the dynamic arm schedules them."""

    def run(self) -> ArmOutcome:
        while self.events and self.events[0][0] < self.horizon:
            now = min(math.ceil(self.events[0][0] / CYCLE_S) * CYCLE_S, self.horizon)
            while self.events and self.events[0][0] <= now:
                t, kind, _, wid, attempt = heapq.heappop(self.events)
                if kind == _ARRIVE:
                    self._arrive(self.requests[wid], t)
                elif kind == PASS:
                    self._pass(t)
                elif wid in self.running and self.running[wid].queued.attempt == attempt:
                    self._event(wid, t, kind)
            self._cycle(now)
        for wid in list(self.running):
            self._stop(wid, self.horizon, "month-ended")
        waits = [Wait(q, self.in_quota.get(q.id, False), self.first_start.get(q.id)) for q in self.requests.values()]
        return ArmOutcome(
            self.arm.name,
            self.fleet.gpus,
            self.horizon,
            self.runs,
            waits,
            Step.from_samples(self.pools, self.samples),
            self.repartitions,
        )


def simulate_portal(model: LabModel, arm: Arm, requests: Sequence[Request], horizon: float | None = None) -> ArmOutcome:
    """``horizon``: stop after that many seconds instead of the model's days. An arm with ``dynamic_mig``
    runs as ``dynamic_arm.DynamicArm``."""
    if arm.dynamic_mig:
        from scheduling.benchmarks.lab.dynamic_arm import DynamicArm  # it builds on this module

        return DynamicArm(model, arm, requests, horizon).run()
    return PortalArm(model, arm, requests, horizon).run()
