"""A month and a bit of a simulated cluster for the usage ledger: what really ran, which reconcile passes
happened, and what each pass lists. Pure and seeded (``tests/portal/billing/test_ledger_month.py``).

The portal's ledger runs on the portal's clock, so accelerating a cluster does not accelerate billing; here
the clock is the simulation's own and every pass hands the ledger an explicit ``observed_at``.

- **Time.** From 28 February 00:00 to 3 April 00:00 in ``ZONE`` (Europe/Berlin: both month starts are
  crossed, and March has 743 hours because of the switch to summer time on 29 March). Everything here is
  UTC: aware arithmetic in a zone with DST is wall-clock arithmetic.
- **Passes** every ``INTERVAL`` (20 minutes), each up to ``JITTER_S`` late; the observation gap is the
  setting's own formula, ``3 x interval + 5 s``. Faults: worker kills (no pass at all; the pass in flight
  when it dies is rolled back), a short kill that misses one pass only (not a gap), two Kubernetes API
  outages (the pass runs, its pod list fails, so ``read_cluster`` raises before metering: nothing recorded),
  a node list failing alone (pods recorded, capacity not), and stale passes (a slow pass finishing after a
  newer one).
- **The cluster**: tens of workspaces of four teams on the demo catalogue's nodes (whole H100s, A100 and
  H200 MIG slices, four-way time-sliced L40S), notebooks and multi-pod jobs; a pod is Pending while it
  pulls, Running from its containers' start (reported, as the kubelet does, to the second) to its end, and
  a finished job's pod stays listed as Succeeded a while. Preemptions end jobs early (requeued, started
  again as new pods later), idle reclaims end notebooks, one H100 node is lost (its pods vanish from the
  listing from that instant; the node object with them, so the fleet shrinks) and comes back days later.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

ZONE_NAME = "Europe/Berlin"
ZONE = ZoneInfo(ZONE_NAME)
INTERVAL = timedelta(minutes=20)  # the simulated reconcile interval
JITTER_S = 40.0  # a pass starts up to this late
GAP = 3 * INTERVAL + timedelta(seconds=5)  # BILLING_OBSERVATION_GAP_SECONDS, as settings.py derives it
CAPACITY_EVERY = 4 * INTERVAL  # BILLING_CAPACITY_SECONDS: the fleet is listed every fourth pass
LINGER = timedelta(minutes=20)  # a finished job's pod stays listed (Succeeded) this long


def local(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    """A wall-clock instant in ``ZONE`` as UTC."""
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=ZONE).astimezone(UTC)


START = local(2026, 2, 28)
END = local(2026, 4, 3)
MARCH = local(2026, 3, 1)
APRIL = local(2026, 4, 1)

# Faults, in local time.
KILLS = [  # the worker down: no pass at all
    (local(2026, 2, 28, 22, 40, 13), local(2026, 3, 1, 9, 51, 7)),  # over the month's end
    (local(2026, 3, 5, 14, 2), local(2026, 3, 5, 14, 20)),  # one pass missed: not a gap
    (local(2026, 3, 12, 3, 10), local(2026, 3, 12, 7, 25)),
]
OUTAGES = [  # the Kubernetes API out: passes run and fail at the pod list
    (local(2026, 3, 24, 10, 5), local(2026, 3, 24, 11, 50)),
    (local(2026, 3, 31, 23, 20), local(2026, 4, 1, 1, 5)),  # over the next month's end
]
NODES_FAIL = [(local(2026, 3, 8, 16, 0), local(2026, 3, 8, 18, 0))]  # only the node list fails
CLOSE_FEBRUARY_AT = local(2026, 3, 1, 9, 0)  # finance closes February while the worker is down
LOST_NODE = "gpu-h100-1"
NODE_LOST_AT = local(2026, 3, 18, 3, 17, 43, micro=250_000)
NODE_BACK_AT = local(2026, 3, 21, 14, 2, 11)

H100, A100, H200, L40S = "H100-80GB-HBM3", "A100-SXM4-80GB", "H200-141GB", "L40S"


@dataclass(frozen=True)
class PriceSet:
    """A price finance sets at ``set_at`` (``actions.set_price``), in effect from ``effective_from``."""

    set_at: datetime
    gpu_model: str
    shape: str
    price: Decimal
    effective_from: datetime | None  # None: from when it is set


PRICES = [
    PriceSet(START - timedelta(days=1), H100, "", Decimal("4.00"), None),
    PriceSet(START - timedelta(days=1), A100, "", Decimal("2.80"), None),
    PriceSet(START - timedelta(days=1), H200, "", Decimal("6.50"), None),
    PriceSet(START - timedelta(days=1), L40S, "", Decimal("1.20"), None),
    PriceSet(local(2026, 3, 9, 10, 0), H100, "", Decimal("4.40"), local(2026, 3, 16, 12, 0)),
    PriceSet(local(2026, 3, 19, 9, 0), L40S, "shared-4", Decimal("0.35"), local(2026, 3, 20, 8, 30)),
]


@dataclass(frozen=True)
class Offer:
    slug: str
    gpu_model: str
    shape: str
    equivalents: Decimal  # of one unit, as the catalogue proposes it
    pools: dict[str, int]  # node -> units this simulation lets it hand out


OFFERS = {
    o.slug: o
    for o in (
        Offer("h100-80gb-hbm3", H100, "whole", Decimal(1), {"gpu-h100-0": 7, "gpu-h100-1": 8}),  # 1: the probe
        Offer("a100-sxm4-80gb-1g-10gb", A100, "mig-1g.10gb", Decimal("0.1429"), {"gpu-a100-0": 16}),
        Offer("a100-sxm4-80gb-2g-20gb", A100, "mig-2g.20gb", Decimal("0.2857"), {"gpu-a100-0": 8}),
        Offer("a100-sxm4-80gb-3g-40gb", A100, "mig-3g.40gb", Decimal("0.5000"), {"gpu-a100-0": 6}),
        Offer("h200-141gb-1g-18gb", H200, "mig-1g.18gb", Decimal("0.1429"), {"gpu-h200-0": 50}),
        Offer("l40s-shared-4", L40S, "shared-4", Decimal("0.25"), {"gpu-l40s-0": 16}),
    )
}
FLEET = {H100: 16, A100: 8, H200: 8, L40S: 4}  # GPUs per model, by the nodes' GFD count


@dataclass(frozen=True)
class Spec:
    """A workspace: ``team`` and ``owner`` are indices into the test's teams and users."""

    key: int
    team: int
    owner: int
    kind: str  # notebook | job
    slug: str
    workers: int
    gpu_count: int


@dataclass
class PodRun:
    """One pod, from creation to gone. Running in [start, end); ``end`` None: still running at the end."""

    uid: str
    name: str
    workspace: int  # Spec.key
    node: str
    created: datetime
    start: datetime
    end: datetime | None = None
    reason: str = "running"  # stopped | idle-reclaimed | completed | preempted | node-lost | running
    sidecar_s: float = 2.0  # a second container starts this much later

    def phase(self, at: datetime) -> str | None:
        """What the pod list says of it at ``at`` (None: not listed)."""
        if at < self.created:
            return None
        if at < self.start:
            return "Pending"
        if self.end is None or at < self.end:
            return "Running"
        if self.reason == "completed" and at < self.end + LINGER:
            return "Succeeded"
        return None

    @property
    def reported_start(self) -> datetime:
        """``state.running.startedAt`` as the kubelet reports it: RFC 3339, to the second."""
        return self.start.replace(microsecond=0)

    def seconds(self, upto: datetime = END) -> float:
        return ((self.end or upto) - self.start).total_seconds() if (self.end or upto) > self.start else 0.0


@dataclass(frozen=True)
class Pass:
    """A reconcile pass at ``at``: ``ok``; ``api-out`` (the pod list fails: nothing recorded); ``nodes-fail``
    (pods recorded, the node list fails); ``crash`` (the worker dies in it: rolled back); ``stale`` (older
    than the newest recorded pass: it finished late)."""

    at: datetime
    kind: str = "ok"

    @property
    def records_pods(self) -> bool:
        return self.kind in ("ok", "nodes-fail")


@dataclass
class Scenario:
    specs: list[Spec]
    pods: list[PodRun]
    passes: list[Pass]
    node_down: tuple[datetime, datetime] = (NODE_LOST_AT, NODE_BACK_AT)
    events: dict[str, int] = field(default_factory=dict)

    def listing(self) -> Iterator[tuple[Pass, list[PodRun]]]:
        """Each pass with the pods listed at it (any phase), in order of the passes' times."""
        ordered = sorted(self.pods, key=lambda p: p.created)
        created = [q.created for q in ordered]
        for p in self.passes:
            upto = bisect.bisect_right(created, p.at)
            yield p, [q for q in ordered[:upto] if q.phase(p.at) is not None]

    def nodes_up(self, at: datetime) -> set[str]:
        down = self.node_down[0] <= at < self.node_down[1]
        return {"gpu-h100-0", "gpu-a100-0", "gpu-h200-0", "gpu-l40s-0", "cpu-0", "cpu-1"} | (
            set() if down else {LOST_NODE}
        )


# -- the passes ---------------------------------------------------------------------------------------


def _inside(at: datetime, windows: list[tuple[datetime, datetime]]) -> bool:
    return any(a <= at < b for a, b in windows)


def make_passes(rng: random.Random) -> list[Pass]:
    passes: list[Pass] = []
    steps = int((END - START) / INTERVAL)
    for k in range(steps + 1):
        at = START + k * INTERVAL + timedelta(seconds=round(rng.uniform(0, JITTER_S), 6) if k else 0)
        if at >= END:
            break
        if _inside(at, KILLS):
            continue
        kind = "api-out" if _inside(at, OUTAGES) else "nodes-fail" if _inside(at, NODES_FAIL) else "ok"
        passes.append(Pass(at, kind))
    for a, _ in KILLS:  # the pass in flight when the worker died
        before = max(i for i, p in enumerate(passes) if p.at < a)
        passes[before] = Pass(passes[before].at, "crash")
    result: list[Pass] = []
    for p in passes:
        result.append(p)
        if p.kind == "ok" and rng.random() < 0.01:  # an older pass, slow, finishing after this one
            result.append(Pass(p.at - timedelta(seconds=round(rng.uniform(1, 120), 6)), "stale"))
    return result


# -- the cluster --------------------------------------------------------------------------------------


def make_specs(rng: random.Random, teams: int, owners: int) -> list[Spec]:
    plan = (
        [("notebook", "h100-80gb-hbm3")] * 12
        + [("job", "h100-80gb-hbm3")] * 6
        + [("notebook", "a100-sxm4-80gb-1g-10gb")] * 4
        + [("notebook", "a100-sxm4-80gb-2g-20gb")] * 3
        + [("notebook", "a100-sxm4-80gb-3g-40gb")] * 2
        + [("notebook", "h200-141gb-1g-18gb")] * 4
        + [("notebook", "l40s-shared-4")] * 6
        + [("job", "l40s-shared-4")] * 2
    )
    specs = []
    for key, (kind, slug) in enumerate(plan):
        whole = slug == "h100-80gb-hbm3"
        workers = rng.randint(2, 4) if kind == "job" else 1
        gpu_count = rng.choice((1, 1, 2, 4)) if whole and kind == "job" else rng.choice((1, 1, 2)) if whole else 1
        specs.append(Spec(key, key % teams, rng.randrange(owners), kind, slug, workers, gpu_count))
    return specs


class _Cluster:
    """A small event-driven scheduler: enough to make pods start, end, queue, get preempted and lost."""

    def __init__(self, rng: random.Random, specs: list[Spec]) -> None:
        self.rng = rng
        self.specs = {s.key: s for s in specs}
        self.used: dict[tuple[str, str], int] = {}
        self.pods: list[PodRun] = []
        self.running: dict[int, tuple[int, list[PodRun], list[tuple[str, str]]]] = {}  # key -> run, pods, pools
        self.queue: list[tuple[int, datetime]] = []
        self.heap: list[tuple[datetime, int, str, int, int]] = []
        self.seq = itertools.count()
        self.runs = itertools.count()
        self.node_up = True
        self.events: dict[str, int] = {}

    def at(self, when: datetime, what: str, key: int = -1, run: int = -1) -> None:
        heapq.heappush(self.heap, (when, next(self.seq), what, key, run))

    def seconds(self, a: float, b: float) -> timedelta:
        return timedelta(seconds=round(self.rng.uniform(a, b), 6))

    def lognormal_h(self, median_h: float, low_h: float, high_h: float) -> timedelta:
        hours = min(max(math.exp(self.rng.gauss(math.log(median_h), 0.9)), low_h), high_h)
        return timedelta(seconds=round(hours * 3600, 6))

    def request(self, when: datetime, key: int) -> None:
        assert key not in self.running and all(k != key for k, _ in self.queue), f"workspace {key} twice"
        self.queue.append((key, when))
        self.schedule(when)

    def _place(self, spec: Spec) -> list[tuple[str, str]] | None:
        pools: list[tuple[str, str]] = []
        taken: dict[tuple[str, str], int] = {}
        offer = OFFERS[spec.slug]
        for _ in range(spec.workers):
            free = {
                (node, spec.slug): size - self.used.get((node, spec.slug), 0) - taken.get((node, spec.slug), 0)
                for node, size in offer.pools.items()
                if self.node_up or node != LOST_NODE
            }
            fits = sorted((-n, pool) for pool, n in free.items() if n >= spec.gpu_count)  # the emptiest node
            if not fits:
                return None
            pool = fits[0][1]
            taken[pool] = taken.get(pool, 0) + spec.gpu_count
            pools.append(pool)
        return pools

    def schedule(self, now: datetime) -> None:
        waiting, self.queue = self.queue, []
        for key, since in waiting:
            spec = self.specs[key]
            pools = self._place(spec)
            if pools is None:
                self.queue.append((key, since))
                continue
            for pool in pools:
                self.used[pool] = self.used.get(pool, 0) + spec.gpu_count
            run = next(self.runs)
            created = now + self.seconds(1, 20)
            pods = []
            for index, (node, _) in enumerate(pools):
                start = created + self.seconds(5, 240)  # the image pull
                name = f"ws-{key}-r{run}-{index}"
                uid = str(uuid.UUID(int=self.rng.getrandbits(128)))
                pods.append(PodRun(uid, name, key, node, created, start, sidecar_s=self.rng.uniform(0.5, 4)))
            self.pods.extend(pods)
            self.running[key] = (run, pods, pools)
            first = max(p.start for p in pods)
            if spec.kind == "job":
                duration, reason = self.lognormal_h(10, 0.5, 120), "completed"
            else:
                duration = self.lognormal_h(4, 0.15, 72)
                reason = "idle-reclaimed" if self.rng.random() < 0.4 else "stopped"
            self.at(first + duration, reason, key, run)

    def finish(self, now: datetime, key: int, run: int, reason: str, grace: tuple[float, float]) -> datetime | None:
        """End ``key``'s run ``run``: each pod within ``grace`` seconds; when the last is gone (None: that run
        is over already, ended by a preemption or the node)."""
        current = self.running.get(key)
        if current is None or current[0] != run:
            return None
        _, pods, pools = self.running.pop(key)
        last = now
        for pod in pods:
            if pod.end is None:
                pod.end = max(now + self.seconds(*grace), pod.start)
                pod.reason = reason
            last = max(last, pod.end)
        for pool in pools:
            self.used[pool] -= self.specs[key].gpu_count
        self.events[reason] = self.events.get(reason, 0) + 1
        return last

    def simulate(self) -> list[PodRun]:
        for key in self.specs:
            self.request(START + self.seconds(60, 16 * 3600), key)
        t = START + self.seconds(3600, 5 * 3600)
        while t < END:  # preemptions: a higher-priority request takes a running job's GPUs
            self.at(t, "preempt")
            t += self.seconds(4 * 3600, 16 * 3600)
        self.at(NODE_LOST_AT, "node-lost")
        self.at(NODE_BACK_AT, "node-back")
        while self.heap:
            now, _, what, key, run = heapq.heappop(self.heap)
            if now >= END:
                break
            if what == "request":
                self.request(now, key)
            elif what in ("stopped", "idle-reclaimed", "completed"):
                gone = self.finish(now, key, run, what, (0.5, 30) if what != "completed" else (0, 3))
                if gone is not None:
                    self.again(gone, key, what)
            elif what == "preempt":
                jobs = sorted(k for k in self.running if self.specs[k].kind == "job")
                if jobs:
                    key = self.rng.choice(jobs)
                    gone = self.finish(now, key, self.running[key][0], "preempted", (5, 30))
                    assert gone is not None
                    self.at(gone + self.seconds(120, 3 * 3600), "request", key)  # queued again
            elif what == "node-lost":
                self.node_up = False
                for key in sorted(
                    k for k, (_, pods, _) in self.running.items() if any(p.node == LOST_NODE for p in pods)
                ):
                    run, pods, _ = self.running[key]
                    for pod in pods:
                        if pod.node == LOST_NODE:
                            pod.end, pod.reason = max(now, pod.start), "node-lost"  # vanishes with the node
                    gone = self.finish(now, key, run, "node-lost", (60, 900))  # the rest: torn down
                    assert gone is not None
                    self.at(gone + self.seconds(60, 1800), "request", key)
            elif what == "node-back":
                self.node_up = True
                self.schedule(now)
            self.schedule(now)
        return self.pods

    def again(self, gone: datetime, key: int, reason: str) -> None:
        if self.specs[key].kind == "job":
            self.at(gone + self.seconds(3600, 2 * 86400), "request", key)
        elif reason == "idle-reclaimed":  # the user comes back to it later
            self.at(gone + self.seconds(1800, 36 * 3600), "request", key)
        else:
            self.at(gone + self.seconds(1200, 24 * 3600), "request", key)


PROBE_RUNS = [  # (start, end) in local time: the cases a seed might miss, on the GPU kept for them
    (local(2026, 2, 28, 23, 31, 10, micro=700_000), local(2026, 3, 1, 15, 0, 0, micro=300_000)),  # starts in the
    # gap over the month's end, before midnight: late usage of the closed month
    (local(2026, 3, 12, 4, 0, 1, micro=900_000), local(2026, 3, 12, 5, 30, 7, micro=100_000)),  # inside a gap
    (local(2026, 3, 12, 1, 0, 0, micro=100_000), local(2026, 3, 12, 5, 0, 0)),  # ends inside a gap
    (local(2026, 3, 15, 9, 0, 0, micro=100_000), local(2026, 3, 17, 10, 0, 0, micro=500_000)),  # over the price change
    (local(2026, 3, 31, 20, 0, 0, micro=100_000), local(2026, 4, 1, 4, 0, 0, micro=500_000)),  # through the outage
]


def make_scenario(seed: int, *, teams: int = 4, owners: int = 8) -> Scenario:
    rng = random.Random(seed)
    specs = make_specs(rng, teams, owners)
    cluster = _Cluster(rng, specs)
    pods = cluster.simulate()
    probe = Spec(len(specs), 0, 0, "notebook", "h100-80gb-hbm3", 1, 1)
    for n, (start, end) in enumerate(PROBE_RUNS):
        uid = str(uuid.UUID(int=rng.getrandbits(128)))
        created = start - timedelta(seconds=40)
        pods.append(PodRun(uid, f"probe-{n}", probe.key, "gpu-h100-0", created, start, end, "stopped"))
    passes = make_passes(rng)
    return Scenario([*specs, probe], pods, passes, events=cluster.events)


# -- what the API returns -----------------------------------------------------------------------------


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_object(pod: PodRun, at: datetime, labels: dict[str, str]) -> dict[str, Any]:
    """The pod as ``list`` returns it at ``at``; ``labels`` the portal's (managed-by, workspace id)."""
    phase = pod.phase(at)
    statuses: list[dict[str, Any]] = []
    if phase == "Running":
        sidecar = pod.start + timedelta(seconds=pod.sidecar_s)
        statuses = [
            {"name": "main", "state": {"running": {"startedAt": _rfc3339(pod.start)}}},
            {"name": "sidecar", "state": {"running": {"startedAt": _rfc3339(sidecar)}} if sidecar <= at else {
                "waiting": {"reason": "ContainerCreating"}}},
        ]  # fmt: skip
    elif phase == "Succeeded":
        statuses = [{"name": "main", "state": {"terminated": {"exitCode": 0}}}]
    return {
        "metadata": {"uid": pod.uid, "name": pod.name, "namespace": "team", "labels": labels},
        "spec": {"nodeName": pod.node},
        "status": {"phase": phase, "containerStatuses": statuses},
    }


# -- what the ledger should say, by its documented rules ------------------------------------------------


def midpoint(a: datetime, b: datetime) -> datetime:
    return a + (b - a) / 2


@dataclass(frozen=True)
class Expected:
    """A pod's billed span by the rules in ``docs/billing.md``, from the passes that were recorded: opened at
    the midpoint of the passes around its start, or after a gap at its reported start (kept in the gap);
    closed at the midpoint of the passes around its end, or after a gap at its last sighting; open when the
    last pass still saw it. ``None`` start: never seen (it started and ended between two passes)."""

    start: datetime | None
    end: datetime | None  # the last sighting when still open
    open: bool
    start_gap: bool  # the previous pass was a gap away
    end_gap: bool
    start_spacing: timedelta  # between the passes around the true start (0 before the first pass)
    end_spacing: timedelta


def expected(pod: PodRun, recorded: list[datetime]) -> Expected:
    zero = timedelta(0)
    i = bisect.bisect_left(recorded, pod.start)  # the first pass at or after the start
    if i == len(recorded) or (pod.end is not None and recorded[i] >= pod.end):
        return Expected(None, None, False, False, False, zero, zero)
    seen = recorded[i]
    previous = recorded[i - 1] if i else None
    if previous is None:
        start, start_gap, start_spacing = seen, False, zero
    elif seen - previous <= GAP:
        start, start_gap, start_spacing = midpoint(previous, seen), False, seen - previous
    else:
        start, start_gap, start_spacing = min(max(pod.reported_start, previous), seen), True, seen - previous
    j = len(recorded) - 1 if pod.end is None else bisect.bisect_left(recorded, pod.end) - 1  # last sighting
    last = recorded[j]
    if j + 1 == len(recorded):
        return Expected(start, last, True, start_gap, False, start_spacing, zero)
    after = recorded[j + 1]
    if after - last > GAP:
        return Expected(start, max(last, start), False, start_gap, True, start_spacing, after - last)
    return Expected(start, max(midpoint(last, after), start), False, start_gap, False, start_spacing, after - last)


def month_starts() -> list[datetime]:
    return [MARCH, APRIL]


def price_at(gpu_model: str, shape: str, equivalents: Decimal, at: datetime) -> Decimal:
    """One unit's hourly price at ``at`` from :data:`PRICES` (a shape's own price wins)."""

    def latest(shape_key: str) -> Decimal | None:
        found = [
            p
            for p in PRICES
            if p.gpu_model == gpu_model and p.shape == shape_key and (p.effective_from or p.set_at) <= at
        ]
        return max(found, key=lambda p: p.effective_from or p.set_at).price if found else None

    own = latest(shape)
    if own is not None:
        return own
    base = latest("")
    assert base is not None
    return base * equivalents


def price_changes(gpu_model: str, shape: str) -> list[datetime]:
    return sorted(
        p.effective_from for p in PRICES if p.effective_from and p.gpu_model == gpu_model and p.shape in ("", shape)
    )
