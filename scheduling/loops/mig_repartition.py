"""MIG layouts that follow the queue: repartition an idle GPU node when that serves what waits.

One pass every ``MIG_REPARTITION_INTERVAL_SECONDS`` (beat), when ``MIG_REPARTITION_ENABLED``. A change
takes several passes and never sleeps in between; its phase lives on the node itself (labels
``gpuportal.io/mig-repartition``, ``-from`` and ``-to``), so a restarted worker picks it up:

1. **Choose.** The queued GPU requests (those waiting for capacity, not for their team's quota, for at least
   ``MIG_REPARTITION_MIN_WAIT_SECONDS``) and the nodes' free devices go to the planner
   (``scheduling/planning/mig_layouts.py``), which picks at most one node with no GPU pod and a named
   config for it, or nothing. Nodes that are not ready, cordoned, mid-change or whose last repartition
   failed within ``MIG_REPARTITION_RETRY_SECONDS`` are not offered to it.
2. **Drain.** The node is cordoned and marked ``draining``: nothing new lands there. The portal never evicts:
   it only ever chose a node without GPU pods.
3. **Apply.** Next pass, if a GPU pod got there meanwhile (bound past the cordon), the change is called off:
   mark and cordon removed, the old layout stays. Otherwise ``nvidia.com/mig.config`` is set to the new
   layout and the node marked ``applying`` (facts doc 3.4).
4. **Watch.** ``nvidia.com/mig.config.state``: ``success`` ends it (uncordon, offerings refreshed from the
   nodes' new devices); ``failed``, or still ``pending``/``rebooting`` after
   ``MIG_REPARTITION_TIMEOUT_SECONDS``, asks for the old layout back and uncordons.

Every start, success and failure is an :class:`~portal.models.AuditEvent` (target ``node``, actions
``mig.repartition.started|succeeded|failed``) with the reason; the operators' cluster page lists them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, Sum

from portal.models import AuditEvent
from scheduling.discovery import propose_offerings
from scheduling.dra import DraView
from scheduling.engine import gpus
from scheduling.kube import keys
from scheduling.kube.calls import JSON, Kube
from scheduling.live_capacity import serves_dra
from scheduling.loops.cycle import QUOTA_WAIT
from scheduling.node_gpus import NodeGpus, read_node
from scheduling.planning import mig_layouts
from workspaces.models import GpuOffering, Workspace

log = logging.getLogger(__name__)

DRAINING = "draining"
APPLYING = "applying"
STARTED = "mig.repartition.started"
SUCCEEDED = "mig.repartition.succeeded"
FAILED = "mig.repartition.failed"
ACTIONS = (STARTED, SUCCEEDED, FAILED)
_ENDED = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class PassResult:
    """What one pass did: nodes whose change started, went on to applying, succeeded or failed."""

    started: tuple[str, ...] = ()
    applying: tuple[str, ...] = ()
    succeeded: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


# -- reading the cluster and the queue ---------------------------------------------------------------------


def _gpu_units(pod: Mapping[str, Any]) -> dict[str, int]:
    units: dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        for name, value in limits.items():
            if name.startswith(keys.DEVICE_PREFIX):
                units[name] = units.get(name, 0) + int(str(value))
    return units


def gpu_pods_by_node(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[str, dict[str, int]]]]:
    """Per node, the pods bound there that hold GPU devices (``namespace/name``, units): terminating ones
    too, since their GPUs are not free until they are gone."""
    found: dict[str, list[tuple[str, dict[str, int]]]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        units = _gpu_units(pod)
        if not node or not units or (pod.get("status") or {}).get("phase") in _ENDED:
            continue
        meta = pod.get("metadata") or {}
        found.setdefault(node, []).append((f"{meta.get('namespace', '')}/{meta.get('name', '')}", units))
    return found


def queued_demand(now: datetime) -> dict[tuple[str, str], int]:
    """Units per (GPU model, device-plugin resource) that queued requests wait for: those held back by the
    cluster, not by their team's quota, queued at least ``MIG_REPARTITION_MIN_WAIT_SECONDS``."""
    rows = (
        Workspace.objects.filter(
            state=Workspace.State.QUEUED,
            offering__kind__in=(GpuOffering.Kind.WHOLE, GpuOffering.Kind.MIG),
            offering__device_class="",  # DRA requests: DRA nodes serve them, and this loop never touches those
            created_at__lte=now - timedelta(seconds=settings.MIG_REPARTITION_MIN_WAIT_SECONDS),
        )
        .exclude(offering__gpu_model="")
        .exclude(reason__startswith=QUOTA_WAIT)
        .values_list("offering__gpu_model", "offering__resource_name")
        .annotate(units=Sum(F("gpu_count") * F("workers")))
    )
    return {(model, resource): int(units) for model, resource, units in rows if units}


def _recently_failed(now: datetime) -> set[str]:
    since = now - timedelta(seconds=settings.MIG_REPARTITION_RETRY_SECONDS)
    return set(
        AuditEvent.objects.filter(action=FAILED, target_type="node", at__gte=since).values_list("target_id", flat=True)
    )


def node_layouts(
    nodes: Iterable[NodeGpus], gpu_pods: Mapping[str, list[tuple[str, dict[str, int]]]], *, excluded: set[str]
) -> list[mig_layouts.NodeLayout]:
    """The planner's view of the GPU nodes: only those it may change are idle."""
    layouts = []
    for node in nodes:
        if not node.model or node.count <= 0:
            continue
        held: dict[str, int] = {}
        for _, units in gpu_pods.get(node.name, []):
            for r, n in units.items():
                held[r] = held.get(r, 0) + n
        settled = node.mig_state in ("", "success") and keys.MIG_REPARTITION not in node.labels
        changeable = node.ready and not node.cordoned and settled and node.name not in excluded
        free = {r: n - held.get(r, 0) for r, n in node.devices.items() if n - held.get(r, 0) > 0}
        layouts.append(
            mig_layouts.NodeLayout(
                name=node.name,
                model=node.model,
                gpu_count=node.count,
                config=node.mig_config or keys.MIG_DISABLED,
                idle=changeable and not held,
                free=free if node.ready and not node.cordoned else {},
            )
        )
    return layouts


# -- the pass ------------------------------------------------------------------------------------------------


def run_pass(kube: Kube, now: datetime) -> PassResult:
    """Advance the change in flight, if any; otherwise start the one the planner proposes, if any."""
    nodes = [read_node(n) for n in kube.list("Node", None, "")]
    gpu_pods = gpu_pods_by_node(kube.list("Pod", None, ""))
    in_flight = [n for n in nodes if n.labels.get(keys.MIG_REPARTITION)]
    if in_flight:
        result = PassResult()
        for node in in_flight:
            result = _advance(kube, node, gpu_pods.get(node.name, []), now, result)
        return result
    demand = queued_demand(now)
    if not demand:
        return PassResult()
    # Nodes whose GPUs the DRA driver publishes are left alone: their pods hold GPUs through claims, which
    # the idle test above does not see, and their MIG devices are ResourceSlice devices (docs/dra.md).
    excluded = _recently_failed(now) | _dra_nodes(kube)
    changes = mig_layouts.plan(node_layouts(nodes, gpu_pods, excluded=excluded), demand)
    for change in changes:
        _start(kube, change)
    return PassResult(started=tuple(c.node for c in changes))


def _dra_nodes(kube: Kube) -> set[str]:
    if not serves_dra(kube):
        return set()
    return set(DraView.from_slices(kube.list("ResourceSlice", None, "")).devices)


def _audit(action: str, node: str, before: dict[str, Any], after: dict[str, Any]) -> None:
    AuditEvent.objects.create(actor=None, action=action, target_type="node", target_id=node, before=before, after=after)


def _start(kube: Kube, change: mig_layouts.Change) -> None:
    marks = {keys.MIG_REPARTITION: DRAINING, keys.MIG_REPARTITION_FROM: change.old, keys.MIG_REPARTITION_TO: change.new}
    kube.patch_node(change.node, marks, unschedulable=True)
    log.info("MIG repartition of %s: %s -> %s (%s)", change.node, change.old, change.new, change.reason)
    _audit(STARTED, change.node, {"config": change.old}, {"config": change.new, "reason": change.reason})


def _started_at(node: str) -> datetime | None:
    event = AuditEvent.objects.filter(action=STARTED, target_type="node", target_id=node).first()
    return event.at if event else None


def _advance(
    kube: Kube, node: NodeGpus, pods: list[tuple[str, dict[str, int]]], now: datetime, result: PassResult
) -> PassResult:
    phase = node.labels.get(keys.MIG_REPARTITION, "")
    old = node.labels.get(keys.MIG_REPARTITION_FROM, "") or keys.MIG_DISABLED
    new = node.labels.get(keys.MIG_REPARTITION_TO, "")
    if phase == DRAINING:
        if pods or not new:
            names = ", ".join(sorted(name for name, _ in pods))
            why = (
                f"GPU pods reached the node while it was cordoned ({names}); the portal does not evict running "
                f"work, so {old} stays"
                if pods
                else "no layout to apply was recorded on the node"
            )
            _end(kube, node.name, FAILED, old, new, why, restore=None)
            return _add(result, failed=node.name)
        kube.patch_node(node.name, {keys.MIG_CONFIG: new, keys.MIG_REPARTITION: APPLYING}, unschedulable=True)
        return _add(result, applying=node.name)
    state = node.mig_state
    if state == "success" and node.mig_config == new and _offers(node, new):
        created = refresh_offerings(kube, node.name)  # first: should it fail, the next pass comes back here
        _end(kube, node.name, SUCCEEDED, old, new, "", restore=None, devices=dict(node.devices), offerings=created)
        return _add(result, succeeded=node.name)
    if state == "failed":
        why = f"the MIG manager reported {keys.MIG_CONFIG_STATE}=failed for {new} (its log on the node says why)"
    else:
        started = _started_at(node.name)
        limit = timedelta(seconds=settings.MIG_REPARTITION_TIMEOUT_SECONDS)
        if started is not None and now - started <= limit:
            return result  # pending or rebooting: look again next pass
        why = f"{keys.MIG_CONFIG_STATE} still {state or 'unset'} after {limit.total_seconds():.0f} s"
    _end(kube, node.name, FAILED, old, new, f"{why}; asked for {old} back", restore=old)
    return _add(result, failed=node.name)


def _offers(node: NodeGpus, config: str) -> bool:
    """The device plugin advertises what ``config`` gives (the state label can read ``success`` a moment
    before the MIG manager has even seen the new label, and allocatable changes after it: facts doc 3.4)."""
    try:
        wanted = mig_layouts.config_supply(node.model, config, node.count)
    except (gpus.MigError, gpus.UnknownGpuModel):  # a config the catalogue does not know: trust the label
        return True
    return all(node.devices.get(r, 0) > 0 for r in wanted) and not any(
        n > 0 and r not in wanted for r, n in node.devices.items()
    )


def _end(
    kube: Kube,
    node: str,
    action: str,
    old: str,
    new: str,
    why: str,
    *,
    restore: str | None,
    devices: dict[str, int] | None = None,
    offerings: list[str] | None = None,
) -> None:
    labels: dict[str, str | None] = {
        keys.MIG_REPARTITION: None,
        keys.MIG_REPARTITION_FROM: None,
        keys.MIG_REPARTITION_TO: None,
    }
    if restore is not None:
        labels[keys.MIG_CONFIG] = restore
    kube.patch_node(node, labels, unschedulable=False)
    if action == SUCCEEDED:
        log.info("MIG repartition of %s to %s succeeded", node, new)
        devices = {r: n for r, n in (devices or {}).items() if n > 0}
        _audit(action, node, {"config": old}, {"config": new, "devices": devices, "offerings_created": offerings or []})
    else:
        log.warning("MIG repartition of %s to %s failed: %s", node, new, why)
        _audit(action, node, {"config": old}, {"config": old, "wanted": new, "reason": why})


def _add(result: PassResult, **names: str) -> PassResult:
    fields = asdict(result)
    for key, name in names.items():
        fields[key] = (*fields[key], name)
    return PassResult(**fields)


def refresh_offerings(kube: Kube, node: str) -> list[str]:
    """Create the offerings discovery now proposes for ``node`` that do not exist yet; answers their slugs.
    Existing ones are left as they are (``discover_offerings --apply`` would rewrite them, and operators may
    have tuned or disabled them), and so are those of other nodes (an operator may have deleted one on purpose).
    Offerings the node no longer serves stay: requests for them wait, as for any shape that is full."""
    created = []
    for proposal in propose_offerings(kube.list("Node", None, "")):
        if node not in proposal.nodes:
            continue
        fields: JSON = asdict(proposal)
        fields.pop("nodes")
        slug = fields.pop("slug")
        _, new = GpuOffering.objects.get_or_create(slug=slug, defaults=fields)
        if new:
            created.append(slug)
    return created


def recent_repartitions(limit: int = 20) -> list[dict[str, Any]]:
    """The latest starts, successes and failures for the operators' cluster page, newest first."""
    rows = []
    for event in AuditEvent.objects.filter(action__in=ACTIONS, target_type="node")[:limit]:
        before, after = event.before or {}, event.after or {}
        wanted = after.get("wanted") or after.get("config", "")
        if event.action == SUCCEEDED:
            detail = ", ".join(
                f"{k.removeprefix(keys.DEVICE_PREFIX)}: {v}" for k, v in sorted(after.get("devices", {}).items()) if v
            )
            if after.get("offerings_created"):
                detail += f"; new offerings: {', '.join(after['offerings_created'])}"
        else:
            detail = str(after.get("reason", ""))
        rows.append(
            {
                "at": event.at,
                "node": event.target_id,
                "outcome": event.action.removeprefix("mig.repartition."),
                "change": f"{before.get('config', '?')} → {wanted}",
                "detail": detail,
            }
        )
    return rows
