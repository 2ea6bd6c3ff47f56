"""Each team's time-decayed use per flavour, kept between scheduling cycles for fair-share ordering.

Every cycle ages the stored averages by the time since they were last updated, folding in what each team
holds now (:func:`scheduling.engine.fairshare.decay`), and writes them back in one statement. The held
units stand for the whole interval since the last cycle; cycles run every few seconds, far below the
half-life (``FAIR_SHARE_HALF_LIFE_SECONDS``), so the error is small.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings

from portal.models import Team
from scheduling.engine.fairshare import decay
from scheduling.engine.quota import Workload
from scheduling.models import DecayedUsage

Key = tuple[str, str]  # (team slug, flavour)


def advance(admitted: Iterable[Workload], now: datetime) -> dict[Key, float]:
    """Age every team's decayed usage to ``now`` with what it holds, store it, and return it."""
    held: dict[Key, float] = defaultdict(float)
    for workload in admitted:
        held[(workload.team, workload.flavour)] += workload.units
    stored = {(row.team.slug, row.flavour): row for row in DecayedUsage.objects.select_related("team")}
    half_life = settings.FAIR_SHARE_HALF_LIFE_SECONDS
    usage: dict[Key, float] = {}
    for key in stored.keys() | held.keys():
        row = stored.get(key)
        elapsed = max(0.0, (now - row.updated_at).total_seconds()) if row else 0.0
        usage[key] = decay(row.usage if row else 0.0, held.get(key, 0.0), elapsed, half_life)
    teams = dict(Team.objects.filter(slug__in={team for team, _ in usage}).values_list("slug", "pk"))
    DecayedUsage.objects.bulk_create(
        [
            DecayedUsage(team_id=teams[team], flavour=flavour, usage=value, updated_at=now)
            for (team, flavour), value in usage.items()
            if team in teams
        ],
        update_conflicts=True,
        unique_fields=["team", "flavour"],
        update_fields=["usage", "updated_at"],
    )
    return usage
