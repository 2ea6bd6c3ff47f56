"""Replay a Kueue-style queueing scenario through :func:`~scheduling.engine.admission.decide` in
simulated time.

The scenario file has the shape of Kueue's scheduler-performance ``generator.yaml``: cohort sets, queue
sets per cohort (nominal quota, borrowing limit, preemption policies) and workload sets per queue (count,
creation interval, classes with request, runtime, priority). A cohort is a department, a queue a team,
the single resource one flavour, and a request of 1 is one unit (one GPU-equivalent).

Discrete-event, in integer milliseconds:

- Each workload set of each queue creates its workloads one after another, ``creationIntervalMs`` apart,
  the first one interval after the start (as Kueue's generator sleeps before each creation).
- A workload holds its request from admission until ``runtimeMs`` later, then finishes.
- The scheduling cycle runs once per distinct event time, after all creations and finishes at that time
  (``cycle_ms`` > 0 runs it on a fixed period instead). Preemption takes effect at once (no notice, as in
  Kueue's test runner); a preempted workload goes back to the queue with its creation time, restarts from
  scratch when re-admitted, and the cycle is repeated at the same instant so its preemptor can start.
- Fair share: each team's usage, decayed with ``half_life_s``, sampled at every cycle.
- Decisions are instantaneous by default, so the figures measure the policy. With ``charge_cpu`` each
  decision takes effect only after the CPU time :func:`decide` actually took, and the next cycle starts
  after that, so the figures include the engine's own speed on this machine (and vary a little per run).

Figures, defined as Kueue's runner defines them (``test/performance/scheduler``):

- wall time: from the start to the last finish;
- a queue's average usage of its nominal quota: units held (borrowed ones included, and the work of
  runs later preempted) integrated over the whole scenario, divided by nominal quota x wall time;
- time to admission: from creation to the admission that ran to completion (Kueue records the last
  admission too), averaged per workload class.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from scheduling.engine.admission import AdmissionState, Policy, Strategy, decide
from scheduling.engine.fairshare import decay_all
from scheduling.engine.quota import UNIT, Kind, QuotaConfig, TeamQuota, Workload

SCENARIOS = Path(__file__).parent / "scenarios"
DEFAULT_SCENARIO = SCENARIOS / "kueue-baseline.yaml"
FLAVOUR = "default"
MAX_ROUNDS = 16  # decide() calls per cycle while preemptions keep freeing room at the same instant


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    runtime_ms: int
    priority: int
    request: int  # units
    kind: Kind = Kind.BATCH


@dataclass(frozen=True)
class WorkloadSet:
    count: int
    interval_ms: int
    classes: tuple[WorkloadClass, ...]


@dataclass(frozen=True)
class QueueSet:
    name: str
    count: int
    nominal: int
    borrowing_limit: int
    workload_sets: tuple[WorkloadSet, ...]
    reclaim: bool
    within_team_priority: bool


@dataclass(frozen=True)
class CohortSet:
    name: str
    count: int
    queue_sets: tuple[QueueSet, ...]


@dataclass(frozen=True)
class Scenario:
    cohorts: tuple[CohortSet, ...]

    @property
    def policy(self) -> Policy:
        """Kueue sets preemption per queue; the engine applies one policy, so all queue sets must agree."""
        found = {(qs.reclaim, qs.within_team_priority) for c in self.cohorts for qs in c.queue_sets}
        if len(found) != 1:
            raise ValueError("all queue sets must use the same preemption policies")
        reclaim, within = found.pop()
        return Policy(Strategy.BEST_EFFORT_FIFO, reclaim=reclaim, within_team_priority=within)


def parse_quantity(value: object) -> int:
    """A Kubernetes quantity ("1", 2, "500m", "1.5") as units."""
    text = str(value).strip()
    if text.endswith("m"):
        return int(text[:-1]) * UNIT // 1000
    return round(float(text) * UNIT)


_RECLAIM = {"Any": True, "Never": False}
_WITHIN = {"LowerPriority": True, "Never": False}


def parse_scenario(data: Mapping[str, Any]) -> Scenario:
    def policy_value(table: Mapping[str, bool], qs: Mapping[str, Any], key: str) -> bool:
        value = qs.get(key, "Never")  # Kueue's default
        if value not in table:
            raise ValueError(f"{key}: {value!r} is not supported (one of {', '.join(table)})")
        return table[value]

    cohorts = tuple(
        CohortSet(
            name=str(c["className"]),
            count=int(c.get("count", 1)),
            queue_sets=tuple(
                QueueSet(
                    name=str(qs["className"]),
                    count=int(qs.get("count", 1)),
                    nominal=parse_quantity(qs["nominalQuota"]),
                    borrowing_limit=parse_quantity(qs.get("borrowingLimit", 0)),
                    reclaim=policy_value(_RECLAIM, qs, "reclaimWithinCohort"),
                    within_team_priority=policy_value(_WITHIN, qs, "withinClusterQueue"),
                    workload_sets=tuple(
                        WorkloadSet(
                            count=int(ws["count"]),
                            interval_ms=int(ws["creationIntervalMs"]),
                            classes=tuple(
                                WorkloadClass(
                                    name=str(wc["className"]),
                                    runtime_ms=int(wc["runtimeMs"]),
                                    priority=int(wc.get("priority", 0)),
                                    request=parse_quantity(wc["request"]),
                                    kind=Kind(wc.get("kind", Kind.BATCH)),
                                )
                                for wc in ws["workloads"]
                            ),
                        )
                        for ws in qs.get("workloadsSets", ())
                    ),
                )
                for qs in c["queuesSets"]
            ),
        )
        for c in data["cohorts"]
    )
    if not cohorts:
        raise ValueError("a scenario needs at least one cohort")
    return Scenario(cohorts)


def load_scenario(path: Path = DEFAULT_SCENARIO) -> Scenario:
    return parse_scenario(yaml.safe_load(path.read_text()))


@dataclass(frozen=True)
class Arrival:
    at_ms: int
    workload: Workload
    class_name: str
    runtime_ms: int


@dataclass(frozen=True)
class Expanded:
    quotas: QuotaConfig
    queue_class: Mapping[str, str]  # queue -> its queue-set class name
    arrivals: tuple[Arrival, ...]


def _queues(scenario: Scenario) -> Iterator[tuple[str, str, QueueSet]]:
    """(queue, cohort, its queue set) for every queue, named as Kueue's generator names them."""
    for cs in scenario.cohorts:
        for ci in range(cs.count):
            cohort = f"{cs.name}-{ci}"
            for qsi, qs in enumerate(cs.queue_sets):
                for qi in range(qs.count):
                    yield f"{qs.name}-{qsi}-{qi}-{cohort}", cohort, qs


def _arrivals(queue: str, qs: QueueSet) -> Iterator[Arrival]:
    # Each workload set creates its workloads in turn, sleeping one interval before each.
    for wsi, ws in enumerate(qs.workload_sets):
        for si in range(ws.count):
            for i, wc in enumerate(ws.classes):
                at = (si * len(ws.classes) + i + 1) * ws.interval_ms
                w = Workload(
                    f"{queue}/{wc.name}-{wsi}-{si}-{i}", queue, FLAVOUR, wc.request, wc.priority, wc.kind, at / 1000
                )
                yield Arrival(at, w, wc.name, wc.runtime_ms)


def expand(scenario: Scenario) -> Expanded:
    """Quotas of every queue and every workload with its creation time."""
    quotas: dict[tuple[str, str], TeamQuota] = {}
    departments: dict[str, str] = {}
    queue_class: dict[str, str] = {}
    arrivals: list[Arrival] = []
    for queue, cohort, qs in _queues(scenario):
        quotas[queue, FLAVOUR] = TeamQuota(qs.nominal, qs.borrowing_limit)
        departments[queue] = cohort
        queue_class[queue] = qs.name
        arrivals += _arrivals(queue, qs)
    arrivals.sort(key=lambda a: (a.at_ms, a.workload.id))
    return Expanded(QuotaConfig(quotas, departments), queue_class, tuple(arrivals))


@dataclass(frozen=True)
class SimConfig:
    cycle_ms: int = 0  # 0: a cycle at every distinct event time
    half_life_s: float = 10.0  # fair-share memory; 0 uses current usage only
    strategy: Strategy = Strategy.BEST_EFFORT_FIFO
    charge_cpu: bool = False  # advance the simulated clock by decide()'s measured CPU time


DEFAULT_CONFIG = SimConfig()


@dataclass(frozen=True)
class SimResult:
    wall_ms: int
    queue_usage: Mapping[str, float]  # fraction of nominal quota, averaged over the wall time
    queue_useful: Mapping[str, float]  # the same counting only runs that completed (no preempted work)
    admission_ms: Mapping[str, float]  # mean creation-to-admission per workload class
    workloads: int
    finished: int
    admissions: int
    preemptions: int
    cycles: int
    decide_calls: int
    cpu_s: float
    decide_cpu_s: float

    @property
    def min_usage(self) -> float:
        return min(self.queue_usage.values(), default=0.0)

    @property
    def min_useful(self) -> float:
        return min(self.queue_useful.values(), default=0.0)


_CREATE, _FINISH = 1, 0  # at one instant, finishes are processed before creations (order is immaterial)


class _Run:
    """Mutable state of one replay."""

    def __init__(self, ex: Expanded, config: SimConfig, policy: Policy) -> None:
        self.ex, self.config, self.policy = ex, config, policy
        self.events: list[tuple[int, int, int, str, int]] = [
            (a.at_ms, _CREATE, i, a.workload.id, 0) for i, a in enumerate(ex.arrivals)
        ]
        heapq.heapify(self.events)
        self.seq = len(self.events)
        self.by_id = {a.workload.id: a for a in ex.arrivals}
        self.pending: dict[str, Workload] = {}
        self.admitted: dict[str, Workload] = {}
        self.attempt: dict[str, int] = defaultdict(int)
        self.admitted_ms: dict[str, int] = {}
        self.finished_ms: dict[str, int] = {}
        self.held: dict[str, int] = defaultdict(int)
        self.area: dict[str, int] = defaultdict(int)  # unit-milliseconds
        self.changed_ms: dict[str, int] = defaultdict(int)
        self.decayed: dict[tuple[str, str], float] = {}
        self.last_cycle_ms = 0
        self.admissions = self.preemptions = self.cycles = self.decide_calls = 0
        self.decide_cpu = 0.0

    def close(self, at_ms: int) -> None:
        for team in list(self.held):
            self._hold(team, 0, at_ms)

    def _hold(self, team: str, delta: int, at_ms: int) -> None:
        self.area[team] += self.held[team] * (at_ms - self.changed_ms[team])
        self.changed_ms[team] = at_ms
        self.held[team] += delta

    def _event(self, at_ms: int, kind: int, wid: str, attempt: int) -> None:
        if kind == _CREATE:
            self.pending[wid] = self.by_id[wid].workload
        elif attempt == self.attempt[wid] and wid in self.admitted:
            w = self.admitted.pop(wid)
            self._hold(w.team, -w.units, at_ms)
            self.finished_ms[wid] = at_ms

    def _cycle(self, now_ms: int) -> tuple[bool, int]:
        """One scheduling cycle starting at ``now_ms``: whether anything changed, and when the cycle ended
        (``now_ms`` unless decision time is charged to the simulated clock)."""
        self.cycles += 1
        held = {(t, FLAVOUR): float(u) for t, u in self.held.items() if u}
        elapsed = (now_ms - self.last_cycle_ms) / 1000
        self.decayed = decay_all(self.decayed, held, elapsed, self.config.half_life_s)
        self.last_cycle_ms = now_ms
        changed = False
        for _ in range(MAX_ROUNDS):
            start = time.process_time()
            state = AdmissionState(self.ex.quotas, list(self.admitted.values()), self.decayed)
            decisions = decide(state, self.pending.values(), self.policy)
            cost = time.process_time() - start
            self.decide_cpu += cost
            self.decide_calls += 1
            if self.config.charge_cpu:
                now_ms += math.ceil(cost * 1000)  # decisions take effect once they are made
            for a in decisions.admit:
                w = replace(self.pending.pop(a.workload_id), admitted_at=now_ms / 1000, borrowing=a.borrowing)
                self.admitted[w.id] = w
                self._hold(w.team, w.units, now_ms)
                self.admitted_ms[w.id] = now_ms
                self.admissions += 1
                done = now_ms + self.by_id[w.id].runtime_ms
                heapq.heappush(self.events, (done, _FINISH, self.seq, w.id, self.attempt[w.id]))
                self.seq += 1
            for p in decisions.preempt:
                w = self.admitted.pop(p.workload_id)
                self._hold(w.team, -w.units, now_ms)
                self.attempt[w.id] += 1
                self.pending[w.id] = replace(w, admitted_at=None, borrowing=False)
                self.preemptions += 1
            changed = changed or bool(decisions.admit or decisions.preempt)
            if not decisions.preempt:
                break
        return changed, now_ms

    def run(self) -> int:
        """Replay to the end; the time of the last finish."""
        events, period = self.events, self.config.cycle_ms
        free_at = 0  # one cycle at a time: the next starts when the last has ended
        while events:
            now = max(events[0][0], free_at)
            if period > 0:
                now = -(-now // period) * period
            while events and events[0][0] <= now:
                at, kind, _, wid, attempt = heapq.heappop(events)
                self._event(at, kind, wid, attempt)
            changed, free_at = self._cycle(now)
            while changed and not events:
                # Nothing else will happen: the queue can only move on if the last cycle changed something.
                changed, free_at = self._cycle(free_at)
        return max(self.finished_ms.values(), default=0)


def simulate(scenario: Scenario, config: SimConfig = DEFAULT_CONFIG) -> SimResult:
    ex = expand(scenario)
    policy = replace(scenario.policy, strategy=config.strategy)
    start = time.process_time()
    run = _Run(ex, config, policy)
    wall = run.run()
    cpu = time.process_time() - start
    run.close(wall)

    useful: dict[str, int] = defaultdict(int)
    waits: dict[str, list[int]] = defaultdict(list)
    for a in ex.arrivals:
        if a.workload.id in run.finished_ms:
            useful[a.workload.team] += a.workload.units * a.runtime_ms
            waits[a.class_name].append(run.admitted_ms[a.workload.id] - a.at_ms)

    def per_nominal(area: Mapping[str, int]) -> dict[str, float]:
        nominal = {team: q.guaranteed for (team, _), q in ex.quotas.quotas.items()}
        return {t: area.get(t, 0) / (nominal[t] * wall) if nominal[t] and wall else 0.0 for t in ex.queue_class}

    return SimResult(
        wall_ms=wall,
        queue_usage=per_nominal(run.area),
        queue_useful=per_nominal(useful),
        admission_ms={c: sum(v) / len(v) for c, v in waits.items()},
        workloads=len(ex.arrivals),
        finished=len(run.finished_ms),
        admissions=run.admissions,
        preemptions=run.preemptions,
        cycles=run.cycles,
        decide_calls=run.decide_calls,
        cpu_s=cpu,
        decide_cpu_s=run.decide_cpu,
    )
