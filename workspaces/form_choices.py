"""What the request form offers, per team: the offerings its lead allows, its default and longest runtime,
the quota left to this member (team guarantee and the member's own cap), and the GPU counts each offering
comes in. The page renders it and embeds it (``json_script``) so the form can follow a change of team.

It only offers; ``WorkspaceRequestSerializer`` and ``actions.do_request_workspace`` still decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, cast

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from portal.billing import costs
from portal.models import Membership, OrgRole, Team, User
from scheduling import services
from workspaces import policy
from workspaces.models import GpuOffering, Image, Workspace
from workspaces.serializers import WorkspaceRequestSerializer

_NAME_FIELD = cast(serializers.CharField, WorkspaceRequestSerializer._declared_fields["name"])
NAME_MAX_LENGTH: int = _NAME_FIELD.max_length or 40  # the server's limit, so the page cannot take more


@dataclass
class TeamChoices:
    team: Team
    default_runtime_hours: int
    max_runtime_hours: int
    offerings: list[str]  # slugs, in catalogue order
    quota_left: dict[str, Decimal | None] = field(default_factory=dict)  # None: needs no quota (CPU)

    def as_json(self) -> dict[str, Any]:
        return {
            "slug": self.team.slug,
            "name": self.team.name,
            "default_runtime_hours": self.default_runtime_hours,
            "max_runtime_hours": self.max_runtime_hours,
            "offerings": self.offerings,
            "quota_left": {slug: _text(left) for slug, left in self.quota_left.items()},
        }


def _text(amount: Decimal | None) -> str | None:
    """GPU-equivalents as people write them: 2, 0.5 (never 2.0000 or 1E+1)."""
    return None if amount is None else f"{amount.normalize():f}"


def counts(offering: GpuOffering) -> list[int]:
    """The GPUs per pod the offering comes in (CPU-only offerings: 0)."""
    if offering.kind == GpuOffering.Kind.CPU:
        return [0]
    return sorted(int(n) for n in offering.allowed_counts or [1])


def team_choices(user: Any, offerings: list[GpuOffering]) -> list[TeamChoices]:
    teams = [m.team for m in Membership.objects.filter(user=user).select_related("team").order_by("team__name")]
    left = services.member_quota_left([t.pk for t in teams], user.pk)
    result = []
    for team in teams:
        rules = services.team_rules(team.pk)
        allowed = [o for o in offerings if not rules.allowed_offerings or o.slug in rules.allowed_offerings]
        result.append(
            TeamChoices(
                team=team,
                default_runtime_hours=min(rules.default_runtime_hours, rules.max_runtime_hours),
                max_runtime_hours=rules.max_runtime_hours,
                offerings=[o.slug for o in allowed],
                quota_left={
                    o.slug: None if o.kind == GpuOffering.Kind.CPU else left.get((team.pk, o.flavour), Decimal(0))
                    for o in allowed
                },
            )
        )
    return result


def who_adds_members() -> list[str]:
    """Names of the operators, who (besides a team's lead) can add someone to a team."""
    users = User.objects.filter(orgroles__role=OrgRole.Role.OPERATOR, is_active=True).order_by("username")
    return [u.get_full_name() or u.get_username() for u in users]


def form_context(user: Any, selected_team: str | None, selected_offering: str | None) -> dict[str, Any]:
    """Everything the request page shows, for the team in ``selected_team`` (else the first)."""
    offerings = list(GpuOffering.objects.filter(enabled=True))
    teams = team_choices(user, offerings)
    current = next((t for t in teams if t.team.slug == selected_team), teams[0] if teams else None)
    offered = {slug for t in teams for slug in t.offerings}  # what any of the member's teams allows
    shown = [o for o in offerings if o.slug in offered]
    free = services.free_units(shown)
    prices = costs.unit_prices(shown, timezone.now())
    by_slug = {o.slug: o for o in shown}
    chosen = by_slug.get(selected_offering or "")
    if chosen is not None and current is not None and chosen.slug not in current.offerings:
        chosen = None
    rows = [
        {
            "offering": o,
            "free": free.get(o.slug),
            "counts": counts(o),
            "teams": " ".join(t.team.slug for t in teams if o.slug in t.offerings),
            "allowed": current is not None and o.slug in current.offerings,
            "quota_left": _text(current.quota_left.get(o.slug)) if current else None,
            "price": prices.get(o.slug),
        }
        for o in shown
    ]
    notebook_images = list(Image.objects.filter(enabled=True, kind=Image.Kind.NOTEBOOK))
    job_images = list(Image.objects.filter(enabled=True, kind=Image.Kind.JOB))
    data = {
        "teams": [t.as_json() for t in teams],
        "offerings": {
            o.slug: {"name": o.display_name, "kind": o.kind, "counts": counts(o), "flavour": o.flavour} for o in shown
        },
        "images": {
            Workspace.Kind.NOTEBOOK: [{"slug": i.slug, "name": i.display_name} for i in notebook_images],
            Workspace.Kind.JOB: [{"slug": i.slug, "name": i.display_name} for i in job_images],
        },
    }
    return {
        "teams": teams,
        "current_team": current,
        "offerings": rows,
        "gpu_counts": counts(chosen) if chosen is not None else [1],
        "notebook_images": notebook_images,
        "job_images": job_images,
        "priorities": services.job_priorities(),
        "limits": policy.limits(),
        "name_max_length": NAME_MAX_LENGTH,
        "form_data": data,
        "operators": who_adds_members(),
        "currency": settings.BILLING_CURRENCY,
    }
