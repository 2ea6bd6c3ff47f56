"""A portal arm whose MIG layouts follow demand (``dynamic_mig``): the portal's repartition loop
(``scheduling/loops/mig_repartition.py``, docs/dynamic-mig.md) in simulated time, on top of ``portal_arm``.

Every ``INTERVAL_S`` (the loop's beat), a pass does what the live ``run_pass`` does:

- **A change in flight advances.** The pass after the choice applies the new layout
  (``nvidia.com/mig.config``); the MIG manager takes the arm's ``mig_reconfigure_s``; the first pass that
  finds it done gives the node back to placement with its new devices: the placement inventory is rebuilt
  with that node rendered under the new config (``fleet.render_nodes``, as the simulated cluster renders a
  node) and every running pod takes its place again. The node then serves the offerings its layout gives;
  the arm's catalogue holds the shapes of every named layout from the start (``fleet.every_layout_offering``),
  as if ``refresh_offerings`` had created them at an earlier change.
- **Otherwise a change may start.** The queued demand (requests of whole-GPU and MIG offerings that have
  waited at least ``MIN_WAIT_S`` and whose last decision was not their team's quota: units per GPU model and
  device-plugin resource, as ``queued_demand``) and the GPU nodes (free device-plugin units; idle: no GPU
  pod and not cordoned) go to the same planner, ``scheduling/planning/mig_layouts.plan``. The node it picks,
  if any, is cordoned at once (the inventory rebuilt without it) and stays out of placement until its
  change is done. Meanwhile its GPUs leave the admission engine's capacity, as the live cycle reads it
  (``capacity_by_model`` counts no cordoned node); the figures keep the fleet's. The portal never evicts:
  only a node with no GPU pod is ever chosen, and a cordoned node takes no new pod, so no change is ever
  called off.

A pass runs only when it could do something: a change is in flight, or something is queued and a node of a
MIG-capable model has no GPU pod (otherwise the live planner answers nothing). Passes fall on multiples of
``INTERVAL_S``; they see the arm as its events left it at that moment (the queue, pods that ended), and a
node given back is placed on by the scheduling cycle that follows.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduling.benchmarks.lab.arrivals import Request
from scheduling.benchmarks.lab.model import Arm, LabModel
from scheduling.benchmarks.lab.portal_arm import PASS, PortalArm
from scheduling.engine.admission import WaitReason
from scheduling.planning import mig_layouts

INTERVAL_S = 15.0  # the live default (MIG_REPARTITION_INTERVAL_SECONDS)
MIN_WAIT_S = 60.0  # the live default (MIG_REPARTITION_MIN_WAIT_SECONDS)
COUNTED_KINDS = ("whole", "mig")  # the offering kinds whose queue the live loop reads


@dataclass
class _InFlight:
    change: mig_layouts.Change
    started: float  # the pass that chose it and cordoned the node
    applied: float | None = None  # the pass that set nvidia.com/mig.config


@dataclass(frozen=True)
class Repartition:
    """One change done: chosen at ``started``, the node back in placement at ``done``."""

    node: str
    old: str
    new: str
    started: float
    done: float
    reason: str


class DynamicArm(PortalArm):
    def __init__(self, model: LabModel, arm: Arm, requests: Sequence[Request], horizon: float | None = None) -> None:
        super().__init__(model, arm, requests, horizon)
        specs = [s for s in self.fleet.cluster.nodes if s.model is not None]
        self.gpu_nodes = [(s.name, s.model.key, s.gpu_count) for s in specs if s.model is not None]
        self.mig_nodes = [s.name for s in specs if s.model is not None and s.model.mig_capable]
        self.layouts = {s.name: s.mig_config or mig_layouts.DISABLED for s in specs}
        self.in_flight: _InFlight | None = None
        self.pass_due: float | None = None
        self.done: list[Repartition] = []

    # -- when passes run ---------------------------------------------------------------------------------

    def _may_act(self) -> bool:
        if self.in_flight is not None:
            return True
        return bool(self.queue) and any(self.on_node[n] <= 0 for n in self.mig_nodes)

    def _schedule(self, now: float) -> None:
        if self.pass_due is None and self._may_act():
            self.pass_due = (math.floor(now / INTERVAL_S) + 1) * INTERVAL_S
            self._push(self.pass_due, PASS, "", 0)

    def _cycle(self, now: float) -> None:
        super()._cycle(now)
        self._schedule(now)

    # -- one pass ----------------------------------------------------------------------------------------

    def _pass(self, t: float) -> None:
        self.pass_due = None
        if self.in_flight is not None:
            self._advance(t)
        elif self._may_act():
            demand = self.queued_demand(t)
            if demand:
                for change in mig_layouts.plan(self.node_layouts(), demand):
                    self.in_flight = _InFlight(change, t)
                    self._rebuild()  # cordoned: out of placement
        self._schedule(t)

    def queued_demand(self, t: float) -> dict[tuple[str, str], int]:
        """Units per (GPU model, device-plugin resource) that requests wait for, as the live loop counts
        them: whole-GPU and MIG offerings, queued at least ``MIN_WAIT_S``, not held by their team's quota."""
        demand: dict[tuple[str, str], int] = defaultdict(int)
        for wid, q in self.queue.items():
            o = q.offering
            if o.kind not in COUNTED_KINDS or not o.gpu_model or t - q.request.at < MIN_WAIT_S:
                continue
            if self.reasons.get(wid) is WaitReason.TEAM_QUOTA_FULL:
                continue
            demand[o.gpu_model, o.resource_name] += q.demand.count * q.demand.pods
        return dict(demand)

    def node_layouts(self) -> list[mig_layouts.NodeLayout]:
        """The planner's view of the GPU nodes, as the live ``node_layouts``: free units of those in
        placement; idle: in placement with no GPU pod."""
        capacity = self.fleet.capacity
        index = {n.name: i for i, n in enumerate(capacity.nodes)}
        out = []
        for name, model, count in self.gpu_nodes:
            i = index.get(name)  # None: cordoned
            free = {} if i is None else {r: int(units[i]) for r, units in capacity.free.items() if units[i] > 0}
            idle = i is not None and self.on_node[name] <= 0
            out.append(mig_layouts.NodeLayout(name, model, count, self.layouts[name], idle, free))
        return out

    def _advance(self, t: float) -> None:
        flight = self.in_flight
        assert flight is not None
        if flight.applied is None:  # drained (nothing can have landed on a cordoned node): apply
            flight.applied = t
            return
        if t < flight.applied + self.arm.mig_reconfigure_s:
            return  # mig.config.state still pending
        change = flight.change
        self.layouts[change.node] = change.new
        self.in_flight = None
        self._rebuild()
        self.repartitions += 1
        self.done.append(Repartition(change.node, change.old, change.new, flight.started, t, change.reason))
        self.dirty.add(change.model)  # the cycle that follows places on it

    def _rebuild(self) -> None:
        """The placement inventory for the nodes' current layouts, the node in flight cordoned, every
        running pod in its place again."""
        cordoned = {self.in_flight.change.node} if self.in_flight is not None else set()
        capacity = self.fleet.placement(self.layouts, cordoned)
        for run in self.running.values():
            run.held = [h for h in (capacity.occupy(pod) for pod in run.pods) if h is not None]
        self.fleet.capacity = capacity
        self.fleet.quotas = replace(self.fleet.quotas, capacity=capacity.by_model)
