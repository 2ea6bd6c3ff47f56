"""The scheduling cycle: admit queued workspaces that fit their team's quota and the cluster.

One cycle at a time (``single_flight``). The admission engine orders the queue and decides who is
admitted, who waits and which borrowers must make room; the placement engine (``inventory.Capacity``)
chooses the node of each admitted workspace, which is pinned there. Each admission row-locks the team's
quota, so admissions racing from several processes cannot overrun it.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.queue import enqueue
from scheduling.demand import demand_of, is_gpu, workload_of
from scheduling.engine.admission import AdmissionState, Preempt, Wait, WaitReason, decide
from scheduling.inventory import Capacity
from scheduling.kube.calls import Kube
from scheduling.loops import tasknames
from scheduling.loops.locks import single_flight
from scheduling.loops.provisioning import request_teardown
from scheduling.quota import fair_share as decayed_usage
from scheduling.quota.rules import may_borrow, quota_config
from scheduling.quota.snapshot import QuotaSnapshot
from workspaces.models import GpuOffering, Workspace
from workspaces.transitions import State, note, set_reason, transition

log = logging.getLogger(__name__)
# JSON columns the cycle never reads; decoding them for thousands of rows per cycle is measurable.
UNUSED = ("env", "command", "offering__allowed_counts", "offering__description")


def _fmt(amount: Decimal) -> str:
    return f"{amount.normalize():f}"


def admit_one(
    workspace: Workspace, capacity: Capacity, *, borrowing: bool = False, quotas: QuotaSnapshot | None = None
) -> bool:
    """Admit ``workspace`` if its team's quota and the cluster have room; else record why it waits.

    The admission engine decided in memory; this is the authoritative check against ``quotas``, read
    under the quota rows' locks, so that admissions racing from several processes cannot overrun a
    team's limit. Without a snapshot it reads its team's under the lock, in a transaction of its own.
    """
    if quotas is None:
        with transaction.atomic():
            own = QuotaSnapshot.read([workspace.team_id], lock=True)
            return admit_one(workspace, capacity, borrowing=borrowing, quotas=own)
    offering = workspace.offering
    if offering.kind != GpuOffering.Kind.CPU:
        ceiling = quotas.ceiling(workspace.team_id, offering.flavour, borrowing=borrowing)
        if quotas.in_use(workspace.team_id, offering.flavour) + workspace.gpu_equivalents > ceiling:
            set_reason(workspace, _quota_message(workspace, quotas, borrowing=borrowing), source="scheduler")
            return False
        capped = quotas.member(workspace.team_id, workspace.owner_id, offering.flavour)
        if capped and capped[1] + workspace.gpu_equivalents > capped[0]:
            set_reason(
                workspace,
                f"Waiting for your share: your lead caps you at {_fmt(capped[0])} {offering.flavour} "
                f"GPU-equivalents, you use {_fmt(capped[1])} and this needs {_fmt(workspace.gpu_equivalents)}.",
                source="scheduler",
            )
            return False
    demand = demand_of(workspace)
    nodes = capacity.place(demand)
    if nodes is None:
        set_reason(
            workspace, f"Waiting for a free {offering.display_name}: {capacity.explain(demand)}", source="scheduler"
        )
        return False
    how = "borrowing idle capacity beyond" if borrowing else "within"
    # One node for every pod: pin them there (required node affinity; kube-scheduler still checks).
    pinned = nodes[0] if len(set(nodes)) == 1 else ""
    where = f"placed on {pinned}" if pinned else f"placed on {', '.join(sorted(set(nodes)))}"
    admitted = transition(
        workspace,
        State.ADMITTED,
        f"Admitted {how} {workspace.team.name}'s quota; {where}.",
        expected=[State.QUEUED],
        source="scheduler",
        borrowing=borrowing,
        preempt_at=None,
        pinned_node=pinned,
    )
    if admitted:
        quotas.take(workspace)
        enqueue(tasknames.PROVISION, workspace.pk)
    return admitted


def _give_notice(workspace: Workspace, preempt: Preempt, now: datetime) -> None:
    """Tell a borrower it must make room; it is stopped when the notice runs out (``expire_notices``)."""
    if workspace.preempt_at is not None:
        return
    deadline = now + timedelta(seconds=settings.PREEMPTION_NOTICE_SECONDS)
    if Workspace.objects.filter(pk=workspace.pk, preempt_at__isnull=True).update(preempt_at=deadline) == 1:
        workspace.preempt_at = deadline
        note(
            workspace,
            f"Will be preempted at {deadline:%H:%M:%S} UTC: {preempt.message} It is then stopped, keeps its "
            "home volume and queues again.",
            source="scheduler",
        )


def expire_notices(now: datetime) -> int:
    """Stop borrowers whose notice ran out, and queue them again."""
    due = Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES, preempt_at__lte=now)
    stopped = 0
    for workspace in due:
        # Teardown queues it again once its pods are gone (so the new pods never meet the old ones).
        reason = "Preempted: the capacity it borrowed was needed for another team's guarantee."
        if transition(workspace, State.PREEMPTED, reason, source="scheduler"):
            request_teardown(workspace.pk, delete_volume=False)
            stopped += 1
    return stopped


def _quota_message(workspace: Workspace, quotas: QuotaSnapshot, *, borrowing: bool) -> str:
    offering = workspace.offering
    ceiling = quotas.ceiling(workspace.team_id, offering.flavour, borrowing=borrowing)
    in_use = quotas.in_use(workspace.team_id, offering.flavour)
    kind = "guaranteed and borrowable" if borrowing else "guaranteed"
    return (
        f"Waiting for team quota: {workspace.team.name} uses {_fmt(in_use)} of its {_fmt(ceiling)} {kind} "
        f"{offering.flavour} GPU-equivalents and this needs {_fmt(workspace.gpu_equivalents)}."
    )


def _wait_message(workspace: Workspace, wait: Wait, capacity: Capacity, quotas: QuotaSnapshot) -> str:
    """The engine's reason, in the words a researcher reads on the queue page."""
    if wait.reason == WaitReason.TEAM_QUOTA_FULL:
        return _quota_message(workspace, quotas, borrowing=may_borrow(workspace.kind))
    if wait.reason == WaitReason.NO_CAPACITY:
        demand = demand_of(workspace)
        if capacity.place_would_fail(demand):
            # Which nodes lack what, as kube-scheduler says it, rather than only the GPU-model total.
            return f"Waiting for a free {workspace.offering.display_name}: {capacity.explain(demand)}"
        return f"Waiting for free {workspace.offering.flavour} capacity: {wait.message}."
    if wait.reason == WaitReason.PREEMPTION_PENDING:
        return f"Waiting for a borrower to leave: {wait.message}."
    return f"Waiting: {wait.message}."


def run_cycle(kube: Kube) -> int:
    """Admit what fits; returns how many workspaces were admitted (0 if another cycle is running)."""
    with single_flight("scheduling-cycle") as acquired:
        if not acquired:
            log.info("scheduling cycle skipped: another one is running")
            return 0
        now = timezone.now()
        expire_notices(now)
        holding = Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES)
        active = list(holding.select_related("offering", "team").defer(*UNUSED))
        admitted = [workload_of(w) for w in active if is_gpu(w)]
        usage = decayed_usage.advance(admitted, now)  # every cycle, so history accrues while the queue is empty
        queued = list(
            Workspace.objects.filter(state=State.QUEUED)
            .select_related("offering", "team", "owner")
            .defer(*UNUSED)
            .order_by("created_at", "id")
        )
        if not queued:
            return 0
        nodes = kube.list("Node", None, "")
        capacity = Capacity.from_objects(nodes, kube.list("Pod", None, ""))
        # Admitted workspaces whose pods are not on a node yet hold their room: on their pinned node, or
        # wherever the engine would put them (unpinned after the cluster disagreed, or spread jobs).
        for pending in active:
            if pending.state in (State.ADMITTED, State.PROVISIONING) and pending.pk not in capacity.bound:
                demand = demand_of(pending)
                if not (pending.pinned_node and capacity.reserve(demand, pending.pinned_node)):
                    capacity.place(demand)
        state = AdmissionState(quota_config(capacity.by_model), admitted, usage)
        decisions = decide(state, [workload_of(w) for w in queued if is_gpu(w)])
        by_id = {str(w.pk): w for w in [*queued, *active]}
        for preempt in decisions.preempt:
            _give_notice(by_id[preempt.workload_id], preempt, now)
        # One transaction: the quota rows of the queued teams stay locked while the cycle admits against
        # the quotas, and the provisioning tasks go out when it commits.
        with transaction.atomic():
            quotas = QuotaSnapshot.read({w.team_id for w in queued}, lock=True)
            for wait in decisions.waiting:
                waiting = by_id[wait.workload_id]
                set_reason(waiting, _wait_message(waiting, wait, capacity, quotas), source="scheduler")
            count = sum(
                admit_one(by_id[a.workload_id], capacity, borrowing=a.borrowing, quotas=quotas) for a in decisions.admit
            )
            count += sum(admit_one(w, capacity, quotas=quotas) for w in queued if not is_gpu(w))
        log.info("scheduling cycle admitted %d of %d queued workspaces", count, len(queued))
        return count
