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
from collections.abc import Mapping
from typing import Any

from django.conf import settings

from scheduling.inventory import Capacity, Held
from scheduling.kube.calls import Kube
from scheduling.kube.informer import Informer, Key, informer_for

log = logging.getLogger(__name__)


def _node_signature(node: Mapping[str, Any]) -> str:
    """What of a node the capacity is built from (its heartbeats and status times are not)."""
    metadata, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = [c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    parts = [metadata.get("labels"), spec.get("taints"), spec.get("unschedulable"), status.get("allocatable"), ready]
    return json.dumps(parts, sort_keys=True)


class LiveCapacity:
    """One cluster's capacity, kept from its Node and Pod informers; see the module docstring."""

    def __init__(self, nodes: Informer, pods: Informer) -> None:
        self.nodes, self.pods = nodes, pods
        self.rebuilds = 0
        self._base: Capacity | None = None
        self._held: dict[Key, Held] = {}
        self._signatures: dict[Key, str] = {}
        self._lock = threading.Lock()

    def current(self, timeout: float) -> Capacity | None:
        """A copy to decide on, as of the informers' latest events; None if they have not listed the
        cluster within ``timeout`` seconds (the caller lists it itself)."""
        if not (self.nodes.wait_synced(timeout) and self.pods.wait_synced(timeout)):
            return None
        with self._lock:
            node_changes, pod_changes = self.nodes.drain(), self.pods.drain()
            if (
                self._base is None
                or node_changes.relisted
                or pod_changes.relisted
                or any(self._signatures.get(key) != _sig(node) for key, node in node_changes.changed.items())
            ):
                self._rebuild()
            else:
                for key, pod in pod_changes.changed.items():
                    self._replace(key, pod)
            assert self._base is not None
            return self._base.copy()

    def _replace(self, key: Key, pod: Mapping[str, Any] | None) -> None:
        assert self._base is not None
        held = self._held.pop(key, None)
        if held is not None:
            self._base.vacate(held)
        if pod is not None and (now := self._base.occupy(pod)) is not None:
            self._held[key] = now

    def _rebuild(self) -> None:
        """Everything again from the informers' objects. Changes that arrive while this reads them are in
        the next drain as well, and applying a pod twice is harmless: what it held is given back first."""
        nodes = self.nodes.snapshot()
        self._signatures = {key: _node_signature(node) for key, node in nodes.items()}
        self._base = Capacity.from_objects(nodes.values(), [])
        self._held = {}
        for key, pod in self.pods.snapshot().items():
            self._replace(key, pod)
        self.rebuilds += 1
        log.info("cluster capacity rebuilt from %d nodes and %d pods", len(nodes), len(self._held))


def _sig(node: Mapping[str, Any] | None) -> str | None:
    return None if node is None else _node_signature(node)


_live: dict[str, LiveCapacity] = {}
_live_lock = threading.Lock()


def live_capacity(kube: Kube) -> LiveCapacity:
    """This process's live capacity of ``kube``'s cluster, on its current informers (a new one when they
    were replaced: a thread that died, a forked child)."""
    nodes, pods = informer_for(kube, "Node"), informer_for(kube, "Pod")
    key = str(kube.api_client.configuration.host)
    with _live_lock:
        live = _live.get(key)
        if live is None or live.nodes is not nodes or live.pods is not pods:
            live = _live[key] = LiveCapacity(nodes, pods)
        return live


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
    return Capacity.from_objects(kube.list("Node", None, ""), kube.list("Pod", None, ""))
