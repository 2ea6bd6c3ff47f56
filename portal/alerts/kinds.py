"""The in-portal alerts, who hears of each, and how long each must hold before it fires. Pure.

Each alert is the condition of one Prometheus rule (``portal.metrics.rules.groups``), and takes its ``for``
period and severity from that rule as rendered from the same thresholds, so the two cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from portal.metrics.rules import Thresholds, groups

CRITICAL, WARNING = "critical", "warning"


@dataclass(frozen=True)
class AlertKind:
    name: str
    label: str
    rule: str  # the Prometheus alert it mirrors
    team_scoped: bool
    operators: bool  # who is notified (operators see every alert on the page either way)
    leads: bool  # the team's leads, for a team-scoped alert


WITHIN_QUOTA = "within_quota"
CONTENTION = "contention"
IDLE = "idle"
IDLE_TEAM = "idle_team"
QUEUE_WAIT = "queue_wait"
LOOP_STALLED = "loop_stalled"
KUBE_API_ERRORS = "kube_api_errors"

KINDS: dict[str, AlertKind] = {
    k.name: k
    for k in (
        AlertKind(WITHIN_QUOTA, "Waiting within quota", "GpuPortalWaitingWithinQuota", True, True, True),
        AlertKind(CONTENTION, "Demand above capacity", "GpuPortalContention", False, True, False),
        AlertKind(IDLE, "Allocated GPUs idle", "GpuPortalIdleAllocatedGpus", False, True, False),
        # Operators hear of idle GPUs per model; a lead of their own team's (both are on operators' page).
        AlertKind(IDLE_TEAM, "Team's GPUs idle", "GpuPortalIdleAllocatedGpus", True, False, True),
        AlertKind(QUEUE_WAIT, "Long admission waits", "GpuPortalQueueWaitHigh", False, True, False),
        AlertKind(LOOP_STALLED, "Control loop stalled", "GpuPortalLoopStalled", False, True, False),
        AlertKind(KUBE_API_ERRORS, "Kubernetes API failing", "GpuPortalKubernetesApiErrors", False, True, False),
    )
}


@dataclass(frozen=True)
class Rule:
    hold: timedelta  # the rule's ``for``
    severity: str


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smh])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str) -> timedelta:
    """A Prometheus duration as ``rules`` writes them ("5m", "7.5m", "1h30m")."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return timedelta(seconds=sum(float(n) * _UNIT_SECONDS[u] for n, u in parts))


def rules_by_kind(t: Thresholds) -> dict[str, Rule]:
    """Each alert kind's ``for`` and severity, read off the Prometheus rules rendered from ``t``."""
    rendered = {r["alert"]: r for group in groups(t) for r in group["rules"]}
    return {
        name: Rule(parse_duration(rendered[k.rule]["for"]), rendered[k.rule]["labels"]["severity"])
        for name, k in KINDS.items()
    }
