"""A sign-in applied to the database: accounts by subject, SSO-managed memberships synced both ways, local
ones left alone, unknown teams ignored."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from portal.models import AuditEvent, Membership, OrgRole, User
from portal.sso.claims import GroupRules, compile_team_pattern
from portal.sso.config import SsoConfig
from portal.sso.errors import SsoRefused
from portal.sso.sync import sign_in
from tests import factories

pytestmark = pytest.mark.django_db

CONFIG = SsoConfig(
    enabled=True,
    rules=GroupRules(
        lead_pattern=compile_team_pattern("L", "gpu-{team}-lead"),
        member_pattern=compile_team_pattern("M", "gpu-{team}-member"),
        finance_groups=frozenset({"gpu-finance"}),
        operator_groups=frozenset({"gpu-operators"}),
    ),
)
ISS = "https://idp.example.org"


def claims(sub: str = "s-1", username: str = "sam", groups: list[str] | None = None, **more: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"iss": ISS, "sub": sub, "preferred_username": username, **more}
    if groups is not None:
        base["groups"] = groups
    return base


def teams_of(user: User) -> set[tuple[str, str, bool]]:
    return set(user.memberships.values_list("team__slug", "role", "managed_by_sso"))


def test_memberships_follow_the_claims_at_every_sign_in(org) -> None:
    user = sign_in(claims(groups=["gpu-alpha-member", "gpu-beta-lead"], given_name="Sam", email="sam@x.org"), CONFIG)
    assert (user.username, user.first_name, user.email) == ("sam", "Sam", "sam@x.org")
    assert teams_of(user) == {("alpha", "member", True), ("beta", "lead", True)}
    # Promoted in alpha, removed from beta at the provider.
    again = sign_in(claims(groups=["gpu-alpha-lead"]), CONFIG)
    assert again.pk == user.pk
    assert teams_of(user) == {("alpha", "lead", True)}
    actions = list(AuditEvent.objects.filter(actor=user).order_by("id").values_list("action", flat=True))
    assert actions == ["membership.add", "membership.add", "membership.role", "membership.remove"]
    # Out of every group: no team.
    sign_in(claims(groups=[]), CONFIG)
    assert teams_of(user) == set()


def test_local_memberships_are_kept_and_named_teams_are_taken_over(org) -> None:
    user = sign_in(claims(groups=[]), CONFIG)
    factories.add_member(org.alpha, user, Membership.Role.MEMBER)  # a lead added them by hand
    factories.add_member(org.beta, user, Membership.Role.LEAD)
    sign_in(claims(groups=["gpu-beta-member"]), CONFIG)
    assert teams_of(user) == {("alpha", "member", False), ("beta", "member", True)}
    sign_in(claims(groups=[]), CONFIG)
    assert teams_of(user) == {("alpha", "member", False)}


def test_org_roles_follow_the_claims_and_local_ones_stay(org) -> None:
    user = sign_in(claims(groups=["gpu-finance", "gpu-operators"]), CONFIG)
    assert set(user.orgroles.values_list("role", "managed_by_sso")) == {("finance", True), ("operator", True)}
    sign_in(claims(groups=["gpu-finance"]), CONFIG)
    assert set(user.orgroles.values_list("role", flat=True)) == {"finance"}
    OrgRole.objects.create(user=user, role="operator")  # granted locally
    sign_in(claims(groups=[]), CONFIG)
    assert set(user.orgroles.values_list("role", "managed_by_sso")) == {("operator", False)}


def test_break_glass_accounts_are_never_signed_in_as(org) -> None:
    with pytest.raises(SsoRefused, match="already has another account named 'OSCAR'"):
        sign_in(claims(username="OSCAR", groups=["gpu-alpha-lead"]), CONFIG)
    assert not org.operator.memberships.exists()
    assert not User.objects.filter(sso_identity__subject="s-1").exists()


def test_the_account_is_found_by_subject_and_follows_renames(org) -> None:
    user = sign_in(claims(sub="s-9", username="old.name"), CONFIG)
    renamed = sign_in(claims(sub="s-9", username="new.name"), CONFIG)
    assert renamed.pk == user.pk
    assert renamed.username == "new.name"
    # Another subject with the same username is someone else: refused.
    with pytest.raises(SsoRefused, match=r"another account named 'new\.name'"):
        sign_in(claims(sub="s-10", username="new.name"), CONFIG)
    # The same subject at another issuer is someone else too.
    with pytest.raises(SsoRefused):
        sign_in(claims(sub="s-9", username="new.name") | {"iss": "https://other.example.org"}, CONFIG)


def test_unknown_team_slugs_are_ignored_with_a_log_line(org, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="portal.sso.sync"):
        user = sign_in(claims(groups=["gpu-gamma-lead", "gpu-alpha-member"]), CONFIG)
    assert teams_of(user) == {("alpha", "member", True)}
    assert "gamma" in caplog.text
    assert not user.memberships.filter(team__slug="gamma").exists()


@pytest.mark.parametrize(
    ("claim_set", "says"),
    [
        ({"iss": ISS, "sub": "s-2"}, "did not send your username"),
        (claims(username="has space"), "cannot be a portal username"),
        (claims(username="x" * 151), "cannot be a portal username"),
    ],
)
def test_unusable_usernames_are_refused(org, claim_set: dict[str, Any], says: str) -> None:
    with pytest.raises(SsoRefused, match=says):
        sign_in(claim_set, CONFIG)


def test_a_disabled_account_is_refused(org) -> None:
    user = sign_in(claims(), CONFIG)
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(SsoRefused, match="disabled"):
        sign_in(claims(), CONFIG)
