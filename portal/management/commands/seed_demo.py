from typing import Any

from django.core.management.base import BaseCommand

from portal.demo import seed_demo_organisation
from scheduling.demo import seed_demo_catalogue


class Command(BaseCommand):
    help = "Create (or refresh) the demo organisation and print the demo logins."

    def handle(self, *args: Any, **options: Any) -> None:
        people = seed_demo_organisation()
        seed_demo_catalogue()
        self.stdout.write(self.style.SUCCESS("Demo organisation ready. Logins:"))
        for person in people:
            roles = [f"{team}:{role}" for team, role in person.teams] + list(person.org_roles)
            self.stdout.write(f"  {person.username:<6} / {person.password:<16} {', '.join(roles)}")
