"""Ground truth for the usage ledger: an observer of its own that lists the portal's pods on a simulated
cluster many times a second and tells, per pod UID, when the cluster said it was Running.

It shares nothing with the portal but the cluster: its own client (the official one), its own calls
(``list`` in each team's namespace, which the outage tests leave working: see
``tests/integration/test_billing_ground_truth.py``), the wall clock both sides keep. It also notes each
ledger pass it sees (the ``pods`` cursor), for the report and to show where the portal was blind.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connections
from kubernetes import client as k8s

from portal.billing.models import LedgerCursor
from scheduling.kube.keys import MANAGED_BY, MANAGER, WORKSPACE_ID
from scheduling.simcluster.testing import SimCluster

MANAGED = f"{MANAGED_BY}={MANAGER}"


@dataclass(frozen=True)
class Seen:
    """One pod in one listing."""

    phase: str
    node: str
    deleting: bool


@dataclass(frozen=True)
class Listing:
    """One list call in one namespace: when (the middle of the call, wall-clock seconds) and what."""

    at: float
    pods: dict[str, Seen]


@dataclass(frozen=True)
class Pod:
    uid: str
    name: str
    namespace: str
    workspace_id: int


@dataclass
class Observer:
    """Lists the portal's pods in ``namespaces`` every ``period`` seconds, in a thread, until stopped."""

    cluster: SimCluster
    namespaces: tuple[str, ...]
    period: float = 0.1
    listings: dict[str, list[Listing]] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    failures: list[tuple[float, str]] = field(default_factory=list)
    passes: list[datetime] = field(default_factory=list)  # each new ledger cursor seen, in order
    _stopping: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self.listings = {ns: [] for ns in self.namespaces}
        self._thread = threading.Thread(target=self._run, name="billing-truth-observer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            assert not self._thread.is_alive(), "the observer did not stop"

    def _run(self) -> None:
        api = k8s.CoreV1Api(self.cluster.api_client())
        try:
            while not self._stopping.is_set():
                for namespace in self.namespaces:
                    self._list(api, namespace)
                self._note_pass()
                self._stopping.wait(self.period)
        finally:
            connections.close_all()  # this thread's own database connection

    def _list(self, api: k8s.CoreV1Api, namespace: str) -> None:
        before = time.time()
        try:
            answer = api.list_namespaced_pod(namespace, label_selector=MANAGED, _request_timeout=(2, 2))
        except Exception as exc:  # any failure is a hole in the truth, reported at the end
            self.failures.append((before, f"{namespace}: {exc}"))
            return
        at = (before + time.time()) / 2
        seen: dict[str, Seen] = {}
        for pod in answer.items:
            meta = pod.metadata
            labels = meta.labels or {}
            if not str(labels.get(WORKSPACE_ID, "")).isdigit():
                continue
            seen[meta.uid] = Seen(
                (pod.status.phase if pod.status else "") or "",
                (pod.spec.node_name if pod.spec else "") or "",
                meta.deletion_timestamp is not None,
            )
            if meta.uid not in self.pods:
                self.pods[meta.uid] = Pod(meta.uid, meta.name, namespace, int(labels[WORKSPACE_ID]))
        with self._lock:
            self.listings[namespace].append(Listing(at, seen))

    def _note_pass(self) -> None:
        try:
            observed = LedgerCursor.objects.filter(stream="pods").values_list("observed_at", flat=True).first()
        except Exception as exc:  # a missed cursor only thins the report
            self.failures.append((time.time(), f"ledger cursor: {exc}"))
            return
        if observed is not None and (not self.passes or observed > self.passes[-1]):
            self.passes.append(observed)

    # -- what the main thread asks while it runs ---------------------------------------------------

    def latest(self) -> dict[str, tuple[Pod, Seen]]:
        """Every pod in the latest listing of each namespace."""
        found: dict[str, tuple[Pod, Seen]] = {}
        with self._lock:
            for listings in self.listings.values():
                if listings:
                    for uid, seen in listings[-1].pods.items():
                        found[uid] = (self.pods[uid], seen)
        return found

    def last_listing_at(self) -> float:
        with self._lock:
            return min((listings[-1].at for listings in self.listings.values() if listings), default=0.0)

    # -- the truth, once stopped -------------------------------------------------------------------

    def spans(self, uid: str) -> list[tuple[float, float]]:
        """The wall-clock spans during which the pod was Running: each end halfway between the listing
        that last saw it one way and the first that saw it the other (an open end: ``inf``)."""
        return running_spans(self.listings[self.pods[uid].namespace], uid)

    def nodes(self, uid: str) -> set[str]:
        namespace = self.pods[uid].namespace
        return {s.pods[uid].node for s in self.listings[namespace] if uid in s.pods and s.pods[uid].node}

    def listing_gap(self, uid: str, moment: float) -> float:
        """The time between the listings of the pod's namespace either side of ``moment``."""
        times = [listing.at for listing in self.listings[self.pods[uid].namespace]]
        i = bisect.bisect_right(times, moment)
        return times[i] - times[i - 1] if 0 < i < len(times) else float("inf")

    def longest_silence(self) -> float:
        """The longest time between two listings of one namespace: the resolution of the truth."""
        gaps = [b.at - a.at for listings in self.listings.values() for a, b in itertools.pairwise(listings)]
        return max(gaps, default=0.0)


def running_spans(listings: Iterable[Listing], uid: str) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    start: float | None = None
    previous: float | None = None
    for listing in listings:
        running = (seen := listing.pods.get(uid)) is not None and seen.phase == "Running"
        if running and start is None:
            start = listing.at if previous is None else (previous + listing.at) / 2
        elif not running and start is not None:
            assert previous is not None
            spans.append((start, (previous + listing.at) / 2))
            start = None
        previous = listing.at
    if start is not None:
        spans.append((start, float("inf")))
    return spans
