"""State changes of the organisation. Each runs in one transaction and writes an audit event."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from portal.models import AuditEvent, Membership, Team


def _snapshot(membership: Membership) -> dict[str, Any]:
    return {"team": membership.team.slug, "user": membership.user.get_username(), "role": membership.role}


def _check_role(role: str) -> None:
    if role not in Membership.Role.values:
        raise ValidationError({"role": f"Role must be one of: {', '.join(Membership.Role.values)}."})


def _lock_memberships(team: Team) -> list[Membership]:
    # Row locks serialise concurrent edits of one team, so "keep at least one lead" holds under races.
    return list(Membership.objects.select_for_update().filter(team=team).select_related("user", "team"))


def _leads_left(memberships: list[Membership], without: Membership) -> int:
    return sum(1 for m in memberships if m.role == Membership.Role.LEAD and m.pk != without.pk)


@transaction.atomic
def do_add_member(actor: Any, team: Team, username: str, role: str = Membership.Role.MEMBER) -> Membership:
    _check_role(role)
    user_model = get_user_model()
    try:
        user = user_model.objects.get(username=username, is_active=True)
    except user_model.DoesNotExist:
        raise ValidationError({"username": f"No active user named {username!r}."}) from None
    memberships = _lock_memberships(team)
    if any(m.user_id == user.pk for m in memberships):
        raise ValidationError({"username": f"{username} is already a member of {team.name}."})
    membership = Membership.objects.create(team=team, user=user, role=role)
    AuditEvent.record(actor=actor, action="membership.add", target=membership, team=team, after=_snapshot(membership))
    return membership


def _locked_membership(team: Team, username: str) -> tuple[Membership, list[Membership]]:
    memberships = _lock_memberships(team)
    for membership in memberships:
        if membership.user.get_username() == username:
            return membership, memberships
    raise ValidationError({"username": f"{username} is not a member of {team.name}."})


@transaction.atomic
def do_change_member_role(actor: Any, team: Team, username: str, role: str) -> Membership:
    _check_role(role)
    membership, memberships = _locked_membership(team, username)
    if membership.role == role:
        return membership
    if role != Membership.Role.LEAD and _leads_left(memberships, membership) == 0:
        raise ValidationError({"role": f"{team.name} must keep at least one lead."})
    before = _snapshot(membership)
    membership.role = role
    membership.save(update_fields=["role"])
    AuditEvent.record(
        actor=actor,
        action="membership.role",
        target=membership,
        team=team,
        before=before,
        after=_snapshot(membership),
    )
    return membership


@transaction.atomic
def do_remove_member(actor: Any, team: Team, username: str) -> None:
    membership, memberships = _locked_membership(team, username)
    if membership.role == Membership.Role.LEAD and _leads_left(memberships, membership) == 0:
        raise ValidationError({"username": f"{username} is the last lead of {team.name}; appoint another first."})
    before = _snapshot(membership)
    AuditEvent.record(actor=actor, action="membership.remove", target=membership, team=team, before=before)
    membership.delete()
