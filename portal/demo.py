"""The demo organisation: two departments, three teams and one person per role.

Idempotent: running it again resets the demo people's passwords and roles and adds what is missing.
The passwords are printed by ``manage.py seed_demo`` and listed in the README.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from portal.models import Department, Membership, OrgRole, Team, User

DEPARTMENTS = (
    ("Research", "research", "RES-4100"),
    ("Engineering", "engineering", "ENG-2200"),
)
TEAMS = (
    ("Vision", "vision", "research", "Computer vision models and datasets."),
    ("Language", "language", "research", "Language models and evaluation."),
    ("Platform ML", "platform-ml", "engineering", "Training infrastructure and production models."),
)


@dataclass(frozen=True)
class DemoPerson:
    username: str
    full_name: str
    password: str
    teams: tuple[tuple[str, str], ...] = ()
    org_roles: tuple[str, ...] = ()
    staff: bool = False


PEOPLE = (
    DemoPerson("alice", "Alice Archer", "alice-gpu-demo", (("vision", "member"),)),
    DemoPerson("bob", "Bob Baker", "bob-gpu-demo", (("language", "member"),)),
    DemoPerson("carol", "Carol Chen", "carol-gpu-demo", (("vision", "member"), ("platform-ml", "member"))),
    DemoPerson("lena", "Lena Lead", "lena-gpu-demo", (("vision", "lead"), ("language", "lead"))),
    DemoPerson("fiona", "Fiona Finance", "fiona-gpu-demo", org_roles=("finance",)),
    DemoPerson("oscar", "Oscar Operator", "oscar-gpu-demo", (("platform-ml", "lead"),), ("operator",), staff=True),
)


@transaction.atomic
def seed_demo_organisation() -> list[DemoPerson]:
    departments = {}
    for name, slug, cost_centre in DEPARTMENTS:
        departments[slug], _ = Department.objects.update_or_create(
            slug=slug, defaults={"name": name, "cost_centre": cost_centre}
        )
    teams = {}
    for name, slug, department, description in TEAMS:
        teams[slug], _ = Team.objects.update_or_create(
            slug=slug,
            defaults={"name": name, "department": departments[department], "description": description},
        )
    for person in PEOPLE:
        first, _, last = person.full_name.partition(" ")
        user, _ = User.objects.update_or_create(
            username=person.username,
            defaults={
                "first_name": first,
                "last_name": last,
                "email": f"{person.username}@example.org",
                "is_staff": person.staff,
                "is_superuser": person.staff,
                "is_active": True,
            },
        )
        user.set_password(person.password)
        user.save(update_fields=["password"])
        for team_slug, role in person.teams:
            Membership.objects.update_or_create(team=teams[team_slug], user=user, defaults={"role": role})
        for role in person.org_roles:
            OrgRole.objects.get_or_create(user=user, role=role)
    return list(PEOPLE)
