"""A sign-in through the provider applied to the database: the account, its teams and its roles.

* The account is found by the provider's ``iss`` and ``sub`` (``SsoIdentity``), never by username or email:
  a local account (the demo's, a break-glass one) is never signed in as, even when the provider sends its
  username; such a sign-in is refused until an operator renames one of them.
* Memberships and organisation roles the claims give are marked ``managed_by_sso``; at every sign-in those are
  brought to what the claims say (added, role changed, removed). Rows made locally (``managed_by_sso`` false)
  stay, except that a team the claims name is taken over by them (its role is then the claims').
* Groups that name a team slug that does not exist are ignored with a log line: teams are made by operators.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone

from portal.models import AuditEvent, Membership, OrgRole, Team, User
from portal.sso.claims import Grants, groups_from_claims, map_groups
from portal.sso.config import SsoConfig
from portal.sso.errors import SsoRefused
from portal.sso.models import SsoIdentity

logger = logging.getLogger(__name__)


def _snapshot(membership: Membership) -> dict[str, Any]:
    return {
        "team": membership.team.slug,
        "user": membership.user.get_username(),
        "role": membership.role,
        "source": "sso",
    }


def _max_length(field: str) -> int:
    model_field = User._meta.get_field(field)
    assert isinstance(model_field, models.CharField) and model_field.max_length is not None
    return model_field.max_length


def _username(claims: Mapping[str, Any], config: SsoConfig) -> str:
    value = claims.get(config.username_claim)
    if not isinstance(value, str) or not value.strip():
        raise SsoRefused(
            f"The provider did not send your username ({config.username_claim}), so the portal cannot make your "
            "account. Tell the portal's operators.",
            detail=f"claim {config.username_claim!r} missing (OIDC_USERNAME_CLAIM)",
        )
    username = value.strip()
    try:
        UnicodeUsernameValidator()(username)
        if len(username) > _max_length("username"):
            raise ValidationError("too long")
    except ValidationError:
        raise SsoRefused(
            f"Your username {username!r} from the provider cannot be a portal username (letters, digits and "
            "@ . + - _, at most 150). Tell the portal's operators.",
            detail=f"claim {config.username_claim!r} = {username!r}",
        ) from None
    return username


def _account(claims: Mapping[str, Any], config: SsoConfig) -> User:
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    username = _username(claims, config)
    identity = SsoIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    if identity is None:
        if User.objects.filter(username__iexact=username).exists():
            raise SsoRefused(
                f"The portal already has another account named {username!r}, so you cannot sign in with that name "
                "through the provider. Ask an operator to rename one of them (a local account signs in with its "
                "password).",
                detail=f"username clash for sub {subject!r}",
            )
        user = User(username=username)
        user.set_unusable_password()
        user.save()
        identity = SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
        logger.info("sso: made account %s for %s at %s", username, subject, issuer)
    user = identity.user
    if not user.is_active:
        raise SsoRefused("Your portal account is disabled. Ask an operator.", detail=f"{user} inactive")
    if user.username != username and not User.objects.filter(username__iexact=username).exclude(pk=user.pk).exists():
        logger.info("sso: %s is now called %s", user.username, username)
        user.username = username
    for field, claim in (("email", "email"), ("first_name", "given_name"), ("last_name", "family_name")):
        value = claims.get(claim)
        if isinstance(value, str):
            setattr(user, field, value[: _max_length(field)])
    user.save()
    SsoIdentity.objects.filter(pk=identity.pk).update(last_login_at=timezone.now())
    return user


def _sync_memberships(user: User, grants: Grants) -> None:
    teams = {team.slug: team for team in Team.objects.filter(slug__in=grants.teams)}
    unknown = sorted(set(grants.teams) - set(teams))
    if unknown:
        logger.warning("sso: %s's groups name teams that do not exist, ignored: %s", user, ", ".join(unknown))
    current = {m.team.slug: m for m in Membership.objects.select_for_update().filter(user=user).select_related("team")}
    for slug, team in teams.items():
        role = grants.teams[slug]
        membership = current.get(slug)
        if membership is None:
            membership = Membership.objects.create(team=team, user=user, role=role, managed_by_sso=True)
            AuditEvent.record(
                actor=user, action="membership.add", target=membership, team=team, after=_snapshot(membership)
            )
        elif membership.role != role or not membership.managed_by_sso:
            before = _snapshot(membership) | {"managed_by_sso": membership.managed_by_sso}
            membership.role, membership.managed_by_sso = role, True
            membership.save(update_fields=["role", "managed_by_sso"])
            AuditEvent.record(
                actor=user,
                action="membership.role",
                target=membership,
                team=team,
                before=before,
                after=_snapshot(membership),
            )
    for slug, membership in current.items():
        if membership.managed_by_sso and slug not in teams:
            before = _snapshot(membership)
            AuditEvent.record(
                actor=user, action="membership.remove", target=membership, team=membership.team, before=before
            )
            membership.delete()


def _sync_org_roles(user: User, grants: Grants) -> None:
    current = {r.role: r for r in OrgRole.objects.select_for_update().filter(user=user)}
    for role in grants.org_roles:
        existing = current.get(role)
        if existing is None:
            granted = OrgRole.objects.create(user=user, role=role, managed_by_sso=True)
            AuditEvent.record(actor=user, action="orgrole.add", target=granted, after={"role": role, "source": "sso"})
        elif not existing.managed_by_sso:
            existing.managed_by_sso = True
            existing.save(update_fields=["managed_by_sso"])
    for role, existing in current.items():
        if existing.managed_by_sso and role not in grants.org_roles:
            AuditEvent.record(
                actor=user, action="orgrole.remove", target=existing, before={"role": role, "source": "sso"}
            )
            existing.delete()


@transaction.atomic
def sign_in(claims: Mapping[str, Any], config: SsoConfig) -> User:
    """The account for verified ID-token ``claims``, its teams and roles brought to what the claims say."""
    grants = map_groups(groups_from_claims(claims, config.groups_claim), config.rules)
    user = _account(claims, config)
    _sync_memberships(user, grants)
    _sync_org_roles(user, grants)
    return user
