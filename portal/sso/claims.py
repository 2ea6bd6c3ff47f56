"""ID-token claims to teams and roles: pure functions, no database.

A person's groups (the ``groups`` claim by default) are matched against, in this order of strength:

* the explicit map ``OIDC_GROUP_MAP``: ``{"<group>": "<team slug>:<role>"}`` (or a list of such), for
  providers that send group ids (Entra ID's object ids) rather than names;
* two patterns with a ``{team}`` placeholder, ``OIDC_LEAD_GROUP_PATTERN`` (``gpu-{team}-lead``) and
  ``OIDC_MEMBER_GROUP_PATTERN`` (``gpu-{team}-member``), matched case-insensitively against the whole name;
* the organisation-wide groups ``OIDC_FINANCE_GROUPS`` and ``OIDC_OPERATOR_GROUPS`` (exact names).

A person matched to a team both as member and lead is its lead. Which of the named teams exist is for the
caller (``portal/sso/sync.py``) to decide.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from portal.sso.errors import SsoRefused

LEAD = "lead"
MEMBER = "member"
FINANCE = "finance"
OPERATOR = "operator"
ROLES = (MEMBER, LEAD)
_RANK = {MEMBER: 1, LEAD: 2}
SLUG = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")
_PLACEHOLDER = "{team}"


@dataclass(frozen=True)
class GroupRules:
    lead_pattern: re.Pattern[str] | None = None
    member_pattern: re.Pattern[str] | None = None
    explicit: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    finance_groups: frozenset[str] = frozenset()
    operator_groups: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Grants:
    """What the claims give: a role per team slug, and organisation-wide roles."""

    teams: dict[str, str]
    org_roles: frozenset[str]


def compile_team_pattern(name: str, raw: str) -> re.Pattern[str] | None:
    """``gpu-{team}-lead`` -> a regular expression whose group ``team`` is the slug. Empty: no pattern."""
    raw = raw.strip()
    if not raw:
        return None
    if raw.count(_PLACEHOLDER) != 1:
        raise ImproperlyConfigured(f"{name}={raw!r} must contain {_PLACEHOLDER} exactly once, e.g. gpu-{{team}}-lead.")
    before, after = raw.split(_PLACEHOLDER)
    return re.compile(
        f"{re.escape(before)}(?P<team>[a-z0-9](?:[a-z0-9-]{{0,38}}[a-z0-9])?){re.escape(after)}", re.IGNORECASE
    )


def _grant(name: str, group: str, value: Any) -> tuple[str, str]:
    if not isinstance(value, str) or value.count(":") != 1:
        raise ImproperlyConfigured(f'{name}: group {group!r} must map to "<team slug>:<role>", e.g. "vision:lead".')
    slug, role = (part.strip() for part in value.split(":"))
    if not SLUG.match(slug):
        raise ImproperlyConfigured(f"{name}: group {group!r} names {slug!r}, which is not a team slug.")
    if role not in ROLES:
        raise ImproperlyConfigured(f"{name}: group {group!r} has role {role!r}; use one of: {', '.join(ROLES)}.")
    return slug, role


def parse_group_map(name: str, raw: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """``{"<group>": "vision:lead"}`` or ``{"<group>": ["vision:member", "language:member"]}``."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"{name} is not valid JSON: {exc.msg} at character {exc.pos}.") from None
    if not isinstance(data, dict):
        raise ImproperlyConfigured(f'{name} must be a JSON object: {{"<group>": "<team slug>:<role>"}}.')
    parsed: dict[str, tuple[tuple[str, str], ...]] = {}
    for group, value in data.items():
        values = value if isinstance(value, list) else [value]
        if not values:
            raise ImproperlyConfigured(f"{name}: group {group!r} maps to nothing.")
        parsed[group] = tuple(_grant(name, group, item) for item in values)
    return parsed


def groups_from_claims(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The person's groups. A missing claim is no groups; a claim of the wrong shape is refused, and so is
    Entra ID's "groups overage" (too many groups to send: syncing would wrongly remove every membership)."""
    names = claims.get("_claim_names")
    if claim not in claims and isinstance(names, dict) and claim in names:
        raise SsoRefused(
            "Your account is in too many groups for the provider to send them, so the portal cannot tell your "
            "teams. Ask an administrator to send only the groups assigned to the GPU portal.",
            detail=f"{claim} overage: _claim_names names {claim!r}",
        )
    value = claims.get(claim)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise SsoRefused(
        "The provider sent your groups in a form the portal does not understand.",
        detail=f"claim {claim!r} is {type(value).__name__}, not a list of strings",
    )


def map_groups(groups: Iterable[str], rules: GroupRules) -> Grants:
    teams: dict[str, str] = {}
    org_roles: set[str] = set()

    def give(slug: str, role: str) -> None:
        if _RANK[role] > _RANK.get(teams.get(slug, ""), 0):
            teams[slug] = role

    for group in groups:
        for slug, role in rules.explicit.get(group, ()):
            give(slug, role)
        for pattern, role in ((rules.lead_pattern, LEAD), (rules.member_pattern, MEMBER)):
            match = pattern.fullmatch(group) if pattern else None
            if match:
                give(match.group("team").lower(), role)
        if group in rules.finance_groups:
            org_roles.add(FINANCE)
        if group in rules.operator_groups:
            org_roles.add(OPERATOR)
    return Grants(teams=teams, org_roles=frozenset(org_roles))
