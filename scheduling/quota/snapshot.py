"""The scheduling cycle's view of quota: limits and use of the queued teams, read in a few queries and kept
up to date in memory as the cycle admits, instead of two to four queries per admission.

Read under the quota rows' locks (``lock=True``, inside the cycle's transaction), it is authoritative: no
other admission can change those teams' use until the cycle commits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from scheduling.models import MemberCap, TeamQuota
from scheduling.quota.rules import NO_LIMITS, ZERO, Limits, member_use, team_use
from workspaces.models import Workspace


@dataclass
class QuotaSnapshot:
    limits: dict[tuple[int, str], Limits]
    used: dict[tuple[int, str], Decimal]
    caps: dict[tuple[int, int, str], Decimal]  # (team, member, flavour)
    member_used: dict[tuple[int, int, str], Decimal] = field(default_factory=dict)

    @classmethod
    def read(cls, team_ids: Iterable[int], *, lock: bool = False) -> QuotaSnapshot:
        ids = sorted(set(team_ids))
        quotas = TeamQuota.objects.filter(team_id__in=ids).order_by("pk")  # one lock order: no deadlocks
        if lock:
            quotas = quotas.select_for_update()
        caps = {(c.team_id, c.user_id, c.flavour): c.cap for c in MemberCap.objects.filter(team_id__in=ids)}
        member_used = member_use({team for team, _, _ in caps}) if caps else {}
        return cls(
            limits={(q.team_id, q.flavour): Limits(q.guaranteed, q.borrow_limit) for q in quotas},
            used=defaultdict(Decimal, team_use(ids)),
            caps=caps,
            member_used=member_used,
        )

    def limit(self, team_id: int, flavour: str) -> Limits:
        return self.limits.get((team_id, flavour), NO_LIMITS)

    def ceiling(self, team_id: int, flavour: str, *, borrowing: bool) -> Decimal:
        return self.limit(team_id, flavour).ceiling(borrowing=borrowing)

    def in_use(self, team_id: int, flavour: str) -> Decimal:
        return self.used.get((team_id, flavour), ZERO)

    def member(self, team_id: int, user_id: int, flavour: str) -> tuple[Decimal, Decimal] | None:
        """(cap, in use) for a member with a cap on ``flavour`` in this team; None when uncapped."""
        cap = self.caps.get((team_id, user_id, flavour))
        return None if cap is None else (cap, self.member_used.get((team_id, user_id, flavour), ZERO))

    def take(self, workspace: Workspace) -> None:
        """Count an admitted workspace."""
        flavour = workspace.offering.flavour
        self.used[(workspace.team_id, flavour)] = self.in_use(workspace.team_id, flavour) + workspace.gpu_equivalents
        key = (workspace.team_id, workspace.owner_id, flavour)
        if key in self.caps:
            self.member_used[key] = self.member_used.get(key, ZERO) + workspace.gpu_equivalents
