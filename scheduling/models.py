"""Quotas: how much of each GPU flavour a team is guaranteed."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models

from portal.models import Team


class TeamQuota(models.Model):
    """A team's guaranteed GPU-equivalents of one flavour (GPU model, e.g. ``H100-80GB-HBM3``).

    Admission locks this row (``select_for_update``) while it counts the team's use, so concurrent
    requests cannot both take the last unit.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    flavour = models.CharField(max_length=64, help_text="GPU model key; quota is counted per model.")
    guaranteed = models.DecimalField(
        max_digits=8, decimal_places=4, default=Decimal(0), validators=[MinValueValidator(Decimal(0))]
    )

    class Meta:
        ordering = ("team__name", "flavour")
        constraints = [models.UniqueConstraint(fields=("team", "flavour"), name="one_quota_per_team_flavour")]

    def __str__(self) -> str:
        return f"{self.team}: {self.guaranteed} x {self.flavour}"
