"""The cluster's free capacity kept between scheduling cycles, changed only by what the watches saw change.

Building :class:`~scheduling.inventory.Capacity` from a full list of nodes and pods costs about a second a
cycle on 1,000 nodes and 5,000 pods (listing, decoding, replaying every pod into the engine's layout). Here
the Node and Pod informers (``scheduling.kube.informer``) keep the objects; each cycle takes only the pods
that changed since the last one (what a changed pod held is given back exactly, what it holds now is taken)
and decides on a copy. A change of any node's labels, taints, readiness, cordon or allocatable, a node
added or removed, or an informer's relist rebuilds the whole from the informers' objects: rare, and what
the node's row means (its GPU mode, its layout) may have changed with it.

Like any informer-fed controller, the view may lag the cluster by the watch's delay: a pod bound a moment
ago may not be counted yet. The cycle covers the gap it cares about (admitted workspaces whose pods are
not seen on a node hold their room), and kube-scheduler has the last word on every pod.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from portal.queue import enqueue_coalesced
from scheduling.dra import DraView
from scheduling.inventory import Capacity, Held, succeeded_workspace
from scheduling.kube.calls import Kube, PermanentKubeError
from scheduling.kube.informer import Changes, Informer, Key, informer_for
from scheduling.loops import tasknames

log = logging.getLogger(__name__)


def _node_signature(node: Mapping[str, Any]) -> str:
    """What of a node the capacity is built from (its heartbeats and status times are not)."""
    metadata, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = [c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    parts = [metadata.get("labels"), spec.get("taints"), spec.get("unschedulable"), status.get("allocatable"), ready]
    return json.dumps(parts, sort_keys=True)


class LiveCapacity:
    """One cluster's capacity, kept from its Node and Pod informers (and ResourceSlice and ResourceClaim ones
    where the cluster serves DRA); see the module docstring."""

    def __init__(
        self, nodes: Informer, pods: Informer, slices: Informer | None = None, claims: Informer | None = None
    ) -> None:
        self.nodes, self.pods = nodes, pods
        self.slices, self.claims = slices, claims
        self.rebuilds = 0
        self._base: Capacity | None = None
        self._dra: DraView | None = None
        self._held: dict[Key, Held] = {}
        self._succeeded: dict[Key, int] = {}  # pods that ran to completion: their workspace
        self._claims_held: dict[Key, Held] = {}
        self._signatures: dict[Key, str] = {}
        self._lock = threading.Lock()

    def _informers(self) -> list[Informer]:
        return [i for i in (self.nodes, self.pods, self.slices, self.claims) if i is not None]

    def current(self, timeout: float) -> Capacity | None:
        """A copy to decide on, as of the informers' latest events; None if they have not listed the
        cluster within ``timeout`` seconds (the caller lists it itself)."""
        if not all(informer.wait_synced(timeout) for informer in self._informers()):
            return None
        with self._lock:
            node_changes, pod_changes = self.nodes.drain(), self.pods.drain()
            # Slices change with a node's GPUs (a MIG layout, a lost GPU): rare, and rebuilt like a node change.
            slice_changes = self.slices.drain() if self.slices else Changes(False)
            claim_changes = self.claims.drain() if self.claims else Changes(False)
            if (
                self._base is None
                or node_changes.relisted
                or pod_changes.relisted
                or slice_changes.relisted
                or slice_changes.changed
                or claim_changes.relisted
                or any(self._signatures.get(key) != _sig(node) for key, node in node_changes.changed.items())
            ):
                self._rebuild()
            else:
                for key, pod in pod_changes.changed.items():
                    self._replace(key, pod)
                for key, claim in claim_changes.changed.items():
                    self._replace_claim(key, claim)
            assert self._base is not None
            return self._base.copy()

    def _replace(self, key: Key, pod: Mapping[str, Any] | None) -> None:
        assert self._base is not None
        held = self._held.pop(key, None)
        if held is not None:
            self._base.vacate(held)
        if pod is not None and (now := self._base.occupy(pod)) is not None:
            self._held[key] = now
        if (before := self._succeeded.pop(key, None)) is not None:
            self._base.uncount_succeeded(before)
        if pod is not None and (workspace := self._base.count_succeeded(pod)) is not None:
            self._succeeded[key] = workspace

    def _replace_claim(self, key: Key, claim: Mapping[str, Any] | None) -> None:
        assert self._base is not None and self._dra is not None
        held = self._claims_held.pop(key, None)
        if held is not None:
            self._base.vacate(held)
        if claim is not None and (now := self._base.occupy_claim(claim, self._dra)) is not None:
            self._claims_held[key] = now

    def _rebuild(self) -> None:
        """Everything again from the informers' objects. Changes that arrive while this reads them are in
        the next drain as well, and applying a pod twice is harmless: what it held is given back first."""
        nodes = self.nodes.snapshot()
        self._signatures = {key: _node_signature(node) for key, node in nodes.items()}
        self._dra = DraView.from_slices(self.slices.snapshot().values()) if self.slices else DraView()
        self._base = Capacity.from_objects(nodes.values(), [], dra=self._dra)
        self._held, self._claims_held, self._succeeded = {}, {}, {}
        for key, pod in self.pods.snapshot().items():
            self._replace(key, pod)
        for key, claim in (self.claims.snapshot() if self.claims else {}).items():
            self._replace_claim(key, claim)
        self.rebuilds += 1
        log.info("cluster capacity rebuilt from %d nodes and %d pods", len(nodes), len(self._held))


def _sig(node: Mapping[str, Any] | None) -> str | None:
    return None if node is None else _node_signature(node)


_live: dict[str, LiveCapacity] = {}
_live_lock = threading.Lock()
_listened: weakref.WeakSet[Informer] = weakref.WeakSet()  # pod informers that ask for a cycle at a job's end


def _a_job_pod_succeeded(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> bool:
    if after is None or succeeded_workspace(after) is None or (before and succeeded_workspace(before) is not None):
        return False
    return any(owner.get("kind") == "Job" for owner in after["metadata"].get("ownerReferences") or [])


def _cycle_on_job_end(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> None:
    """A worker of a training job succeeded: the next cycle may find the whole job done and its quota free
    (``cycle._write_ends``), so ask for one now rather than at the next request, release or beat."""
    if _a_job_pod_succeeded(before, after):
        try:
            enqueue_coalesced(tasknames.RUN_CYCLE)
        except Exception:  # the broker is down: the beat's cycle comes anyway, and the watch must go on
            log.exception("could not ask for a scheduling cycle after a job's pod succeeded")


def live_capacity(kube: Kube) -> LiveCapacity:
    """This process's live capacity of ``kube``'s cluster, on its current informers (a new one when they
    were replaced: a thread that died, a forked child)."""
    nodes, pods = informer_for(kube, "Node"), informer_for(kube, "Pod")
    slices = claims = None
    if serves_dra(kube):
        slices, claims = informer_for(kube, "ResourceSlice"), informer_for(kube, "ResourceClaim")
    key = str(kube.api_client.configuration.host)
    with _live_lock:
        live = _live.get(key)
        if live is None or [live.nodes, live.pods, live.slices, live.claims] != [nodes, pods, slices, claims]:
            live = _live[key] = LiveCapacity(nodes, pods, slices, claims)
        if pods not in _listened:
            _listened.add(pods)
            pods.listen(_cycle_on_job_end)
        return live


_dra_served: dict[str, tuple[bool, float]] = {}
DRA_CHECK_TTL_S = 300.0


def serves_dra(kube: Kube) -> bool:
    """Whether the cluster serves ``resource.k8s.io/v1`` (GA since Kubernetes 1.34; earlier ones may not):
    asked once every few minutes, so a cluster upgraded meanwhile is noticed."""
    key = str(kube.api_client.configuration.host)
    known = _dra_served.get(key)
    if known is not None and time.monotonic() - known[1] < DRA_CHECK_TTL_S:
        return known[0]
    try:
        kube.list("ResourceSlice", None)
        served = True
    except PermanentKubeError as exc:
        if exc.status != 404:
            raise
        served = False
    _dra_served[key] = (served, time.monotonic())
    return served


def cluster_capacity(kube: Kube) -> Capacity:
    """What the cluster has free, to decide on: from the watches where ``SCHEDULING_WATCH_CLUSTER`` is on and
    they have listed the cluster, else from a full list of its nodes and pods. Raises the API's error when
    it does not answer."""
    if settings.SCHEDULING_WATCH_CLUSTER:
        # A watch can stay open through an outage (an API server serves watches from its cache while etcd
        # times out): one cheap read shows that the API answers now, as the full lists used to. If it does
        # not, the cycle fails and admits nothing it could not start.
        kube.get("Namespace", None, "default")
        capacity = live_capacity(kube).current(timeout=settings.KUBE_REQUEST_TIMEOUT)
        if capacity is not None:
            return capacity
        log.warning("the cluster watches have not listed the cluster yet; listing it for this cycle")
    nodes, pods = kube.list("Node", None, ""), kube.list("Pod", None, "")
    if not serves_dra(kube):
        return Capacity.from_objects(nodes, pods)
    dra = DraView.from_slices(kube.list("ResourceSlice", None, ""))
    return Capacity.from_objects(nodes, pods, dra=dra, claims=kube.list("ResourceClaim", None, ""))
