"""Idle reclaim: after each telemetry collection, the idle rule (``scheduling/telemetry/idle_rule.py``) over
every running workspace's recent samples, under its team's idle rules, and what it decides applied.

- warn: ``idle_warned_at`` set, a timeline event with the figures and when it will be reclaimed;
- clear: the warning lifted (used again, or kept alive), with why;
- reclaim: ``reclaimed`` (resumable, home volume kept), its teardown owed as for any stop;
- flag a training job as possibly stuck, once per run.

Samples are read in one query for all running workspaces; each decision is a compare-and-set on the
workspace's state, so a stop or delete at the same moment wins.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from django.db import transaction

from scheduling.loops.provisioning import request_teardown
from scheduling.models import ActivitySample
from scheduling.quota.rules import IdleRules, idle_rules_for
from scheduling.telemetry.idle_rule import Action, Judgement, Sample, decide, span
from workspaces.models import Workspace
from workspaces.transitions import State, note, transition

log = logging.getLogger(__name__)


def _samples(workspaces: list[Workspace], since: datetime) -> dict[int, list[Sample]]:
    rows = (
        ActivitySample.objects.filter(workspace__in=workspaces, hourly=False, at__gte=since)
        .order_by("workspace_id", "at")
        .values_list("workspace_id", "at", "gpu_active", "gpu_observed_at", "busy_kernels", "last_activity")
    )
    found: dict[int, list[Sample]] = defaultdict(list)
    for workspace_id, at, gpu_active, observed_at, busy_kernels, last_activity in rows:
        found[workspace_id].append(Sample(at, gpu_active, observed_at, busy_kernels, last_activity))
    return found


def apply_idle_rules(now: datetime) -> dict[str, int]:
    """One pass over the running workspaces; answers how many of each action it took."""
    running = list(Workspace.objects.filter(state=State.RUNNING).select_related("team"))
    if not running:
        return {}
    rules = idle_rules_for({w.team_id for w in running})
    longest = max(max(r.policy.window, r.policy.stuck_window) for r in rules.values())
    samples = _samples(running, now - longest - max(r.policy.max_gap for r in rules.values()))
    done: dict[str, int] = defaultdict(int)
    for workspace in running:
        policy = rules[workspace.team_id].policy
        # Only this run's samples: a resumed notebook is not judged on the idle hour that got it reclaimed.
        run = [s for s in samples.get(workspace.pk, []) if workspace.started_at is None or s.at >= workspace.started_at]
        action, judgement = decide(
            run,
            now=now,
            policy=policy,
            has_gpu=workspace.gpu_equivalents > 0,
            notebook=workspace.kind == Workspace.Kind.NOTEBOOK,
            warned_at=workspace.idle_warned_at,
            kept_alive_until=workspace.kept_alive_until,
            flagged_stuck=workspace.flagged_stuck_at is not None,
        )
        if action != Action.NONE and _apply(workspace, action, judgement, now, rules[workspace.team_id]):
            done[action.value] += 1
    return dict(done)


def _mark(workspace: Workspace, **fields: object) -> bool:
    """Set the marks if the workspace is still running (a stop at the same moment wins)."""
    return bool(Workspace.objects.filter(pk=workspace.pk, state=State.RUNNING).update(**fields))


@transaction.atomic
def _apply(workspace: Workspace, action: Action, judgement: Judgement, now: datetime, rules: IdleRules) -> bool:
    grace = rules.policy.grace
    if action == Action.WARN:
        if not _mark(workspace, idle_warned_at=now):
            return False
        at = now + grace
        clock = "%H:%M" if grace >= timedelta(minutes=10) else "%H:%M:%S"  # a short grace needs its seconds
        keep = f" or kept alive ({rules.keep_alives_per_run} per run)" if rules.keep_alives_per_run else ""
        note(
            workspace,
            f"Idle warning. {judgement.why} It will be reclaimed at {at:{clock}} UTC unless it is used{keep}; "
            "its home volume is kept and it can be resumed.",
            source="idle",
            details={
                "event": "idle_warning",
                "reclaim_at": at.isoformat(),
                "peak_gpu_active": judgement.peak_gpu_active,
            },
        )
        return True
    if action == Action.CLEAR:
        if not _mark(workspace, idle_warned_at=None):
            return False
        note(workspace, f"Idle warning lifted. {judgement.why}", source="idle")
        return True
    if action == Action.FLAG_STUCK:
        if not _mark(workspace, flagged_stuck_at=now):
            return False
        note(
            workspace,
            f"Possibly stuck: {judgement.why} It keeps running; check its logs.",
            source="idle",
            details={"event": "possibly_stuck"},
        )
        return True
    reclaimed = transition(
        workspace,
        State.RECLAIMED,
        f"Reclaimed: idle past its {span(grace)} grace period. {judgement.why} Home volume kept; resume it "
        "when you need it.",
        source="idle",
        idle_warned_at=None,
        details={"peak_gpu_active": judgement.peak_gpu_active, "busy_samples": judgement.busy_samples},
    )
    if reclaimed:
        request_teardown(workspace.pk, delete_volume=False)
        log.info("workspace %s reclaimed for idleness", workspace.pk)
    return reclaimed
