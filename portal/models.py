"""The organisation: people, departments, teams, memberships, organisation-wide roles, audit log."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.validators import RegexValidator
from django.db import models

slug_validator = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$",
    "Use 1-40 lower-case letters, digits and hyphens, starting and ending with a letter or digit.",
)


class User(AbstractUser):
    """A person who signs in. Their powers come from memberships and organisation roles."""

    def org_roles(self) -> set[str]:
        # Cached per instance: navigation and access checks ask several times per request.
        cached: set[str] | None = getattr(self, "_org_roles_cache", None)
        if cached is None:
            cached = set(self.orgroles.order_by().values_list("role", flat=True))  # no join for the default order
            self._org_roles_cache = cached
        return cached

    def has_org_role(self, role: str) -> bool:
        return self.is_active and role in self.org_roles()

    @property
    def is_finance(self) -> bool:
        return self.has_org_role(OrgRole.Role.FINANCE)

    @property
    def is_operator(self) -> bool:
        return self.has_org_role(OrgRole.Role.OPERATOR)


class TeamQuerySet(models.QuerySet["Team"]):
    def visible_to(self, user: User | Any) -> TeamQuerySet:
        """Teams a person may look at: their own, or every team for finance and operators."""
        if not getattr(user, "is_authenticated", False) or not user.is_active:
            return self.none()
        if user.is_finance or user.is_operator:
            return self.all()
        return self.filter(memberships__user=user).distinct()


class Department(models.Model):
    """A unit of the organisation that pays for its teams' GPU use through a cost centre."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    cost_centre = models.CharField(
        max_length=32,
        unique=True,
        validators=[RegexValidator(r"^[A-Z0-9][A-Z0-9-]*$", "Use upper-case letters, digits and hyphens.")],
        help_text="Finance's code for this department, e.g. RES-4100.",
    )

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    """A group of researchers with a shared GPU quota. Its slug names its Kubernetes namespace."""

    department = models.ForeignKey(Department, on_delete=models.PROTECT, related_name="teams")
    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=40, unique=True, validators=[slug_validator])
    description = models.TextField(blank=True)
    members: models.ManyToManyField[User, Membership] = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A person's place in a team: a member requests workspaces, a lead also manages the team."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        LEAD = "lead", "Lead"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    # Granted by the provider's groups at sign-in (portal/sso/sync.py), which adds and removes these alone.
    managed_by_sso = models.BooleanField(default=False, help_text="Set and removed by single sign-on.")

    class Meta:
        ordering = ("team__name", "user__username")
        constraints = [models.UniqueConstraint(fields=("team", "user"), name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class OrgRole(models.Model):
    """An organisation-wide role: finance reads all costs; operators run the platform."""

    class Role(models.TextChoices):
        FINANCE = "finance", "Finance"
        OPERATOR = "operator", "Operator"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="orgroles")
    role = models.CharField(max_length=16, choices=Role.choices)
    managed_by_sso = models.BooleanField(default=False, help_text="Set and removed by single sign-on.")

    class Meta:
        ordering = ("user__username", "role")
        constraints = [models.UniqueConstraint(fields=("user", "role"), name="one_orgrole_per_user")]

    def __str__(self) -> str:
        return f"{self.user}: {self.role}"


class AppendOnly(Exception):
    """An attempt to change or delete an audit event."""


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    """Refuses the ORM's bulk paths for changing or removing rows."""

    def update(self, **kwargs: Any) -> int:
        raise AppendOnly("Audit events cannot be changed.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnly("Audit events cannot be deleted.")


class AuditEvent(models.Model):
    """Who changed what, when, with the state before and after. Rows are only ever added: saving an existing
    row, deleting one and the queryset's ``update``/``delete`` raise :class:`AppendOnly`, and the admin
    offers no change or delete. (Deleting a user or team still blanks ``actor``/``team`` through their
    ``SET_NULL``, so the event outlives them.)"""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ("-at", "-id")

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target_type}:{self.target_id}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnly("Audit events cannot be changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnly("Audit events cannot be deleted.")

    @classmethod
    def record(
        cls,
        *,
        actor: Any,
        action: str,
        target: models.Model,
        team: Team | None = None,
        before: dict[str, Any] | None = None,
        after: dict[str, Any] | None = None,
    ) -> AuditEvent:
        return cls.objects.create(
            actor=actor if getattr(actor, "is_authenticated", False) else None,
            action=action,
            target_type=target._meta.label_lower,
            target_id=str(target.pk),
            team=team,
            before=before,
            after=after,
        )


# Billing (and alert) models live in their own packages; imported here so Django registers them with this app.
from portal.alerts.models import OpsAlert as OpsAlert  # noqa: E402
from portal.alerts.models import OpsAlertNotice as OpsAlertNotice  # noqa: E402
from portal.billing.models import Budget as Budget  # noqa: E402
from portal.billing.models import BudgetAlert as BudgetAlert  # noqa: E402
from portal.billing.models import CapacityInterval as CapacityInterval  # noqa: E402
from portal.billing.models import ClosedMonth as ClosedMonth  # noqa: E402
from portal.billing.models import LedgerCursor as LedgerCursor  # noqa: E402
from portal.billing.models import RateCardEntry as RateCardEntry  # noqa: E402
from portal.billing.models import UsageInterval as UsageInterval  # noqa: E402
from portal.sso.models import SsoIdentity as SsoIdentity  # noqa: E402
