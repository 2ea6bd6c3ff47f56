"""The scheduling cycle: admit queued workspaces that fit their team's quota and the cluster.

One cycle at a time (``single_flight``). The admission engine orders the queue and decides who is
admitted, who waits and which borrowers must make room; the placement engine (``inventory.Capacity``)
chooses the node of each admitted workspace, which is pinned there. Each admission row-locks the team's
quota, so admissions racing from several processes cannot overrun it. A request that cannot start (over its
member's cap, or refused by placement after the engine chose it) never holds back the others: it is left out
and the rest decided again.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from portal.queue import enqueue_coalesced, mark_started
from scheduling.demand import demand_of, is_gpu
from scheduling.engine.admission import AdmissionState, Wait, WaitReason, decide
from scheduling.engine.quota import QuotaConfig, Workload
from scheduling.inventory import Capacity
from scheduling.kube.calls import Kube
from scheduling.live_capacity import cluster_capacity
from scheduling.loops import elastic, passes, tasknames
from scheduling.loops.cycle_rows import cycle_rows, shape_of
from scheduling.loops.decisions import Decisions
from scheduling.loops.locks import single_flight
from scheduling.loops.observe import JOB_DONE
from scheduling.loops.provisioning import request_teardowns
from scheduling.quota import fair_share as decayed_usage
from scheduling.quota.rules import may_borrow, quota_config
from scheduling.quota.snapshot import QuotaSnapshot
from workspaces.models import GpuOffering, Workspace
from workspaces.transitions import Move, State, transition_many

log = logging.getLogger(__name__)
AGAIN = "scheduling-cycle:again"  # cache key: a cycle was asked for while one ran
MAX_PASSES = 3  # of the admission engine per cycle, when requests it chose could not be admitted


def _fmt(amount: Decimal) -> str:
    return f"{amount.normalize():f}"


def admit_one(
    workspace: Workspace,
    capacity: Capacity,
    *,
    borrowing: bool = False,
    quotas: QuotaSnapshot | None = None,
    decisions: Decisions | None = None,
) -> bool:
    """Admit ``workspace`` if its team's quota and the cluster have room; else record why it waits.

    The admission engine decided in memory; this is the authoritative check against ``quotas``, read
    under the quota rows' locks, so that admissions racing from several processes cannot overrun a
    team's limit. The decision goes into ``decisions``, written when the cycle ends; without them it is
    written at once, and without a snapshot its team's quota is read under the lock in a transaction of
    its own.
    """
    if quotas is None or decisions is None:
        with transaction.atomic():
            own = quotas or QuotaSnapshot.read([workspace.team_id], lock=True)
            mine = Decisions()
            admit_one(workspace, capacity, borrowing=borrowing, quotas=own, decisions=mine)
            return mine.write() == 1
    offering = workspace.offering
    if offering.kind != GpuOffering.Kind.CPU:
        ceiling = quotas.ceiling(workspace.team_id, offering.flavour, borrowing=borrowing)
        if quotas.in_use(workspace.team_id, offering.flavour) + workspace.gpu_equivalents > ceiling:
            decisions.wait(workspace, _quota_message(workspace, quotas, borrowing=borrowing))
            return False
        over_cap = _over_member_cap(workspace, quotas)
        if over_cap:
            decisions.wait(workspace, over_cap)
            return False
    demand = demand_of(workspace)
    nodes = capacity.place(demand)
    if nodes is None:
        decisions.wait(workspace, f"Waiting for a free {offering.display_name}: {capacity.explain(demand)}")
        return False
    how = "borrowing idle capacity beyond" if borrowing else "within"
    # One node for every pod: pin them there (required node affinity; kube-scheduler still checks). Never an
    # elastic job: the workers it grows by go wherever there is room.
    pinned = nodes[0] if len(set(nodes)) == 1 and workspace.max_workers is None else ""
    where = f"placed on {pinned}" if pinned else f"placed on {', '.join(sorted(set(nodes)))}"
    reason = f"Admitted {how} {workspace.team.name}'s quota; {where}."
    decisions.admit(workspace, reason, borrowing=borrowing, pinned_node=pinned)
    quotas.take(workspace)
    return True


def _over_member_cap(workspace: Workspace, quotas: QuotaSnapshot) -> str:
    """Why ``workspace`` waits for its owner's share of the team's quota; empty when the cap allows it."""
    flavour = workspace.offering.flavour
    capped = quotas.member(workspace.team_id, workspace.owner_id, flavour)
    if not capped or capped[1] + workspace.gpu_equivalents <= capped[0]:
        return ""
    return (
        f"Waiting for your share: your lead caps you at {_fmt(capped[0])} {flavour} GPU-equivalents, "
        f"you use {_fmt(capped[1])} and this needs {_fmt(workspace.gpu_equivalents)}."
    )


def expire_notices(now: datetime) -> int:
    """Stop borrowers whose notice ran out, and queue them again: in a few statements however many."""
    due: dict[str, list[Workspace]] = {}
    for workspace in Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES, preempt_at__lte=now):
        due.setdefault(workspace.state, []).append(workspace)
    reason = "Preempted: the capacity it borrowed was needed for another team's guarantee."
    stopped: list[Workspace] = []
    with transaction.atomic():
        for state, workspaces in due.items():  # each only if still in the state it was read in
            moves = [Move(workspace, reason, {}) for workspace in workspaces]
            stopped += transition_many(moves, State.PREEMPTED, expected=[state], source="scheduler")
        # Teardown queues it again once its pods are gone (so the new pods never meet the old ones).
        request_teardowns([workspace.pk for workspace in stopped], delete_volume=False)
    return len(stopped)


QUOTA_WAIT = "Waiting for team quota"  # how a reason starts when the team's quota holds the request back


def _quota_message(workspace: Workspace, quotas: QuotaSnapshot, *, borrowing: bool) -> str:
    offering = workspace.offering
    ceiling = quotas.ceiling(workspace.team_id, offering.flavour, borrowing=borrowing)
    in_use = quotas.in_use(workspace.team_id, offering.flavour)
    kind = "guaranteed and borrowable" if borrowing else "guaranteed"
    return (
        f"{QUOTA_WAIT}: {workspace.team.name} uses {_fmt(in_use)} of its {_fmt(ceiling)} {kind} "
        f"{offering.flavour} GPU-equivalents and this needs {_fmt(workspace.gpu_equivalents)}."
    )


def _wait_message(workspace: Workspace, wait: Wait, capacity: Capacity, quotas: QuotaSnapshot) -> str:
    """The engine's reason, in the words a researcher reads on the queue page."""
    if wait.reason == WaitReason.TEAM_QUOTA_FULL:
        return _quota_message(workspace, quotas, borrowing=may_borrow(workspace.kind))
    if wait.reason == WaitReason.NO_CAPACITY:
        # One gist for both ways of saying it, so that a request whose reason alternates between them from
        # cycle to cycle (a full department whose nodes are also full) gets no timeline event each time.
        demand = demand_of(workspace)
        if capacity.place_would_fail(demand):
            # Which nodes lack what, as kube-scheduler says it, rather than only the GPU-model total.
            return f"Waiting for a free {workspace.offering.display_name}: {capacity.explain(demand)}"
        return f"Waiting for a free {workspace.offering.display_name}: {wait.message}."
    if wait.reason == WaitReason.PREEMPTION_PENDING:
        return f"Waiting for a borrower to leave: {wait.message}."
    return f"Waiting: {wait.message}."


def _admit_gpu_queue(
    queue: list[Workspace],
    held: list[Workload],
    growth: list[Workload],
    config: QuotaConfig,
    usage: Mapping[tuple[str, str], float],
    capacity: Capacity,
    quotas: QuotaSnapshot,
    by_id: dict[str, Workspace],
    now: datetime,
    decisions: Decisions,
    sizes: elastic.ElasticDecisions,
) -> None:
    """Decide, admit what the engine chose, and decide again without what could not be admitted after all.

    The engine does not know member caps or node fragmentation, so ``admit_one`` can refuse what it chose.
    Left in, such a request would hold its units in the engine's ledger: the requests behind it would wait
    for room that is in fact free, with reasons that count it (a capped head blocking the queue). So each
    refused request drops out and the rest are decided again against what was really admitted, a few
    passes at most; the waiting reasons are those of the last pass, which saw the state the cycle ends in.

    ``growth`` is what running elastic jobs ask for beyond their size (``scheduling/loops/elastic.py``): the
    engine takes it last and only into idle capacity, and takes held growth back first; such decisions go
    into ``sizes``, and growth that waits gets no reason (the job runs).
    """
    held = list(held)
    pending = []
    for workspace in queue:
        over_cap = _over_member_cap(workspace, quotas)
        if over_cap:  # cannot start whatever the rest of the queue does: no room is planned for it
            decisions.wait(workspace, over_cap)
        else:
            pending.append(workspace)
    workload = cycle_rows().workload
    queued = {w.id: workload(w) for w in pending}  # once: the passes see them unchanged
    for _ in range(MAX_PASSES):
        decided = decide(AdmissionState(config, held, usage), [queued[w.id] for w in pending] + growth)
        for preempt in decided.preempt:
            grown = elastic.growth_of(preempt.workload_id)
            if grown:  # an elastic job shrinks, with notice, instead of stopping
                sizes.shrink(by_id[grown[0]], preempt.message)
            else:
                decisions.notice(by_id[preempt.workload_id], preempt.message, now)
        noticed = {preempt.workload_id for preempt in decided.preempt}
        held = [replace(w, preempting=True) if w.id in noticed else w for w in held]  # not chosen twice
        refused = False
        asked = {w.id: w for w in growth}
        for admit in decided.admit:
            grown = elastic.growth_of(admit.workload_id)
            if grown:
                ask = asked.pop(admit.workload_id)
                if sizes.grow(by_id[grown[0]], capacity):
                    held.append(replace(ask, admitted_at=now.timestamp(), borrowing=admit.borrowing))
                continue  # growth that placement refused waits for the next cycle; it holds nothing back
            workspace = by_id[admit.workload_id]
            if admit_one(workspace, capacity, borrowing=admit.borrowing, quotas=quotas, decisions=decisions):
                # As the next pass must see it: admitted now (written when the cycle ends), maybe borrowing.
                at = decisions.admissions[workspace.pk].fields["admitted_at"].timestamp()
                held.append(replace(workload(workspace), admitted_at=at, borrowing=admit.borrowing))
            else:
                refused = True
        growth = list(asked.values())
        waiting = [by_id[wait.workload_id] for wait in decided.waiting if not elastic.growth_of(wait.workload_id)]
        if not (refused and waiting):
            break
        pending = waiting
    # Thousands wait for the same few reasons: each message is made once per shape of request. Only the
    # first few of each team (in the order the next cycle takes them) get the live reason, whose figures
    # change with every admission; the rest say they are in line, in words that stay the same until they
    # near the front, so a deep queue is not rewritten (nor its timeline noted) every cycle.
    messages: dict[tuple[object, ...], str] = {}
    ahead: Counter[int] = Counter()
    explained = settings.QUEUE_EXPLAINED_PER_TEAM
    for wait in decided.waiting:
        if elastic.growth_of(wait.workload_id):
            continue
        w = by_id[wait.workload_id]
        ahead[w.team_id] += 1
        if ahead[w.team_id] > explained:
            decisions.wait(w, in_line_message(w.team.name, explained))
            continue
        key = (wait.reason, wait.message, w.team_id, w.offering_id, w.kind, w.gpu_count, w.workers, w.cpu_millis,
               w.memory_mib, w.gpu_equivalents)  # fmt: skip
        if key not in messages:
            messages[key] = _wait_message(w, wait, capacity, quotas)
        decisions.wait(w, messages[key])


def in_line_message(team: str, ahead: int) -> str:
    """The reason of a request behind the first ``ahead`` waiting ones of its team: the same words until it
    is among them."""
    return (
        f"Waiting in line: at least {ahead} of {team}'s requests are ahead of it and wait too; it gets its own "
        "reason when it nears the front (the queue page shows its place)."
    )


def _ran_to_end(workspace: Workspace, capacity: Capacity) -> bool:
    """Every worker of a training job succeeded and none is left on a node, as the watches see it: the Job
    is complete (Indexed, one pod per worker, no retries), though the reconcile pass has not read it yet.

    Notebooks are left to the pass (a resumed one gets a new pod while the old one's deletion may still be
    on its way), and so are elastic jobs (their size changes as they run)."""
    return (
        workspace.kind == Workspace.Kind.JOB
        and workspace.max_workers is None
        and workspace.state in (State.ADMITTED, State.PROVISIONING, State.RUNNING)
        and workspace.pk not in capacity.bound
        and capacity.succeeded_pods[workspace.pk] >= workspace.workers
    )


def _write_ends(active: list[Workspace], capacity: Capacity) -> int:
    """Write the ends of the jobs that ran to completion since the reconcile pass last looked: their quota
    and GPUs are free now, not when the pass next lists the cluster (up to a few seconds on a busy one).
    Compare-and-set, like the pass's own moves: whichever writes first wins. Answers how many moved."""
    ended: dict[str, list[Move]] = {}
    for workspace in active:
        if _ran_to_end(workspace, capacity):
            ended.setdefault(workspace.state, []).append(Move(workspace, JOB_DONE, {}))
    if not ended:
        return 0
    with transaction.atomic():
        return sum(
            len(transition_many(moves, State.SUCCEEDED, expected=[state], source="scheduler"))
            for state, moves in ended.items()
        )


def run_cycle(kube: Kube) -> int:
    """Admit what fits; returns how many workspaces were admitted (0 if another cycle is running).

    A cycle asked for while another runs is not lost: the running one, once done, asks for one more, after
    ``SCHEDULING_MIN_GAP_SECONDS``. Meanwhile the request's pending mark stands, so that what is asked for
    during a cycle adds up to that one further cycle, not to a task each that only finds the lock taken."""
    count = _try_cycle(kube)
    if count is None:
        cache.set(AGAIN, True, timeout=60)
        count = _try_cycle(kube)  # the running cycle may have ended before the flag was set: then run it here
        if count is None:
            log.info("scheduling cycle skipped: another one is running, and asks for one more when done")
            return 0
    if cache.delete(AGAIN):
        # Releases come one by one; a gap lets the next cycle take up several of them together.
        mark_started(tasknames.RUN_CYCLE)
        enqueue_coalesced(tasknames.RUN_CYCLE, countdown=settings.SCHEDULING_MIN_GAP_SECONDS or None)
    return count


def _try_cycle(kube: Kube) -> int | None:
    """One cycle if no other runs (None if one does)."""
    with single_flight("scheduling-cycle") as acquired:
        if not acquired:
            return None
        mark_started(tasknames.RUN_CYCLE)  # requests from now on ask for a further cycle
        cache.delete(AGAIN)  # this cycle reads everything asked for until now
        with passes.timed("scheduling_cycle"):
            return _cycle(kube)


def _cycle(kube: Kube) -> int:
    """One cycle, under the lock."""
    now = timezone.now()
    expire_notices(now)
    elastic.expire_shrinks(now)
    rows = cycle_rows()
    per_shape = settings.QUEUE_CONSIDERED_PER_SHAPE
    loaded = rows.load(Workspace.ACTIVE_STATES, per_shape)
    active, queued = loaded.active, loaded.queued  # the queue's heads, oldest first

    def held_now() -> list[Workload]:  # what the active GPU workspaces hold
        return [held for w in active if is_gpu(w) and w.is_active for held in elastic.held(w, rows.workload(w))]

    admitted = held_now()
    usage = decayed_usage.advance(admitted, now)  # every cycle, so history accrues while the queue is empty
    growth = [ask for w in active if is_gpu(w) for ask in elastic.asks(w, rows.workload(w))]
    if not queued and not growth:
        return 0
    capacity = cluster_capacity(kube)
    if _write_ends(active, capacity):
        admitted = held_now()  # without the jobs whose end was just written
    # Admitted workspaces whose pods are not on a node yet hold their room: on their pinned node, or
    # wherever the engine would put them (unpinned after the cluster disagreed, or spread jobs).
    for pending in active:
        if pending.state in (State.ADMITTED, State.PROVISIONING) and pending.pk not in capacity.bound:
            demand = demand_of(pending)
            if not (pending.pinned_node and capacity.reserve(demand, pending.pinned_node)):
                capacity.place(demand)
        elif (
            pending.state == State.RUNNING
            and pending.max_workers is not None
            and capacity.bound_pods[pending.pk] < pending.workers
        ):
            # The workers a running elastic job just grew by, until their pods are bound.
            capacity.place(replace(demand_of(pending), pods=pending.workers - capacity.bound_pods[pending.pk]))
    config = quota_config(capacity.by_model)
    by_id = {str(w.pk): w for w in [*queued, *active]}
    # One transaction: the quota rows of the queued teams stay locked while the cycle admits against
    # the quotas, and the provisioning tasks go out when it commits.
    with transaction.atomic():
        quotas = QuotaSnapshot.read({w.team_id for w in queued}, lock=True)
        decisions = Decisions()
        sizes = elastic.ElasticDecisions()
        gpu_queue = [w for w in queued if is_gpu(w)]
        _admit_gpu_queue(gpu_queue, admitted, growth, config, usage, capacity, quotas, by_id, now, decisions, sizes)
        for workspace in queued:
            if not is_gpu(workspace):
                admit_one(workspace, capacity, quotas=quotas, decisions=decisions)
        for workspace in loaded.unseen:  # at least ``per_shape`` requests of its shape are ahead of it
            decisions.wait(workspace, in_line_message(workspace.team.name, per_shape))
        # Before the writes, which pin the admitted (and so change their shape).
        taken = Counter(shape_of(move.workspace) for move in decisions.admissions.values())
        count = decisions.write()
        sizes.write(now)
    if any(taken[shape] >= per_shape for shape in loaded.cut):
        cache.set(AGAIN, True, timeout=60)  # the requests behind those of that shape may fit as well
    log.info("scheduling cycle admitted %d of %d queued workspaces", count, len(queued))
    return count
