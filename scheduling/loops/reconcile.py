"""The reconcile loop: cluster truth -> database, and drift repaired.

Level-triggered like a Kubernetes controller: every pass lists everything the portal labelled and
compares it with the workspaces that should exist. It is safe to run twice at once (transitions are
compare-and-set; creates and deletes are idempotent) and after a crash at any point.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from portal.queue import enqueue, enqueue_coalesced
from scheduling.kube.calls import Kube
from scheduling.kube.keys import MANAGED_BY, MANAGER, workspace_id_of
from scheduling.loops import metering, tasknames
from scheduling.loops.observe import Observation, observe_job, observe_pod
from scheduling.loops.provisioning import request_teardown, request_teardowns, teardown
from scheduling.loops.schedule import orphan_sweep_due, release_orphan_sweep
from workspaces.deadlines import workspace_deadline
from workspaces.models import Workspace
from workspaces.transitions import Move, State, set_reasons, transition, transition_many

log = logging.getLogger(__name__)

MANAGED = f"{MANAGED_BY}={MANAGER}"


@dataclass
class ClusterView:
    """The portal's objects in the cluster, grouped by workspace id."""

    pods: dict[int, list[Mapping[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    jobs: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    others: list[tuple[str, Mapping[str, Any]]] = field(default_factory=list)
    # When the cluster answered the pod list (the midpoint of the call): what the ledger bills the pods as of.
    # The other lists come after it and may take a second or more on a loaded machine; a pod that started or
    # ended meanwhile would otherwise be billed as if the pod list had been taken at the end of them all.
    pods_at: datetime = field(default_factory=timezone.now)


def read_cluster(kube: Kube, *, sweep: bool = True) -> ClusterView:
    """Pods and jobs always; the other kinds only when ``sweep`` (they matter only for orphan removal)."""
    view = ClusterView()
    asked = timezone.now()
    pods = kube.list("Pod", None, MANAGED)
    view.pods_at = asked + (timezone.now() - asked) / 2
    for pod in pods:
        if (wid := workspace_id_of(pod)) is not None:
            view.pods[wid].append(pod)
    for job in kube.list("Job", None, MANAGED):
        if (wid := workspace_id_of(job)) is not None:
            view.jobs[wid] = job
    kinds = ["Service", "Secret", "PersistentVolumeClaim"] + (["Ingress"] if settings.NOTEBOOK_INGRESS_HOST else [])
    for kind in kinds if sweep else []:
        view.others.extend((kind, obj) for obj in kube.list(kind, None, MANAGED))
    return view


@dataclass
class Changes:
    """What a pass saw change that is written together when it has looked at every workspace: moves by
    (from state, to state), each with its reason and node, and new reasons of workspaces that stay put."""

    moves: dict[tuple[str, str], list[Move]] = field(default_factory=lambda: defaultdict(list))
    reasons: list[tuple[Workspace, str]] = field(default_factory=list)

    def write(self) -> None:
        """A few statements per kind of move however many workspaces moved (a busy cluster finishes dozens of
        jobs between two passes); each move only if the workspace is still where the pass saw it."""
        for (from_state, to_state), moves in self.moves.items():
            moved = transition_many(moves, to_state, expected=[from_state], source="reconcile")
            if to_state in Workspace.FINAL_STATES:  # a notebook's pod is left to remove; a Job goes with its pods
                notebooks = [w.pk for w in moved if w.kind == Workspace.Kind.NOTEBOOK]
                request_teardowns(notebooks, delete_volume=False)
        set_reasons(self.reasons, source="reconcile")


def _observe(workspace: Workspace, view: ClusterView) -> Observation:
    pods = view.pods.get(workspace.pk, [])
    if workspace.kind == Workspace.Kind.JOB:
        return observe_job(view.jobs.get(workspace.pk), pods, workspace.workers, minimum=workspace.min_workers)
    return observe_pod(pods[0] if pods else None)


def _apply(kube: Kube, workspace: Workspace, seen: Observation, view: ClusterView, changes: Changes) -> None:
    now = timezone.now()
    if workspace.state == State.STOPPING and workspace.teardown_requested_at is None:
        # Stopping yet owing nothing (a row from before teardowns were owed, or a path that lost the debt):
        # owe it again, so that finish_lost_teardowns pays it if no task does.
        request_teardown(workspace.pk, delete_volume=False)
        return
    if seen.state is None:
        if workspace.state == State.ADMITTED:
            # A task lost with a crashed worker comes back from the broker only after its visibility
            # timeout; the loop re-enqueues sooner. Provisioning is idempotent, so twice is harmless.
            lost_after = timedelta(seconds=settings.PROVISIONING_RETRY_SECONDS)
            if workspace.admitted_at and now - workspace.admitted_at > lost_after:
                enqueue(tasknames.PROVISION, workspace.pk)
            return
        gone = workspace.state in (State.PROVISIONING, State.RUNNING)
        if gone and transition(workspace, State.ADMITTED, f"{seen.reason} Creating it again.", source="reconcile"):
            enqueue(tasknames.PROVISION, workspace.pk)
        return
    if workspace.state == State.STOPPING:
        return  # teardown is on its way
    if seen.recreate:
        for pod in view.pods.get(workspace.pk, []):
            kube.delete("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
        if transition(workspace, State.ADMITTED, seen.reason, source="reconcile", node_name=""):
            enqueue(tasknames.PROVISION, workspace.pk)
        return
    if workspace.pinned_node and _refused_long_enough(workspace, seen, now):
        _unpin(kube, workspace, seen, view)
        return
    job = view.jobs.get(workspace.pk) if workspace.max_workers is not None else None
    if job is not None and (job.get("spec") or {}).get("parallelism") != workspace.workers:
        # An elastic job whose Job is not at the size its row says (a scale lost with a worker, or one on its
        # way): scale it again; the task reads the row, so the latest size wins and twice is harmless.
        enqueue(tasknames.SCALE_JOB, workspace.pk)
    deadline = workspace_deadline(workspace)
    if seen.state == State.RUNNING and deadline and now >= deadline:
        hours = workspace.max_runtime_seconds // 3600
        if transition(
            workspace,
            State.EXPIRED,
            f"Reached its {hours} h runtime; stopped, home volume kept.",
            source="reconcile",
        ):
            request_teardown(workspace.pk, delete_volume=False)
        return
    if seen.state != workspace.state:
        move = Move(workspace, seen.reason, {"node_name": seen.node or workspace.node_name})
        changes.moves[workspace.state, seen.state].append(move)
    else:
        changes.reasons.append((workspace, seen.reason))
        if seen.node and seen.node != workspace.node_name:
            Workspace.objects.filter(pk=workspace.pk).update(node_name=seen.node)


def _standalone(pod: Mapping[str, Any]) -> bool:
    """A notebook's own pod; a job's pods go with their job."""
    return not pod.get("metadata", {}).get("ownerReferences")


def _refused_long_enough(workspace: Workspace, seen: Observation, now: datetime) -> bool:
    """Whether kube-scheduler has refused the pinned pod for the grace period, timed by the portal's
    clock from the first pass that saw this refusal (the cluster's clock need not agree with ours)."""
    if not seen.unschedulable_since:
        return False
    key = f"placement-refused:{workspace.pk}:{workspace.pinned_node}:{seen.unschedulable_since}"
    cache.add(key, now.timestamp(), timeout=3600)
    first = float(cache.get(key, now.timestamp()))
    return now.timestamp() - first >= settings.PLACEMENT_GRACE_SECONDS


def _unpin(kube: Kube, workspace: Workspace, seen: Observation, view: ClusterView) -> None:
    """The cluster disagrees with the placement engine: its pinned node cannot take the pod. The cluster
    wins: say why, remove the pinned pods and create them again without the pin, for kube-scheduler to
    place (the workspace keeps its admission)."""
    if workspace.kind == Workspace.Kind.JOB and (job := view.jobs.get(workspace.pk)) is not None:
        kube.delete("Job", job["metadata"]["namespace"], job["metadata"]["name"], propagation="Foreground")
    for pod in view.pods.get(workspace.pk, []):
        if _standalone(pod):
            kube.delete("Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
    node, said = workspace.pinned_node, seen.reason.removeprefix("Waiting for a node: ")
    if transition(
        workspace,
        State.ADMITTED,
        f"The cluster disagreed with the placement on {node} ({said}); creating it again without the pin, "
        "for Kubernetes to choose the node.",
        expected=[State.PROVISIONING],
        source="reconcile",
        details={"pinned_node": node, "scheduler": said},
        pinned_node="",
        node_name="",
        admitted_at=workspace.admitted_at,
    ):
        enqueue(tasknames.PROVISION, workspace.pk)


def _remove_orphans(kube: Kube, view: ClusterView) -> int:
    """Delete labelled objects whose workspace no longer wants them."""
    # Only the workspaces the cluster holds objects of: every workspace ever made would grow with history.
    owners = {*view.pods, *view.jobs, *(owner for _, obj in view.others if (owner := workspace_id_of(obj)) is not None)}
    states = dict(Workspace.objects.filter(pk__in=owners).values_list("pk", "state"))
    wants_pods = {pk for pk, state in states.items() if state in Workspace.ACTIVE_STATES}
    wants_volume = {pk for pk, state in states.items() if state != State.DELETED}
    doomed: list[tuple[str, Mapping[str, Any]]] = []
    for wid, pods in view.pods.items():
        if wid not in wants_pods:
            doomed.extend(("Pod", pod) for pod in pods if _standalone(pod))
    doomed.extend(("Job", job) for wid, job in view.jobs.items() if wid not in wants_pods)
    for kind, obj in view.others:
        owner = workspace_id_of(obj)
        keep = wants_volume if kind in ("Secret", "PersistentVolumeClaim") else wants_pods
        if owner is not None and owner not in keep:
            doomed.append((kind, obj))
    if not doomed:
        return 0

    def delete(item: tuple[str, Mapping[str, Any]]) -> bool:
        kind, obj = item
        propagation = "Foreground" if kind == "Job" else "Background"
        return kube.delete(kind, obj["metadata"]["namespace"], obj["metadata"]["name"], propagation=propagation)

    # Every finished job is one: dozens a pass on a busy cluster, so their calls overlap.
    with ThreadPoolExecutor(min(settings.PROVISION_CONCURRENCY, len(doomed)), thread_name_prefix="orphans") as pool:
        return sum(pool.map(delete, doomed))


def finish_lost_teardowns(kube: Kube, now: datetime) -> int:
    """Pay the teardowns owed for longer than ``PROVISIONING_RETRY_SECONDS``: their task was lost with a
    crashed worker or gave up during a Kubernetes outage. Stopping, preempted, expired and deleted
    workspaces then reach their state however the task fared; task retries only make it sooner."""
    cutoff = now - timedelta(seconds=settings.PROVISIONING_RETRY_SECONDS)
    owed = list(Workspace.objects.filter(teardown_requested_at__lte=cutoff).values_list("pk", "state"))
    for workspace_id, state in owed:
        teardown(kube, workspace_id, delete_volume=state == State.DELETED)
    if owed:
        log.info("reconcile finished %d teardown(s) whose task was lost", len(owed))
    return len(owed)


def reconcile(kube: Kube, *, sweep: bool | None = None) -> dict[str, int]:
    """One pass. Services, secrets and volumes are swept for orphans only every ``ORPHAN_SWEEP_SECONDS``
    (``sweep`` forces it either way): kept home volumes and tokens grow with every workspace ever made,
    and listing them every few seconds dominated a pass on a busy portal."""
    claimed = sweep is None and orphan_sweep_due()
    try:
        return _reconcile(kube, sweep=claimed if sweep is None else sweep)
    except Exception:
        if claimed:
            release_orphan_sweep()
        raise


def _reconcile(kube: Kube, *, sweep: bool) -> dict[str, int]:
    # Workspaces first, cluster second: a workspace provisioned in between is then still "admitted" here,
    # for which missing objects are expected, rather than "provisioning" with objects the view predates.
    now = timezone.now()
    torn_down = finish_lost_teardowns(kube, now)
    live = list(Workspace.objects.filter(state__in=Workspace.ACTIVE_STATES).select_related("team", "offering"))
    view = read_cluster(kube, sweep=sweep)
    metering.record(kube, view.pods, view.pods_at)
    changes = Changes()
    for workspace in live:
        _apply(kube, workspace, _observe(workspace, view), view, changes)
    changes.write()
    checked = len(live)
    # Finished ones free their quota and GPUs now: let queued work start without waiting for beat.
    finished = sum(w.state not in Workspace.ACTIVE_STATES for w in live) + torn_down
    if finished:
        enqueue_coalesced(tasknames.RUN_CYCLE)
    removed = _remove_orphans(kube, view)
    if removed:
        log.info("reconcile removed %d orphan object(s)", removed)
    return {"checked": checked, "finished": finished, "teardowns_finished": torn_down, "orphans_removed": removed}
