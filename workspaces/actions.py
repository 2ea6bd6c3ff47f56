"""What people do to workspaces: request, stop, resume, delete, extend.

Each action checks what it needs, changes the database in one transaction, and hands cluster work to
the scheduling tasks (by name, after commit). None of them talks to Kubernetes.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from portal.billing import budgets
from portal.models import AuditEvent
from scheduling import services
from workspaces import access, policy
from workspaces.images import ImageRefused, image_reference
from workspaces.models import GpuOffering, Workspace
from workspaces.transitions import State, note, transition


def _policy_problems(
    rules: services.TeamRules, user: Any, team: Any, offering: GpuOffering, kind: str, hours: int, gpu_equivalents: Any
) -> dict[str, str]:
    """What the team's current rules refuse: its lead's policy (runtime, offerings), its quota, the
    member's cap in it and its budget. Requests and resumes both answer to them."""
    errors: dict[str, str] = {}
    if hours > rules.max_runtime_hours:
        errors["max_runtime_hours"] = f"{team.name} allows at most {rules.max_runtime_hours} hours."
    if rules.allowed_offerings and offering.slug not in rules.allowed_offerings:
        errors["offering"] = f"{team.name}'s lead does not allow {offering.display_name}."
    if offering.kind != GpuOffering.Kind.CPU:
        why = services.never_fits(team, offering.flavour, kind, gpu_equivalents, member_id=user.pk)
        if why:
            errors["gpu_count"] = why
        if spent := budgets.refusal(team, kind, timezone.now()):
            errors["team"] = spent
    return errors


def _team_problems(user: Any, data: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """The rules that depend on the team and the catalogue. Returns the problems by field, and the request
    with its runtime and image resolved."""
    team, offering, kind = data["team"], data["offering"], data["kind"]
    rules = services.team_rules(team.pk)
    hours = data.get("max_runtime_hours") or rules.default_runtime_hours
    errors = _policy_problems(rules, user, team, offering, kind, hours, data["gpu_equivalents"])
    image = data["image"]
    try:
        image = image_reference(image, kind)
    except ImageRefused as exc:
        errors["image"] = str(exc)
    return errors, data | {"image": image, "max_runtime_seconds": hours * 3600}


def _audit_for_others(user: Any, workspace: Workspace, action: str, before: str, **after: Any) -> None:
    """A lead or operator acting on someone else's workspace leaves a trace in the audit log."""
    if workspace.owner_id != user.pk:
        AuditEvent.record(
            actor=user,
            action=f"workspace.{action}",
            target=workspace,
            team=workspace.team,
            before={"state": before, "owner": workspace.owner.get_username()},
            after={"state": workspace.state, **after},
        )


@transaction.atomic
def do_request_workspace(user: Any, data: dict[str, Any]) -> Workspace:
    """Check a request's team rules and queue it, then trigger a scheduling cycle.

    ``data`` is what ``WorkspaceRequestSerializer`` validated (its shape and the portal's limits)."""
    errors, data = _team_problems(user, data)
    if errors:
        raise ValidationError(errors)
    offering: GpuOffering = data["offering"]
    workspace = Workspace.objects.create(
        name=data["name"],
        kind=data["kind"],
        team=data["team"],
        owner=user,
        offering=offering,
        gpu_count=data["gpu_count"],
        # Elastic: ``workers`` is the size it holds now, from its minimum up to the most it asked for.
        workers=data.get("min_workers") or data["workers"],
        min_workers=data.get("min_workers"),
        max_workers=data["workers"] if data.get("min_workers") else None,
        image=data["image"],
        command=data["command"],
        env=data["env"],
        cpu_millis=data["cpu_millis"],
        memory_mib=data["memory_mib"],
        max_runtime_seconds=data["max_runtime_seconds"],
        home_volume_gib=data["home_volume_gib"],
        gpu_equivalents=data["gpu_equivalents"],
        priority=data.get("priority", Workspace.Priority.NORMAL),
        token_salt=secrets.token_hex(8),
        reason=Workspace.FIRST_REASON,
    )
    note(workspace, f"Requested by {user.get_username()}: {offering.display_name} x{workspace.gpu_count}.")
    services.request_cycle()
    return workspace


def _locked(workspace: Workspace) -> Workspace:
    locked: Workspace = Workspace.objects.select_for_update().get(pk=workspace.pk)
    return locked


@transaction.atomic
def do_stop(user: Any, workspace: Workspace) -> Workspace:
    """Stop: a queued request is cancelled; a live one loses its pod and keeps its home volume."""
    workspace = _locked(workspace)
    who = user.get_username()
    before = workspace.state
    if not access.state_allows(workspace, "stop"):
        raise ValidationError(f"A {workspace.get_state_display().lower()} workspace cannot be stopped.")
    if workspace.state == State.QUEUED:
        transition(workspace, State.CANCELLED, f"Cancelled by {who} before it started.")
    else:
        transition(workspace, State.STOPPING, f"Stopped by {who}; the home volume is kept.")
        services.tear_down(workspace.pk, delete_home=False)
    _audit_for_others(user, workspace, "stop", before)
    return workspace


@transaction.atomic
def do_resume(user: Any, workspace: Workspace) -> Workspace:
    """Queue a stopped workspace again; it gets its old home volume back."""
    workspace = _locked(workspace)
    if not access.state_allows(workspace, "resume"):
        raise ValidationError(f"A {workspace.get_state_display().lower()} workspace cannot be resumed.")
    # The team's rules may have changed since it was requested: it resumes under today's. A runtime
    # beyond the team's longest is cut to it (said in the timeline); anything else refuses the resume.
    rules = services.team_rules(workspace.team_id)
    runtime = min(workspace.max_runtime_seconds, rules.max_runtime_hours * 3600)
    errors = _policy_problems(
        rules,
        workspace.owner,
        workspace.team,
        workspace.offering,
        workspace.kind,
        runtime // 3600,
        workspace.elastic_restart_fields().get("gpu_equivalents", workspace.gpu_equivalents),
    )
    if errors:
        raise ValidationError(errors)
    before = workspace.state
    cut = f" Runtime cut to {runtime // 3600} h, the team's longest." if runtime < workspace.max_runtime_seconds else ""
    transition(
        workspace,
        State.QUEUED,
        f"Resumed by {user.get_username()} with the same home volume.{cut}",
        max_runtime_seconds=runtime,
        node_name="",
        pinned_node="",
        admitted_at=None,
        started_at=None,
        finished_at=None,
        kept_alive_until=None,  # a new run: the policy's keep-alives anew, no idle marks
        keep_alives_used=0,
        **workspace.elastic_restart_fields(),  # an elastic job starts again at its minimum
        idle_warned_at=None,
        flagged_stuck_at=None,
        runtime_warned_at=None,
    )
    _audit_for_others(user, workspace, "resume", before)
    services.request_cycle()
    return workspace


@transaction.atomic
def do_delete(user: Any, workspace: Workspace) -> Workspace:
    """Remove everything of the workspace in the cluster, its home volume included."""
    workspace = _locked(workspace)
    if not access.state_allows(workspace, "delete"):
        raise ValidationError("This workspace is already deleted.")
    before = workspace.state
    transition(
        workspace,
        State.DELETED,
        f"Deleted by {user.get_username()}; its pods, services and home volume are removed.",
        expected=[workspace.state],
    )
    services.tear_down(workspace.pk, delete_home=True)
    _audit_for_others(user, workspace, "delete", before)
    return workspace


@transaction.atomic
def do_extend(user: Any, workspace: Workspace, hours: int) -> Workspace:
    """Give a running workspace more time, within policy.

    The portal enforces runtimes itself: a live pod's ``activeDeadlineSeconds`` can only be lowered, so the
    pod carries the policy maximum as a backstop and the reconcile loop stops workspaces at their deadline.
    """
    workspace = _locked(workspace)
    limits = policy.limits()
    if not access.state_allows(workspace, "extend"):
        raise ValidationError(f"A {workspace.get_state_display().lower()} workspace cannot be extended.")
    if not 1 <= hours <= limits.max_extend_hours:
        raise ValidationError({"hours": f"Extend by 1 to {limits.max_extend_hours} hours at a time."})
    longest = services.team_rules(workspace.team_id).max_runtime_hours  # the team's, within the portal's
    new_total = workspace.max_runtime_seconds + hours * 3600
    if new_total > longest * 3600:
        allowed = max(0, longest - workspace.max_runtime_seconds // 3600)
        raise ValidationError(
            {"hours": f"Workspaces of this team may run at most {longest} hours; {allowed} more are allowed."}
        )
    # A later deadline: the runtime warning is owed again before it.
    Workspace.objects.filter(pk=workspace.pk).update(max_runtime_seconds=new_total, runtime_warned_at=None)
    before = workspace.state
    workspace.max_runtime_seconds, workspace.runtime_warned_at = new_total, None
    note(workspace, f"Extended by {hours} h by {user.get_username()}; runtime is now {new_total // 3600} h.")
    _audit_for_others(user, workspace, "extend", before, max_runtime_hours=new_total // 3600)
    return workspace


@transaction.atomic
def do_keep_alive(user: Any, workspace: Workspace) -> Workspace:
    """The owner keeps a running notebook from idle reclaim for the team's keep-alive length, as often per
    run (start or resume) as the team's policy allows."""
    workspace = _locked(workspace)
    if workspace.owner_id != user.pk:
        raise PermissionDenied("Only its owner can keep a notebook alive.")
    if workspace.kind != Workspace.Kind.NOTEBOOK or workspace.state != Workspace.State.RUNNING:
        raise ValidationError(
            "Only a running notebook can be kept alive; training jobs are never reclaimed for idleness."
        )
    rules = services.idle_rules(workspace.team_id)
    if workspace.keep_alives_used >= rules.keep_alives_per_run:
        allowed = rules.keep_alives_per_run
        raise ValidationError(
            f"{workspace.team.name}'s policy allows {allowed} keep-alive{'s' if allowed != 1 else ''} per run and "
            "this one has had them: save your work; stopping and resuming it later starts a new run."
        )
    until = timezone.now() + rules.keep_alive
    used = workspace.keep_alives_used + 1
    Workspace.objects.filter(pk=workspace.pk).update(kept_alive_until=until, keep_alives_used=used)
    workspace.kept_alive_until, workspace.keep_alives_used = until, used
    left = rules.keep_alives_per_run - used
    note(workspace, f"Kept alive by {user.get_username()} until {until:%Y-%m-%d %H:%M} UTC ({left} keep-alives left).")
    return workspace
