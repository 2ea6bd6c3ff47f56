"""The admission decision: which queued workloads start, which running ones must make room, and why the
rest wait. The portal's scheduling cycle calls :func:`decide` live; the queue benchmark calls it in
simulated time. Pure: no I/O, no clock, inputs are never mutated.

Rules (the quota model is in :mod:`scheduling.engine.quota`):

- A workload is admitted when its team stays within ``guaranteed + borrow_limit`` (``guaranteed`` for
  interactive work, which never borrows), its department within its ceiling and its flavour within cluster
  capacity. It is *borrowing* when its team ends up above its guarantee.
- **Reclaim** (Kueue ``reclaimWithinCohort: Any``): a request that keeps its team within guarantee may
  preempt batch workloads of other teams that are above their own guarantee, any priority.
- **Priority within a team** (Kueue ``withinClusterQueue: LowerPriority``): a request may preempt its own
  team's batch workloads of strictly lower priority.
- Victims are taken lowest priority first, then youngest (least work lost), then put back if not needed
  after all, so the set is minimal in that order. Interactive workloads are never victims.
- Preemption has a notice period, so victims keep their units until the caller reports them gone. Their
  preemptor waits with reason ``preemption_pending`` and the units it needs are held for it for the rest
  of the cycle. Workloads already preempting are free victims for whoever is first in line next cycle.
- If quotas or capacity were lowered below what runs, batch workloads are preempted, in the same victim
  order, until everything is within limits again (for departments and the cluster, borrowers first).
- **Elastic growth** (``Workload.growth``: one worker of an elastic job beyond its minimum) is considered
  after every other request and only takes capacity that is free: it never plans preemption. It is the
  first victim, before any whole workload (a job shrinks before anything stops), and a team's own request
  of the same or higher priority may take back its own growth.

Queue order within a flavour: requests that fit their team's guarantee before requests that need to borrow
(as Kueue), then priority, then fair share (decayed usage / guarantee, updated as the cycle admits work, so
equal teams alternate), then age. The strategy is BestEffortFIFO by default: a workload that cannot start
does not hold back the ones behind it, so one big request never blocks a queue; the price is that a big
*borrowing* request may keep waiting while smaller ones take capacity as it frees (one within its team's
guarantee reclaims from borrowers instead). StrictFIFO is available: a team's blocked head then holds back
the rest of that team's queue in that flavour.

Member caps (a lead's limit on one member's share of the team's quota) are not part of this decision: they
are checked by the live cycle only (``scheduling/loops/cycle.py``, ``admit_one``, against the locked
``scheduling/quota/snapshot.py``), where a member over their cap waits with "Waiting for your share": such
requests are left out of the decision, and requests the cycle could not admit after all are dropped and the
rest decided again (``_admit_gpu_queue``), so no room is planned for what cannot start. The queue benchmark
has no members, so nothing here needs them.

Waiting workloads get a reason code and a sentence, and a position: their rank among the workloads waiting
for the flavour in the order the next cycle will take them.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from scheduling.engine.fairshare import share
from scheduling.engine.quota import Kind, QuotaConfig, Workload, fmt_units

# May this victim, of this relation to the requester, be preempted given what was taken from each team?
_Allowed = Callable[[Workload, int, Mapping[str, int]], bool]


class Strategy(StrEnum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class WaitReason(StrEnum):
    TEAM_QUOTA_FULL = "team_quota_full"
    NO_CAPACITY = "no_capacity"
    PREEMPTION_PENDING = "preemption_pending"
    BEHIND_HEAD = "behind_head"
    NEVER_FITS = "never_fits"


class PreemptReason(StrEnum):
    RECLAIM = "reclaim"  # a team takes its guarantee back from a borrower
    PRIORITY = "priority"  # a higher-priority request of the same team
    OVER_LIMIT = "over_limit"  # quota, cap or capacity was lowered below what runs


@dataclass(frozen=True, slots=True)
class Policy:
    strategy: Strategy = Strategy.BEST_EFFORT_FIFO
    reclaim: bool = True  # Kueue reclaimWithinCohort: Any (False: Never)
    within_team_priority: bool = True  # Kueue withinClusterQueue: LowerPriority (False: Never)


@dataclass(frozen=True)
class AdmissionState:
    """What runs now. ``decayed_usage`` by (team, flavour) is the fair-share input (see
    :mod:`scheduling.engine.fairshare`); when None, each team's current usage is used instead."""

    quotas: QuotaConfig
    admitted: Sequence[Workload]
    decayed_usage: Mapping[tuple[str, str], float] | None = None


@dataclass(frozen=True, slots=True)
class Admit:
    workload_id: str
    borrowing: bool


@dataclass(frozen=True, slots=True)
class Preempt:
    workload_id: str
    reason: PreemptReason
    for_workload: str | None
    message: str


@dataclass(frozen=True, slots=True)
class Wait:
    workload_id: str
    reason: WaitReason
    position: int  # 1-based among those waiting for the flavour, in the order the next cycle takes them
    message: str


@dataclass(frozen=True)
class Decisions:
    admit: tuple[Admit, ...]
    preempt: tuple[Preempt, ...]
    waiting: tuple[Wait, ...]


DEFAULT_POLICY = Policy()


def decide(state: AdmissionState, queue: Iterable[Workload], policy: Policy = DEFAULT_POLICY) -> Decisions:
    """One scheduling cycle over ``queue`` (the pending workloads, any order) against ``state``."""
    admitted_by_flavour: dict[str, list[Workload]] = defaultdict(list)
    pending_by_flavour: dict[str, list[Workload]] = defaultdict(list)
    for w in state.admitted:
        admitted_by_flavour[w.flavour].append(w)
    for w in queue:
        pending_by_flavour[w.flavour].append(w)
    admit: list[Admit] = []
    preempt: list[Preempt] = []
    waiting: list[Wait] = []
    # Flavours never share capacity, so each is a cycle of its own.
    for flavour in sorted(admitted_by_flavour.keys() | pending_by_flavour.keys()):
        cycle = _FlavourCycle(state, flavour, admitted_by_flavour[flavour], policy)
        cycle.enforce_limits()
        cycle.admit_queue(pending_by_flavour[flavour])
        admit += cycle.admit
        preempt += cycle.preempt
        waiting += cycle.waiting
    return Decisions(tuple(admit), tuple(preempt), tuple(waiting))


_OWN, _DEPT, _OTHER = 0, 1, 2  # how a victim relates to the requester: which limits freeing it helps
_NONE = -(1 << 62)  # a need that is never binding


@dataclass(slots=True)
class _Team:
    """One team's quota in this flavour, looked up once per cycle, and its fair share as the cycle goes."""

    name: str
    dept: str
    guaranteed: int
    limit_batch: int
    ceiling: int
    usage: float  # decayed (or current) usage plus what this cycle admitted or reserved
    share: float


class _FlavourCycle:
    """Mutable bookkeeping of one flavour during one :func:`decide` call.

    Two ledgers: ``now`` is what is held at this instant (admissions must fit it: victims have not left
    yet); ``fut`` is what will be held once claimed victims are gone and reserved preemptors start
    (nobody may take what a preemptor waits for). Admissions go into both.
    """

    def __init__(self, state: AdmissionState, flavour: str, admitted: list[Workload], policy: Policy) -> None:
        self.q = state.quotas
        self.flavour = flavour
        self.policy = policy
        self.capacity = self.q.capacity_of(flavour)
        self.now_team: dict[str, int] = defaultdict(int)
        for w in admitted:
            self.now_team[w.team] += w.units
        usage = state.decayed_usage
        self.base_usage: dict[str, float] = (
            {t: float(u) for t, u in self.now_team.items()}
            if usage is None
            else {t: u for (t, f), u in usage.items() if f == flavour}
        )
        self.teams: dict[str, _Team] = {}
        self.now_dept: dict[str, int] = defaultdict(int)
        for name, units in self.now_team.items():
            self.now_dept[self.team(name).dept] += units
        self.now_total = sum(self.now_team.values())
        self.fut_team = defaultdict(int, self.now_team)
        self.fut_dept = defaultdict(int, self.now_dept)
        self.fut_total = self.now_total
        # Victim order: elastic growth first, then lowest priority, then youngest (least work lost), id for
        # determinism.
        batch = sorted(
            (w for w in admitted if w.preemptible),
            key=lambda w: (not w.growth, w.priority, -(w.admitted_at or 0.0), w.id),
        )
        self.leaving = [w for w in batch if w.preempting]
        self.candidates = [w for w in batch if not w.preempting]
        self.team_candidates: dict[str, list[Workload]] = defaultdict(list)
        for w in self.candidates:
            self.team_candidates[w.team].append(w)
        self.claimed: set[str] = set()
        self.stale = 0  # claimed workloads still in the candidate lists
        self.failed: dict[tuple[str, Kind, int], int] = {}  # smallest request that found no room
        self.messages: dict[tuple[object, ...], tuple[WaitReason, str]] = {}
        self.admit: list[Admit] = []
        self.preempt: list[Preempt] = []
        self.waits: list[tuple[Workload, WaitReason, str]] = []
        self.waiting: list[Wait] = []

    def team(self, name: str) -> _Team:
        t = self.teams.get(name)
        if t is None:
            quota = self.q.quota(name, self.flavour)
            dept = self.q.department(name)
            ceiling = self.q.ceiling(dept, self.flavour)
            t = _Team(name, dept, quota.guaranteed, quota.limit(Kind.BATCH), ceiling, 0.0, 0.0)
            self.teams[name] = t
            self._use(t, self.base_usage.get(name, 0.0))
        return t

    def _use(self, t: _Team, units: float) -> None:
        t.usage += units
        t.share = share(t.usage, t.guaranteed)

    # -- ledgers ---------------------------------------------------------------------------------------

    def _relation(self, victim: Workload, team: str, dept: str) -> int:
        if victim.team == team:
            return _OWN
        return _DEPT if self.teams[victim.team].dept == dept else _OTHER

    def _claim(self, victim: Workload, reason: PreemptReason, for_workload: str | None, message: str) -> None:
        self.claimed.add(victim.id)
        self.stale += 1
        self.fut_team[victim.team] -= victim.units
        self.fut_dept[self.team(victim.team).dept] -= victim.units
        self.fut_total -= victim.units
        if not victim.preempting:
            self.preempt.append(Preempt(victim.id, reason, for_workload, message))

    def _borrowing(self, v: Workload) -> bool:
        return self.fut_team[v.team] > self.team(v.team).guaranteed

    # -- limits lowered below usage --------------------------------------------------------------------

    def enforce_limits(self) -> None:
        f = self.flavour
        for name in sorted(self.fut_team):
            limit = self.team(name).limit_batch
            if self.fut_team[name] > limit:
                pool = [v for v in self.leaving if v.team == name] + self.team_candidates[name]
                message = f"team {name} may now hold at most {fmt_units(limit)} {f}"
                self._shed(pool, self.fut_team[name] - limit, None, message)
        for dept in sorted(self.fut_dept):
            ceiling = self.q.ceiling(dept, f)
            if self.fut_dept[dept] <= ceiling:
                continue
            pool = [v for v in self.leaving + self.candidates if self.team(v.team).dept == dept]
            message = f"department {dept} may now hold at most {fmt_units(ceiling)} {f}"
            self._shed(pool, self.fut_dept[dept] - ceiling, self._borrowing, message)
            self._shed(pool, self.fut_dept[dept] - ceiling, None, message)
        message = f"the cluster now has {fmt_units(self.capacity)} {f}"
        for eligible in (self._borrowing, None):
            self._shed(self.leaving + self.candidates, self.fut_total - self.capacity, eligible, message)

    def _shed(
        self, pool: list[Workload], excess: int, eligible: Callable[[Workload], bool] | None, message: str
    ) -> None:
        """Preempt from ``pool`` (all within the over-full scope) until ``excess`` units are freed."""
        for v in pool:
            if excess <= 0:
                return
            if v.id not in self.claimed and (v.preempting or eligible is None or eligible(v)):
                self._claim(v, PreemptReason.OVER_LIMIT, None, message)
                excess -= v.units

    # -- the queue -------------------------------------------------------------------------------------

    def _key(self, w: Workload, t: _Team) -> tuple[bool, bool, int, float, float, str]:
        return (w.growth, self.fut_team[t.name] + w.units > t.guaranteed, -w.priority, t.share, w.created_at, w.id)

    def admit_queue(self, pending: list[Workload]) -> None:
        by_team: dict[str, list[Workload]] = defaultdict(list)
        for w in pending:
            by_team[w.team].append(w)
        heads = []
        for name, items in by_team.items():
            # pop() takes the head; elastic growth comes last
            items.sort(key=lambda w: (w.growth, -w.priority, w.created_at, w.id), reverse=True)
            t = self.team(name)
            heads.append((self._key(items[-1], t), t, items))
        heapq.heapify(heads)
        strict = self.policy.strategy is Strategy.STRICT_FIFO
        while heads:
            _, t, items = heads[0]
            w = items.pop()
            if not self._consider(w, t):
                _, reason, message = self.waits[-1]
                if strict:
                    for rest in reversed(items):
                        self._wait(rest, WaitReason.BEHIND_HEAD, f"waiting behind an earlier request of team {t.name}")
                    items.clear()
                elif reason is WaitReason.TEAM_QUOTA_FULL or reason is WaitReason.NO_CAPACITY:
                    # Nothing changed, so the team's next requests of the same kind and priority, no smaller,
                    # find no room either (the failure memo skips their search): settle them in one go.
                    while items and _alike(items[-1], w):
                        self._wait(items.pop(), reason, message)
            if items:
                # Only the team just served needs a new key: its share and usage changed, no one else's.
                heapq.heapreplace(heads, (self._key(items[-1], t), t, items))
            else:
                heapq.heappop(heads)
        # Positions: the order the next cycle will take the waiting workloads in.
        self.waits.sort(key=lambda e: self._key(e[0], self.teams[e[0].team]))
        self.waiting = [Wait(w.id, reason, i, message) for i, (w, reason, message) in enumerate(self.waits, 1)]

    def _wait(self, w: Workload, reason: WaitReason, message: str) -> None:
        self.waits.append((w, reason, message))

    def _consider(self, w: Workload, t: _Team) -> bool:
        """Admit ``w`` if it fits; otherwise plan preemption or say why it waits. True when admitted."""
        name, dept, u = t.name, t.dept, w.units
        limit = t.limit_batch if w.kind is Kind.BATCH else t.guaranteed
        if u > limit or u > t.ceiling or u > self.capacity:
            self._wait(w, WaitReason.NEVER_FITS, self._never_fits(w, limit, t.ceiling))
            return False
        held_team = max(self.now_team[name], self.fut_team[name])
        held_dept = max(self.now_dept[dept], self.fut_dept[dept])
        held_total = max(self.now_total, self.fut_total)
        if held_team + u <= limit and held_dept + u <= t.ceiling and held_total + u <= self.capacity:
            self.admit.append(Admit(w.id, held_team + u > t.guaranteed))
            self.now_team[name] += u
            self.fut_team[name] += u
            self.now_dept[dept] += u
            self.fut_dept[dept] += u
            self.now_total += u
            self.fut_total += u
            self._use(t, u)
            return True

        if w.growth:  # only what is free now: an elastic job never makes anyone stop to grow
            self._why(w, t, limit, held_team, held_dept, held_total)
            return False
        memo = (name, w.kind, w.priority)
        plan = None if u >= self.failed.get(memo, 1 << 62) else self._plan(w, t, limit)
        if plan is None:
            self.failed[memo] = min(u, self.failed.get(memo, u))
            self._why(w, t, limit, held_team, held_dept, held_total)
            return False

        for v in plan:
            reason = PreemptReason.PRIORITY if v.team == name else PreemptReason.RECLAIM
            self._claim(v, reason, w.id, self._victim_message(w, v, reason))
        if plan:
            self.failed.clear()  # victims may free more than w needs; earlier failures may fit now
        # Hold what w will need once its victims are gone.
        self.fut_team[name] += u
        self.fut_dept[dept] += u
        self.fut_total += u
        self._use(t, u)
        whom = f"{len(plan)} workload{'s' if len(plan) > 1 else ''}" if plan else "workloads"
        if plan and all(v.team == name for v in plan):
            whom = f"{whom} of lower priority in team {name}"
        self._wait(w, WaitReason.PREEMPTION_PENDING, f"waiting for {whom} to stop and hand back {self.flavour}")
        return False

    def _why(self, w: Workload, t: _Team, limit: int, held_team: int, held_dept: int, held_total: int) -> None:
        """Wait with the first limit ``w`` runs into; messages are shared while the figures are the same."""
        u = w.units
        if held_team + u > limit:
            key: tuple[object, ...] = (t.name, w.kind, held_team)
        elif held_dept + u > t.ceiling:
            key = (t.dept, held_dept)
        else:
            key = (held_total,)
        said = self.messages.get(key)
        if said is None:
            f = self.flavour
            if len(key) == 3:
                said = WaitReason.TEAM_QUOTA_FULL, self._team_full(w, held_team, limit)
            elif len(key) == 2:
                where = f"department {t.dept} holds {fmt_units(held_dept)} of {fmt_units(t.ceiling)}"
                said = WaitReason.NO_CAPACITY, f"no free {f}: {where}"
            else:
                where = f"the cluster holds {fmt_units(held_total)} of {fmt_units(self.capacity)}"
                said = WaitReason.NO_CAPACITY, f"no free {f}: {where}"
            self.messages[key] = said
        self._wait(w, *said)

    # -- choosing victims ------------------------------------------------------------------------------

    def _plan(self, w: Workload, t: _Team, limit: int) -> list[Workload] | None:
        """Victims that make room for ``w`` in the future ledger, or None when no allowed set does.

        ``needs`` = [team, department, cluster, team-above-guarantee] units still to free; the last binds
        only when reclaiming (a request may take from other teams only if it ends up within guarantee).
        """
        if self.stale > 32:
            # Victims come from the front of the lists: drop the claimed ones so scans do not wade through them.
            self.candidates = [v for v in self.candidates if v.id not in self.claimed]
            for name, pool in self.team_candidates.items():
                self.team_candidates[name] = [v for v in pool if v.id not in self.claimed]
            self.stale = 0
        dept, u = t.dept, w.units
        base = [
            self.fut_team[t.name] + u - limit,
            self.fut_dept[dept] + u - t.ceiling,
            self.fut_total + u - self.capacity,
            _NONE,
        ]
        # Workloads already told to stop cost nothing more: take those first.
        taken: list[Workload] = []
        taken_from: dict[str, int] = defaultdict(int)
        if self._greedy(w, dept, self.leaving, base, taken, taken_from, _anyone):
            return self._minimal(w, dept, taken, base)

        def lower(v: Workload, rel: int, taken_from: Mapping[str, int]) -> bool:
            # An elastic job's growth makes way for its own team's work of the same priority too.
            return v.priority < w.priority or (v.growth and v.priority == w.priority)

        own = self.team_candidates[t.name]
        reclaim_needs = [*base[:3], self.fut_team[t.name] + u - t.guaranteed]
        if self.policy.reclaim and self._remaining(w, dept, reclaim_needs, taken)[3] <= 0:
            plan = self._try(w, dept, reclaim_needs, taken, taken_from, self._from_borrower, self.candidates)
            if plan is not None:
                return plan
        if self.policy.within_team_priority:
            plan = self._try(w, dept, base, taken, taken_from, lower, own)
            if plan is not None:
                return plan
            if self.policy.reclaim:
                # Own lower-priority work makes way until the team is within guarantee, then reclaim.
                only_guarantee = [_NONE, _NONE, _NONE, reclaim_needs[3]]
                taken, taken_from = list(taken), defaultdict(int, taken_from)
                remaining = self._remaining(w, dept, only_guarantee, taken)
                if self._greedy(w, dept, own, remaining, taken, taken_from, lower):
                    return self._try(w, dept, reclaim_needs, taken, taken_from, self._from_borrower, self.candidates)
        return None

    def _from_borrower(self, v: Workload, rel: int, taken_from: Mapping[str, int]) -> bool:
        """Reclaim may take from another team only while that team is above its guarantee."""
        return rel != _OWN and self.fut_team[v.team] - taken_from.get(v.team, 0) > self.team(v.team).guaranteed

    def _try(
        self,
        w: Workload,
        dept: str,
        needs: list[int],
        taken: list[Workload],
        taken_from: dict[str, int],
        allowed: _Allowed,
        pool: list[Workload],
    ) -> list[Workload] | None:
        """Victims from ``pool`` added to ``taken`` (itself left as is) until ``needs`` are met, made
        minimal; None when the pool does not suffice."""
        taken, taken_from = list(taken), defaultdict(int, taken_from)
        remaining = self._remaining(w, dept, needs, taken)
        if self._greedy(w, dept, pool, remaining, taken, taken_from, allowed):
            return self._minimal(w, dept, taken, needs)
        return None

    def _remaining(self, w: Workload, dept: str, needs: list[int], taken: list[Workload]) -> list[int]:
        out = list(needs)
        for v in taken:
            _free(out, self._relation(v, w.team, dept), v.units)
        return out

    def _greedy(
        self,
        w: Workload,
        dept: str,
        pool: list[Workload],
        needs: list[int],
        taken: list[Workload],
        taken_from: dict[str, int],
        allowed: _Allowed,
    ) -> bool:
        """Take victims from ``pool`` in order while some need is unmet; True when all are met."""
        needs = list(needs)
        if max(needs) <= 0:
            return True
        chosen = {v.id for v in taken}
        for v in pool:
            if v.id in self.claimed or v.id in chosen:
                continue
            rel = self._relation(v, w.team, dept)
            if not _helps(needs, rel) or not allowed(v, rel, taken_from):
                continue
            taken.append(v)
            taken_from[v.team] += v.units
            _free(needs, rel, v.units)
            if max(needs) <= 0:
                return True
        return False

    def _minimal(self, w: Workload, dept: str, taken: list[Workload], needs: list[int]) -> list[Workload]:
        """Put back victims, most recently chosen first, whose units are not needed after all."""
        left = self._remaining(w, dept, needs, taken)
        keep: list[Workload] = []
        for v in reversed(taken):
            trial = list(left)
            _free(trial, self._relation(v, w.team, dept), -v.units)
            if max(trial) <= 0:
                left = trial
            else:
                keep.append(v)
        keep.reverse()
        return keep

    # -- words -----------------------------------------------------------------------------------------

    def _never_fits(self, w: Workload, limit: int, ceiling: int) -> str:
        f, asks = self.flavour, f"asks for {fmt_units(w.units)} {self.flavour}"
        quota = self.q.quota(w.team, f)
        if w.units > limit:
            if limit == 0:
                return f"team {w.team} has no {f} quota" + (
                    "" if w.kind is Kind.BATCH or quota.limit(Kind.BATCH) == 0 else " for interactive work"
                )
            what = "guaranteed" if w.kind is Kind.INTERACTIVE else "guaranteed plus borrowable"
            return f"{asks}, more than team {w.team}'s {what} {fmt_units(limit)}"
        if w.units > ceiling:
            return f"{asks}, more than department {self.q.department(w.team)} may hold ({fmt_units(ceiling)})"
        return f"{asks}, more than the cluster has ({fmt_units(self.capacity)})"

    def _team_full(self, w: Workload, held: int, limit: int) -> str:
        f = self.flavour
        if w.kind is Kind.INTERACTIVE:
            return (
                f"team quota full: interactive work must fit the guaranteed {fmt_units(limit)} {f}; "
                f"team {w.team} holds {fmt_units(held)}"
            )
        return f"team quota full: team {w.team} holds {fmt_units(held)} of its {fmt_units(limit)} {f}"

    def _victim_message(self, w: Workload, victim: Workload, reason: PreemptReason) -> str:
        if reason is PreemptReason.PRIORITY and victim.growth and victim.priority == w.priority:
            return f"another request of team {w.team} needs its {self.flavour}; this worker was extra"
        if reason is PreemptReason.RECLAIM:
            return f"team {w.team} needs its guaranteed {self.flavour} back; this workload was borrowing it"
        return f"a higher-priority request of team {w.team} needs its {self.flavour}"


def _alike(v: Workload, w: Workload) -> bool:
    return v.kind is w.kind and v.priority == w.priority and v.units >= w.units


def _anyone(v: Workload, rel: int, taken_from: Mapping[str, int]) -> bool:
    return True


def _helps(needs: list[int], rel: int) -> bool:
    if rel == _OWN:
        return max(needs) > 0
    if rel == _DEPT:
        return needs[1] > 0 or needs[2] > 0
    return needs[2] > 0


def _free(needs: list[int], rel: int, units: int) -> None:
    """Freeing ``units`` held by a victim of relation ``rel`` lowers the needs of the limits it counts in."""
    if rel == _OWN:
        needs[0] -= units
        needs[3] -= units
    if rel <= _DEPT:
        needs[1] -= units
    needs[2] -= units
