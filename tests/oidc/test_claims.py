"""Group claims to teams and roles: the pure mapping."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.models import Membership, OrgRole
from portal.sso.claims import (
    FINANCE,
    LEAD,
    MEMBER,
    OPERATOR,
    GroupRules,
    compile_team_pattern,
    groups_from_claims,
    map_groups,
    parse_group_map,
)
from portal.sso.errors import SsoRefused

RULES = GroupRules(
    lead_pattern=compile_team_pattern("L", "gpu-{team}-lead"),
    member_pattern=compile_team_pattern("M", "gpu-{team}-member"),
    explicit=parse_group_map(
        "G", '{"6f1c0d2e-guid": "platform-ml:lead", "all-research": ["vision:member", "language:member"]}'
    ),
    finance_groups=frozenset({"gpu-finance"}),
    operator_groups=frozenset({"gpu-operators"}),
)


def test_the_roles_are_the_models_roles() -> None:
    assert {MEMBER, LEAD} == set(Membership.Role.values)
    assert {FINANCE, OPERATOR} == set(OrgRole.Role.values)


def test_patterns_give_a_role_per_team() -> None:
    grants = map_groups(["gpu-vision-lead", "gpu-language-member", "unrelated", "gpu-finance"], RULES)
    assert grants.teams == {"vision": LEAD, "language": MEMBER}
    assert grants.org_roles == {FINANCE}


def test_lead_wins_over_member_whatever_the_order() -> None:
    assert map_groups(["gpu-vision-lead", "gpu-vision-member"], RULES).teams == {"vision": LEAD}
    assert map_groups(["gpu-vision-member", "gpu-vision-lead"], RULES).teams == {"vision": LEAD}
    assert map_groups(["all-research", "gpu-vision-lead"], RULES).teams == {"vision": LEAD, "language": MEMBER}


def test_patterns_match_whole_names_case_insensitively() -> None:
    assert map_groups(["GPU-Vision-Lead"], RULES).teams == {"vision": LEAD}
    assert map_groups(["xgpu-vision-lead", "gpu-vision-lead-old", "gpu--lead"], RULES).teams == {}


def test_keycloak_style_paths_are_a_pattern_too() -> None:
    rules = GroupRules(lead_pattern=compile_team_pattern("L", "/gpu/{team}/lead"))
    assert map_groups(["/gpu/vision/lead", "/gpu/vision"], rules).teams == {"vision": LEAD}


def test_the_explicit_map_maps_ids() -> None:
    grants = map_groups(["6f1c0d2e-guid", "operators-guid"], RULES)
    assert grants.teams == {"platform-ml": LEAD}
    assert grants.org_roles == frozenset()
    assert map_groups(["gpu-operators"], RULES).org_roles == {OPERATOR}


def test_no_groups_no_grants() -> None:
    grants = map_groups([], RULES)
    assert grants.teams == {}
    assert grants.org_roles == frozenset()


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("gpu-lead", "must contain {team} exactly once"),
        ("{team}-{team}", "must contain {team} exactly once"),
    ],
)
def test_bad_patterns_name_the_variable(raw: str, says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="OIDC_LEAD_GROUP_PATTERN") as caught:
        compile_team_pattern("OIDC_LEAD_GROUP_PATTERN", raw)
    assert says in str(caught.value)


def test_an_empty_pattern_is_off() -> None:
    assert compile_team_pattern("X", "  ") is None


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("{not json", "not valid JSON"),
        ('["vision:lead"]', "must be a JSON object"),
        ('{"g": "vision"}', "<team slug>:<role>"),
        ('{"g": "Vision Team:lead"}', "not a team slug"),
        ('{"g": "vision:owner"}', "role 'owner'"),
        ('{"g": []}', "maps to nothing"),
        ('{"g": 3}', "<team slug>:<role>"),
    ],
)
def test_bad_group_maps_name_the_variable(raw: str, says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="OIDC_GROUP_MAP") as caught:
        parse_group_map("OIDC_GROUP_MAP", raw)
    assert says in str(caught.value)


def test_groups_claim_shapes() -> None:
    assert groups_from_claims({"groups": ["a", "b"]}, "groups") == ["a", "b"]
    assert groups_from_claims({"groups": "a"}, "groups") == ["a"]
    assert groups_from_claims({}, "groups") == []
    assert groups_from_claims({"roles": ["x"]}, "roles") == ["x"]
    with pytest.raises(SsoRefused, match="form the portal does not understand"):
        groups_from_claims({"groups": [1, 2]}, "groups")


def test_entra_groups_overage_is_refused_rather_than_read_as_no_groups() -> None:
    claims = {"_claim_names": {"groups": "src1"}, "_claim_sources": {"src1": {"endpoint": "https://graph"}}}
    with pytest.raises(SsoRefused, match="too many groups"):
        groups_from_claims(claims, "groups")
