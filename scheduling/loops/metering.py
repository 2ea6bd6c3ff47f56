"""What the reconcile pass saw, into the usage ledger (``portal.billing.ledger``): the pods running now,
and every ``BILLING_CAPACITY_SECONDS`` the GPUs the nodes have."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from portal.billing import ledger
from scheduling.kube.calls import Kube
from scheduling.loops.schedule import capacity_record_due
from scheduling.node_gpus import read_node

log = logging.getLogger(__name__)


def gpus_by_model(nodes: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The fleet per GPU model by GFD's count: every node that has GPUs, ready, cordoned or broken."""
    fleet: dict[str, int] = {}
    for node in map(read_node, nodes):
        if node.model:
            fleet[node.model] = fleet.get(node.model, 0) + node.count
    return fleet


def record(kube: Kube, pods: Mapping[int, Iterable[Mapping[str, Any]]], observed_at: datetime) -> None:
    """Never lets a billing failure stop the pass: the open intervals carry on, and the next pass that
    records sees the same pods (a pod running on both sides of a gap is billed through it)."""
    try:
        ledger.record_pods(observed_at, ledger.running_pods(pods))
        if capacity_record_due():
            ledger.record_capacity(observed_at, gpus_by_model(kube.list("Node", None, "")))
    except Exception:
        log.exception("the usage ledger could not record this pass")
