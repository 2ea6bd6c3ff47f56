"""Changes to quotas, caps and team policies. Each checks who is asking and the bounds above it,
runs in one transaction, and writes an audit event with the state before and after."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from portal.access import can_manage_team, require_operator
from portal.models import AuditEvent, Department, Membership, Team
from scheduling.engine.quota import over_cap
from scheduling.models import DepartmentCap, MemberCap, TeamPolicy, TeamQuota
from scheduling.quota import rules
from workspaces.models import GpuOffering


def _fmt(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _require_manager(actor: Any, team: Team) -> None:
    if not can_manage_team(actor, team):
        raise PermissionDenied(f"Only {team.name}'s leads and operators can change its policies.")


def _check_units(field: str, value: Decimal) -> None:
    if value < 0:
        raise ValidationError({field: "Must be zero or more."})


@transaction.atomic
def do_set_team_quota(actor: Any, team: Team, flavour: str, guaranteed: Decimal, borrow_limit: Decimal) -> TeamQuota:
    require_operator(actor, "change team quotas")
    _check_units("guaranteed", guaranteed)
    _check_units("borrow_limit", borrow_limit)
    cap = DepartmentCap.objects.select_for_update().filter(department=team.department_id, flavour=flavour).first()
    if cap is not None:
        others = rules.department_guaranteed(team.department_id, flavour, excluding_team=team.pk)
        if over_cap(others + guaranteed, cap.cap):
            raise ValidationError(
                {
                    "guaranteed": f"{team.department.name} may guarantee at most {_fmt(cap.cap)} {flavour} in all; "
                    f"its other teams hold {_fmt(others)}, so {team.name} can have at most {_fmt(cap.cap - others)}."
                }
            )
    quota, _ = TeamQuota.objects.select_for_update().get_or_create(team=team, flavour=flavour)
    before = {"guaranteed": str(quota.guaranteed), "borrow_limit": str(quota.borrow_limit)}
    quota.guaranteed, quota.borrow_limit = guaranteed, borrow_limit
    quota.save(update_fields=["guaranteed", "borrow_limit", "updated_at"])
    after = {"guaranteed": str(guaranteed), "borrow_limit": str(borrow_limit)}
    AuditEvent.record(actor=actor, action="quota.set", target=quota, team=team, before=before | {"flavour": flavour},
                      after=after | {"flavour": flavour})  # fmt: skip
    return quota


@transaction.atomic
def do_set_department_cap(actor: Any, department: Department, flavour: str, cap: Decimal) -> DepartmentCap:
    require_operator(actor, "change department caps")
    _check_units("cap", cap)
    guaranteed = rules.department_guaranteed(department.pk, flavour)
    if over_cap(guaranteed, cap):
        raise ValidationError(
            {
                "cap": f"{department.name}'s teams are already guaranteed {_fmt(guaranteed)} {flavour}; "
                "lower those first."
            }
        )
    row, created = DepartmentCap.objects.select_for_update().get_or_create(
        department=department, flavour=flavour, defaults={"cap": cap}
    )
    before = None if created else {"flavour": flavour, "cap": str(row.cap)}
    row.cap = cap
    row.save(update_fields=["cap"])
    AuditEvent.record(actor=actor, action="department_cap.set", target=row, before=before,
                      after={"flavour": flavour, "cap": str(cap)})  # fmt: skip
    return row


@transaction.atomic
def do_set_member_cap(actor: Any, team: Team, username: str, flavour: str, cap: Decimal | None) -> MemberCap | None:
    """Limit one member's share of the team's quota; ``None`` removes the limit."""
    _require_manager(actor, team)
    membership = Membership.objects.filter(team=team, user__username=username).select_related("user").first()
    if membership is None:
        raise ValidationError({"username": f"{username} is not a member of {team.name}."})
    existing = MemberCap.objects.select_for_update().filter(team=team, user=membership.user, flavour=flavour).first()
    before = {"user": username, "flavour": flavour, "cap": str(existing.cap)} if existing else None
    if cap is None:
        if existing:
            AuditEvent.record(actor=actor, action="member_cap.remove", target=existing, team=team, before=before)
            existing.delete()
        return None
    _check_units("cap", cap)
    ceiling = rules.limits(team.pk, flavour).ceiling(borrowing=True)
    if cap > ceiling:
        raise ValidationError(
            {
                "cap": f"{team.name} may use at most {_fmt(ceiling)} {flavour} (guarantee plus borrowing); "
                "a member's cap cannot exceed that."
            }
        )
    row, _ = MemberCap.objects.update_or_create(team=team, user=membership.user, flavour=flavour, defaults={"cap": cap})
    AuditEvent.record(actor=actor, action="member_cap.set", target=row, team=team, before=before,
                      after={"user": username, "flavour": flavour, "cap": str(cap)})  # fmt: skip
    return row


def policy_of(team: Team) -> TeamPolicy:
    policy, _ = TeamPolicy.objects.get_or_create(team=team)
    return policy


def _policy_snapshot(policy: TeamPolicy) -> dict[str, Any]:
    return {
        "default_runtime_hours": policy.default_runtime_hours,
        "max_runtime_hours": policy.max_runtime_hours,
        "allowed_offerings": sorted(policy.allowed_offerings.values_list("slug", flat=True)),
    }


@transaction.atomic
def do_set_team_policy(
    actor: Any, team: Team, *, default_runtime_hours: int, max_runtime_hours: int, allowed_offerings: list[str]
) -> TeamPolicy:
    _require_manager(actor, team)
    ceiling = settings.WORKSPACE_MAX_RUNTIME_HOURS
    errors: dict[str, str] = {}
    if not 1 <= max_runtime_hours <= ceiling:
        errors["max_runtime_hours"] = f"Operators allow at most {ceiling} hours; choose 1 to {ceiling}."
    if not 1 <= default_runtime_hours <= max_runtime_hours:
        errors["default_runtime_hours"] = "The default runtime must be between 1 hour and the maximum."
    offerings = list(GpuOffering.objects.filter(slug__in=allowed_offerings, enabled=True))
    unknown = sorted(set(allowed_offerings) - {o.slug for o in offerings})
    if unknown:
        errors["allowed_offerings"] = f"No enabled offering called {', '.join(unknown)}."
    if errors:
        raise ValidationError(errors)
    policy = TeamPolicy.objects.select_for_update().get_or_create(team=team)[0]
    before = _policy_snapshot(policy)
    policy.default_runtime_hours, policy.max_runtime_hours = default_runtime_hours, max_runtime_hours
    policy.save(update_fields=["default_runtime_hours", "max_runtime_hours", "updated_at"])
    policy.allowed_offerings.set(offerings)
    AuditEvent.record(actor=actor, action="policy.set", target=policy, team=team, before=before,
                      after=_policy_snapshot(policy))  # fmt: skip
    return policy


IDLE_FIELDS = (
    "idle_threshold_percent",
    "idle_window_minutes",
    "idle_grace_minutes",
    "keep_alive_hours",
    "keep_alives_per_run",
    "stuck_window_minutes",
)


def _idle_bounds() -> dict[str, tuple[int, int, str]]:
    """Per field: the operators' (lowest, highest) and the words of the refusal."""
    window = (settings.IDLE_WINDOW_MINUTES_MIN, settings.IDLE_WINDOW_MINUTES_MAX)
    return {
        "idle_threshold_percent": (1, settings.IDLE_THRESHOLD_PERCENT_MAX, "The GPU-activity threshold"),
        "idle_window_minutes": (*window, "The idle window"),
        "idle_grace_minutes": (settings.IDLE_GRACE_MINUTES_MIN, 24 * 60, "The grace period"),
        "keep_alive_hours": (1, settings.IDLE_KEEP_ALIVE_HOURS_MAX, "One keep-alive"),
        "keep_alives_per_run": (0, settings.IDLE_KEEP_ALIVES_MAX, "Keep-alives per start"),
        "stuck_window_minutes": (*window, "The training-job window"),
    }


def idle_fields(team: Team) -> list[dict[str, Any]]:
    """The team's idle rules for the lead's form: per field its value and the operators' bounds."""
    policy = TeamPolicy.objects.filter(team=team).first() or TeamPolicy()
    labels = {
        "idle_threshold_percent": "GPU activity below (%) counts as idle",
        "idle_window_minutes": "Idle window (minutes)",
        "idle_grace_minutes": "Grace after the warning (minutes)",
        "keep_alive_hours": "One keep-alive lasts (hours)",
        "keep_alives_per_run": "Keep-alives per start or resume",
        "stuck_window_minutes": "Flag a training job idle for (minutes)",
    }
    return [
        {"name": field, "label": labels[field], "value": getattr(policy, field), "min": low, "max": high}
        for field, (low, high, _) in _idle_bounds().items()
    ]


@transaction.atomic
def do_set_idle_policy(actor: Any, team: Team, **values: int) -> TeamPolicy:
    """The lead's idle rules for the team, each within the operators' bounds; audited."""
    _require_manager(actor, team)
    errors = {
        field: f"{what} must be between {low} and {high}; operators allow no more."
        for field, (low, high, what) in _idle_bounds().items()
        if field in values and not low <= values[field] <= high
    }
    if errors:
        raise ValidationError(errors)
    policy = TeamPolicy.objects.select_for_update().get_or_create(team=team)[0]
    before = {field: getattr(policy, field) for field in IDLE_FIELDS}
    for field, value in values.items():
        setattr(policy, field, value)
    policy.save(update_fields=[*values, "updated_at"])
    AuditEvent.record(actor=actor, action="idle_policy.set", target=policy, team=team, before=before,
                      after={field: getattr(policy, field) for field in IDLE_FIELDS})  # fmt: skip
    return policy
