"""The one door from ``workspaces`` into ``scheduling``: what the web side may ask of the scheduler.

Pages, API views and workspace actions call these and nothing else of ``scheduling`` (an import contract in
pyproject.toml holds them to it). They return plain values, hand cluster work to the scheduling tasks by
name, and turn cluster trouble into a readable message instead of an error page.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.cache import cache

from portal.queue import enqueue_coalesced
from scheduling.activity import Activity, Point, latest, series
from scheduling.activity import version as activity_version
from scheduling.activity_charts import sparkline as activity_sparkline
from scheduling.demand import offering_demand, spec_for
from scheduling.inventory import Capacity
from scheduling.kube import names
from scheduling.kube.calls import KubeError
from scheduling.kube.client import KubeNotConfigured, api_client, kube
from scheduling.kube.spec import env_name_problem
from scheduling.loops import tasknames
from scheduling.loops.provisioning import notebook_base_url, request_teardown
from scheduling.models import MemberCap
from scheduling.priorities import LEVELS
from scheduling.quota.rules import (
    IdleRules,
    TeamRules,
    idle_rules,
    member_use,
    never_fits,
    quota_summaries,
    team_rules,
    team_rules_for,
)
from workspaces.models import GpuOffering, Workspace

__all__ = [
    "Activity",
    "IdleRules",
    "Point",
    "TeamRules",
    "activity_sparkline",
    "cluster_events",
    "env_name_problem",
    "free_units",
    "idle_rules",
    "job_priorities",
    "member_quota_left",
    "members_quota_left",
    "never_fits",
    "notebook_url",
    "quota_summaries",
    "recent_logs",
    "request_cycle",
    "team_rules",
    "team_rules_for",
    "tear_down",
    "workspace_activity",
    "workspace_series",
]

log = logging.getLogger(__name__)
CAPACITY_CACHE_SECONDS = 5


def request_cycle() -> None:
    """Run a scheduling cycle soon (after this transaction commits); a burst of calls makes one cycle."""
    enqueue_coalesced(tasknames.RUN_CYCLE)


def tear_down(workspace_id: int, *, delete_home: bool) -> None:
    """Remove the workspace's pods and services after commit; its home volume too when ``delete_home``."""
    request_teardown(workspace_id, delete_volume=delete_home)


def _capacity() -> Capacity | None:
    try:
        client = kube()
        return Capacity.from_objects(client.list("Node", None, ""), client.list("Pod", None, ""))
    except (KubeError, KubeNotConfigured) as exc:  # availability is advisory; the page still renders
        log.warning("cluster capacity unavailable: %s", exc)
        return None


def free_units(offerings: Iterable[GpuOffering]) -> dict[str, int | None]:
    """How many more single-unit requests of each offering the cluster could start now (None: unknown)."""
    offerings = list(offerings)
    key = "free-units:" + ",".join(sorted(o.slug for o in offerings))
    cached: dict[str, int | None] | None = cache.get(key)
    if cached is not None:
        return cached
    capacity = _capacity()
    result: dict[str, int | None] = {}
    for offering in offerings:
        if capacity is None:
            result[offering.slug] = None
            continue
        result[offering.slug] = capacity.free_units(offering_demand(offering))
    cache.set(key, result, CAPACITY_CACHE_SECONDS)
    return result


def _names(workspace: Workspace) -> tuple[str, str]:
    spec = spec_for(workspace)
    return names.namespace_for(workspace.team.slug), names.base_name(spec)


def notebook_url(workspace: Workspace, token: str) -> str | None:
    """The link that opens the running notebook; None when no cluster is configured to reach it through."""
    namespace, base = _names(workspace)
    path = notebook_base_url(namespace, base)
    if settings.NOTEBOOK_INGRESS_HOST:
        scheme = "https" if settings.NOTEBOOK_INGRESS_TLS else "http"
        return f"{scheme}://{settings.NOTEBOOK_INGRESS_HOST}{path}?token={token}"
    if settings.NOTEBOOK_PROXY_URL:
        return f"{settings.NOTEBOOK_PROXY_URL.rstrip('/')}{path}?token={token}"
    try:
        host = str(api_client().configuration.host)
    except KubeNotConfigured:  # the page still answers; it has no link to give
        return None
    return f"{host.rstrip('/')}{path}?token={token}"


def recent_logs(workspace: Workspace, lines: int = 100) -> str:
    namespace, base = _names(workspace)
    try:
        client = kube()
        if workspace.kind == Workspace.Kind.JOB:
            pods = client.list("Pod", namespace, f"job-name={base}")
            if not pods:
                return ""
            return client.pod_log(namespace, pods[0]["metadata"]["name"], lines)
        return client.pod_log(namespace, base, lines)
    except (KubeError, KubeNotConfigured) as exc:
        return f"(no logs: {exc})"


def cluster_events(workspace: Workspace) -> list[dict[str, Any]]:
    namespace, base = _names(workspace)
    kind = "Job" if workspace.kind == Workspace.Kind.JOB else "Pod"
    try:
        events = kube().events_for(namespace, kind, base)
    except (KubeError, KubeNotConfigured) as exc:
        return [{"type": "Warning", "reason": "Unavailable", "message": str(exc)}]
    return [
        {
            "type": e.get("type"),
            "reason": e.get("reason"),
            "message": e.get("message"),
            "at": e.get("lastTimestamp") or e.get("eventTime") or e.get("metadata", {}).get("creationTimestamp"),
        }
        for e in events
    ]


def workspace_activity(workspaces: Iterable[Workspace], now: Any) -> dict[int, Activity]:
    """Running workspaces' latest telemetry and idle state, by id (``scheduling/activity.py``)."""
    return latest(workspaces, now)


def workspace_activity_version(running: Iterable[int], upto: Any = None) -> tuple[Any, ...]:
    """What :func:`workspace_activity` of the ``running`` workspaces depends on besides their columns and the
    clock (for ETags); ``upto``: only the telemetry collected by then."""
    return activity_version(list(running), upto)


def workspace_series(workspace: Workspace, now: Any, hours: int = 6) -> list[Point]:
    """The workspace's recent GPU activity and memory, oldest first."""
    return series(workspace, now, hours)


def member_quota_left(team_ids: Iterable[int], member_id: int) -> dict[tuple[int, str], Decimal]:
    """GPU-equivalents ``member_id`` could still start within guarantee, per (team, flavour): the team's
    guarantee less what the team holds and, where the lead caps the member, the cap less what the member
    holds; never below zero. A flavour the team has no quota for is missing (nothing left)."""
    ids = list(team_ids)
    return members_quota_left(ids, [(team_id, member_id) for team_id in ids])[member_id]


def members_quota_left(
    team_ids: Iterable[int], members: Iterable[tuple[int, int]]
) -> dict[int, dict[tuple[int, str], Decimal]]:
    """:func:`member_quota_left` of each member of ``members`` (team, member) pairs, by member, in four
    queries whatever their number."""
    ids, pairs = list(team_ids), set(members)
    team_left = {
        key: max(Decimal(0), numbers["guaranteed"] - numbers["used"]) for key, numbers in quota_summaries(ids).items()
    }
    left: dict[int, dict[tuple[int, str], Decimal]] = {member: dict(team_left) for _, member in pairs}
    held = member_use(ids)
    caps = MemberCap.objects.filter(team_id__in=ids, user_id__in=list(left))
    for team_id, member, flavour, cap in caps.values_list("team_id", "user_id", "flavour", "cap"):
        if (team_id, member) not in pairs:
            continue
        own = max(Decimal(0), cap - held.get((team_id, member, flavour), Decimal(0)))
        left[member][(team_id, flavour)] = min(left[member].get((team_id, flavour), Decimal(0)), own)
    return left


def job_priorities() -> list[dict[str, str]]:
    """The priorities a training job may ask for (every member may use each), most urgent first, with what
    each means. Notebooks are always interactive."""
    return [
        {"value": str(priority), "label": priority.label, "description": level.description}
        for priority, level in sorted(LEVELS.items(), key=lambda item: -item[1].value)
        if priority != Workspace.Priority.INTERACTIVE
    ]
