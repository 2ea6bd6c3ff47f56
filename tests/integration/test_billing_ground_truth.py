"""The usage ledger against ground truth, on the full stack (PostgreSQL, Redis, a real worker with beat, a
simulated cluster): over about a minute with a worker killed, a Kubernetes API outage, a node lost, a
preemption and an idle reclaim, each workspace's billed time matches the time its pods really ran.

**The truth** comes from an observer of the test's own (``tests/billing_truth.py``): a thread that lists the
portal's pods (label ``app.kubernetes.io/managed-by=gpu-portal``) in each team's namespace every 0.1 s
through the official client and records, per pod UID, the wall-clock spans in which the cluster said
``Running``. The portal's ledger runs on the same wall clock (one machine), so both are compared in wall
time, not in the simulated cluster's time (which the node loss jumps ahead).

**The outage is the portal's alone.** Injected faults match on verb, resource and namespace
(``scheduling/simcluster/faults.py``): every verb but ``list`` fails everywhere, and ``list`` fails for
calls across all namespaces and for cluster-scoped kinds (namespace ``""``), which is how the portal lists
(``kube.list("Pod", None, ...)``: pods, jobs, nodes; it lists in one namespace only for a job's logs page).
The observer's namespaced lists go through, so the truth has no hole there.

**The blind periods are quiet.** While the worker is down and while the API is out, nothing changes in
the cluster: the test waits until every pod is running and nothing is in flight before each, and the
jobs outlive the test. So every pod start and end happens while the portal watches at its usual pace
(checked: no end falls between two passes further apart than ``BILLING_OBSERVATION_GAP_SECONDS``). Both
blind periods last longer than that gap (3 s here; checked), so the pods running on both sides must be
billed through them by their UID (checked per pod). A pod that started or ended inside such a gap would by
design be billed only from or to its sighting: that is not what this test measures (tried: two notebooks
whose pods started while the worker was down for 7.8 s were each billed 6-7 s short, and the checks here
say so).

**Tolerance.** Each pod run has two ends, and the ledger puts each at the midpoint of the two passes
either side of it (the last that saw it one way, the first that saw it the other): each is off by at most
half the time between those two passes. That time is the reconcile interval (0.5 s here) when beat keeps
time, which makes the acceptance's "within one reconcile interval" per pod run; but passes run late now and
then (here: median 0.5 s, 90th percentile 0.6-1.0 s, the odd one up to 1.9 s on a loaded machine), so a
fixed ``0.5 s x runs`` fails now and then on an honest ledger (seen: one-pod workspaces off by 0.57 and
0.62 s). The bound is therefore
taken from the passes that really happened, which the observer records from the ledger's cursor: per
workspace, ``|ledger seconds - observed seconds| <= sum over its pod runs of (half the pass spacing around
each end + half the observer's own listing spacing there) + 0.05 s`` (a pass's time is the middle of its
pod list call). The printed table shows both that bound and the nominal ``0.5 s x runs``. The same difference
in GPU-seconds uses each pod's GPU-equivalents, which must be its offering's (whole GPU 1, MIG 2g 0.2857,
MIG 1g 0.1429, time-sliced 1/4). Besides: nothing billed twice (one pod's intervals never overlap and none
is open at the end), nothing unbilled (every pod seen running for more than a pass has intervals),
nothing billed that did not run (every billed pod UID was seen running, in that workspace), and a
workspace that only ever queued has no pod and no interval at all.

Idle reclaim needs the cluster's Jupyter timestamps to agree with the portal's clock (see
``test_idle_reclaim_stack.py``): this cluster runs at real speed, and the idle rules are shortened on the
portal's side (``IDLE_POLICY_MINUTE_SECONDS``). GPU activity is scraped from the cluster's dcgm-exporter
page directly (``TELEMETRY_SOURCE=scrape``): no Prometheus to start.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from portal.billing.models import UsageInterval
from portal.models import Membership, Team
from scheduling.demand import SIM_DURATION_ENV, SIM_PROFILE_ENV
from scheduling.kube.client import reset_client
from scheduling.models import TeamPolicy, TeamQuota
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests import factories
from tests.billing_truth import Observer, Pod, Seen
from tests.catalogue import install_images, install_offerings
from tests.conftest import Org, api_client_for
from tests.stack_fixtures import Worker, wait_for
from workspaces.models import Workspace

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RECONCILE_S = 0.5  # the portal's reconcile interval here (its minimum)
GAP_S = 3.0  # BILLING_OBSERVATION_GAP_SECONDS: passes further apart are a gap in observation
OUTAGE_S = 4.0  # the Kubernetes API outage (the cluster runs at real speed: simulated = real seconds)
MINUTE_S = 0.25  # one minute of the idle rules: the idle notebook's 30 min window is 7.5 s, its grace 1.25 s
H100, A100, L40S = "H100-80GB-HBM3", "A100-SXM4-80GB", "L40S"
WHOLE, MIG_1G, MIG_2G, SHARED = "h100-80gb-hbm3", "a100-sxm4-80gb-1g-10gb", "a100-sxm4-80gb-2g-20gb", "l40s-shared-4"
H100_NODES = ("gpu-h100-0", "gpu-h100-1")
BUSY = "running"  # states of the workspaces that run
IN_FLIGHT = ("admitted", "provisioning", "stopping")
DELAY_S = 0.05  # per pod run: a pass's observation time is taken after its lists, not during them
PORTAL_VERBS = ("get", "watch", "create", "update", "patch", "delete", "deletecollection", "post", "put")


@pytest.fixture(scope="module")
def billing_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_simcluster(seed=23, speed=1.0, tmp_dir=tmp_path_factory.mktemp("billing-stack")) as cluster:
        yield cluster


@dataclass
class Scene:
    cluster: SimCluster
    worker: Worker
    observer: Observer
    org: Org


def _quota(team: Team, flavour: str, guaranteed: float, borrow: float = 0) -> None:
    TeamQuota.objects.update_or_create(
        team=team,
        flavour=flavour,
        defaults={"guaranteed": Decimal(str(guaranteed)), "borrow_limit": Decimal(str(borrow))},
    )


@pytest.fixture
def scene(
    org: Org,
    stack: SimCluster,
    billing_cluster: SimCluster,
    dedicated_worker: Callable[..., Worker],
    settings: Any,
) -> Iterator[Scene]:
    cluster = billing_cluster
    install_offerings()
    install_images()
    gamma = factories.make_team(name="Gamma", slug="gamma")  # a department of its own: lends nothing
    factories.add_member(gamma, org.member)
    factories.add_member(gamma, org.lead, Membership.Role.LEAD)
    # Research: alpha lends its two H100s until it wants them back; beta's batch jobs may borrow one.
    _quota(org.alpha, H100, 2)
    _quota(org.alpha, A100, 1)
    _quota(org.alpha, L40S, 1)
    _quota(org.beta, H100, 2, borrow=1)
    _quota(gamma, H100, 1)  # one notebook runs, a second waits for good
    _quota(gamma, A100, 1)
    # Gamma has the shortest idle rules; alpha and beta the longest, so that only the forgotten notebook goes.
    TeamPolicy.objects.create(team=gamma, idle_window_minutes=30, idle_grace_minutes=5, stuck_window_minutes=1440)
    for team in (org.alpha, org.beta):
        TeamPolicy.objects.create(team=team, idle_window_minutes=1440, idle_grace_minutes=60, stuck_window_minutes=1440)
    worker = dedicated_worker(
        KUBECONFIG=str(cluster.kubeconfig_path),
        SCHEDULING_INTERVAL_SECONDS="0.5",
        RECONCILE_INTERVAL_SECONDS=str(RECONCILE_S),
        BILLING_OBSERVATION_GAP_SECONDS=str(GAP_S),
        PREEMPTION_NOTICE_SECONDS="1",
        SIMCLUSTER_JOB_SECONDS="3600",  # the jobs outlive the test, the clock jump of the node loss included
        TELEMETRY_SOURCE="scrape",
        DCGM_SCRAPE_URLS=f"{cluster.plain_url}/metrics",
        TELEMETRY_INTERVAL_SECONDS="1",
        IDLE_POLICY_MINUTE_SECONDS=str(MINUTE_S),
    )
    settings.KUBECONFIG = str(cluster.kubeconfig_path)  # the web side talks to the same cluster
    settings.NOTEBOOK_PROXY_URL = cluster.plain_url
    reset_client()
    observer = Observer(cluster, ("team-alpha", "team-beta", "team-gamma"))
    observer.start()  # before any workspace exists: it sees every pod from its creation
    try:
        yield Scene(cluster, worker, observer, org)
    finally:
        worker.kill()  # its ledger is written; a warm shutdown would only wait for its tasks
        observer.stop()
        cluster.clear_faults()
        for node in H100_NODES:
            cluster.set_node_ready(node, True)
        reset_client()


# -- acting as the users do ----------------------------------------------------------------------------


def request(scene: Scene, team: str, name: str, offering: str, profile: str, *, workers: int = 0) -> int:
    """A notebook, or with ``workers`` a training job (batch priority when it is a single worker: a borrower)."""
    user = scene.org.beta_lead if team == "beta" else scene.org.member
    payload: dict[str, Any] = {"kind": "notebook", "name": name, "team": team, "offering": offering,
                               "gpu_count": 1, "image": "scipy", "env": {SIM_PROFILE_ENV: profile}}  # fmt: skip
    if workers:
        payload |= {"kind": "job", "image": "pytorch", "command": ["python", "train.py"], "workers": workers}
        payload["env"] |= {SIM_DURATION_ENV: "3600"}
        if workers == 1:
            payload["priority"] = "batch"
    response = api_client_for(user).post("/api/v1/workspaces/", payload, format="json")
    assert response.status_code == 202, response.json()
    return int(response.json()["id"])


def delete(pk: int) -> None:
    workspace = Workspace.objects.get(pk=pk)
    response = api_client_for(workspace.owner).delete(f"/api/v1/workspaces/{pk}/")
    assert response.status_code == 202, response.json()


def states(pks: list[int]) -> dict[int, str]:
    return dict(Workspace.objects.filter(pk__in=pks).values_list("pk", "state"))


def running_pods(scene: Scene) -> dict[int, list[tuple[Pod, Seen]]]:
    found: dict[int, list[tuple[Pod, Seen]]] = defaultdict(list)
    for pod, seen in scene.observer.latest().values():
        found[pod.workspace_id].append((pod, seen))
    return found


def steady(scene: Scene, pks: list[int]) -> bool:
    """Nothing in flight: no workspace on its way anywhere, no notice or warning pending, and the cluster
    showing exactly the running workspaces' pods, all Running, none terminating."""
    rows = Workspace.objects.filter(pk__in=pks)
    if rows.filter(state__in=IN_FLIGHT).exists() or rows.filter(teardown_requested_at__isnull=False).exists():
        return False
    if rows.filter(state=BUSY).exclude(preempt_at=None).exists() or rows.exclude(idle_warned_at=None).exists():
        return False
    pods = running_pods(scene)
    workers = dict(rows.filter(state=BUSY).values_list("pk", "workers"))
    if set(pods) != set(workers):
        return False
    return all(
        len(pods[pk]) == n and all(s.phase == "Running" and not s.deleting for _, s in pods[pk])
        for pk, n in workers.items()
    )


def settle(scene: Scene, pks: list[int], what: str, timeout: float = 30.0) -> None:
    """Steady, twice, with a pass or so in between (the ledger has seen the same)."""
    wait_for(lambda: steady(scene, pks), timeout=timeout, what=what)
    time.sleep(0.6)
    wait_for(lambda: steady(scene, pks), timeout=timeout, what=what)


def wait_for_pass_after(scene: Scene, moment: float, what: str, timeout: float = 20.0) -> datetime:
    """The first ledger pass observed after the wall-clock ``moment``."""

    def passed() -> datetime | None:
        return next((p for p in scene.observer.passes if p.timestamp() > moment), None)

    return wait_for(passed, timeout=timeout, what=what)


# -- the scenario ---------------------------------------------------------------------------------------


def test_each_workspace_is_billed_for_what_its_pods_really_ran(scene: Scene) -> None:
    began = time.monotonic()
    marks: dict[str, float] = {}

    def mark(what: str) -> None:
        marks[what] = time.monotonic() - began

    # Whole GPUs, MIG slices and time-sliced shares; a 2-worker job; one forgotten notebook; one that waits.
    train = request(scene, "beta", "train", WHOLE, "steady-training", workers=2)
    wait_for(lambda: states([train])[train] != "queued", what="the 2-worker job admitted")
    borrower = request(scene, "beta", "borrower", WHOLE, "steady-training", workers=1)
    mig = request(scene, "alpha", "mig", MIG_2G, "cpu-preprocessing")
    shared = request(scene, "alpha", "shared", SHARED, "cpu-preprocessing")
    forgotten = request(scene, "gamma", "forgotten", MIG_1G, "none")
    whole = request(scene, "gamma", "whole", WHOLE, "gpu-background")
    wait_for(lambda: states([whole])[whole] != "queued", what="gamma's first H100 admitted")
    waits = request(scene, "gamma", "waits", WHOLE, "gpu-background")  # over gamma's guarantee: queued
    started = [train, borrower, mig, shared, forgotten, whole]
    wait_for(lambda: all(s == BUSY for s in states(started).values()), timeout=30, what="six workspaces running")
    assert Workspace.objects.get(pk=borrower).borrowing
    assert states([waits])[waits] == "queued"
    mark("running")

    # Preemption: alpha asks for its guarantee back; beta's borrower gets the notice, is preempted, queues.
    mine = [request(scene, "alpha", f"h100-{i}", WHOLE, "cpu-preprocessing") for i in range(2)]
    everyone = [*started, *mine, waits]
    wait_for(lambda: all(s == BUSY for s in states(mine).values()), timeout=30, what="alpha's H100 notebooks")
    assert "preempted" in Workspace.objects.get(pk=borrower).events.values_list("to_state", flat=True)
    mark("preempted")
    # Idle reclaim: the forgotten notebook is warned, then reclaimed after its grace period.
    wait_for(lambda: states([forgotten])[forgotten] == "reclaimed", timeout=40, what="the idle reclaim")
    mark("reclaimed")

    # The worker killed the hard way while all is quiet; a new one started.
    settle(scene, everyone, "quiet before the kill")
    scene.worker.kill()
    killed = time.time()  # no pass of the dead worker after this
    time.sleep(GAP_S / 2)  # with the new worker's start, longer than the gap: a gap in observation
    scene.worker.start()
    wait_for_pass_after(scene, killed, "a pass of the new worker", timeout=30)
    mark("worker back")

    # A Kubernetes API outage for the portal's calls (the observer's namespaced lists go through).
    settle(scene, everyone, "quiet before the outage")
    outage = time.time()
    for verb in PORTAL_VERBS:
        scene.cluster.inject_fault(verb=verb, status=503, message="etcdserver: request timed out", duration_s=OUTAGE_S)
    scene.cluster.inject_fault(verb="list", namespace="", status=503, message="etcdserver: leader changed",
                               duration_s=OUTAGE_S)  # fmt: skip
    time.sleep(OUTAGE_S)
    wait_for_pass_after(scene, outage + OUTAGE_S, "a pass after the outage")
    outage += 1.0  # a pass that listed before the faults is recorded by then: the gap lies around this
    mark("outage over")

    # A node lost with pods on it: NotReady, then (300 s later, by the cluster's clock) its pods evicted;
    # the portal provisions them again on the other H100 node.
    settle(scene, everyone, "quiet before the node loss")
    on_node: dict[str, set[int]] = defaultdict(set)
    for pod, seen in scene.observer.latest().values():
        on_node[seen.node].add(pod.workspace_id)
    lost = max(H100_NODES, key=lambda node: len(on_node[node]))
    victims = on_node[lost]
    assert victims, f"no pod on {lost}: {dict(on_node)}"
    scene.cluster.set_node_ready(lost, False)
    time.sleep(1.0)  # the portal sees its pods not ready (still Running: billed, as the cluster says)
    scene.cluster.advance_clock(301)  # past the pods' default 300 s toleration of not-ready: evicted
    wait_for(lambda: all(s.node != lost for _, s in scene.observer.latest().values()), timeout=20, what="the eviction")
    settle(scene, everyone, "everyone running again elsewhere", timeout=40)
    scene.cluster.set_node_ready(lost, True)
    mark("node lost")

    # The end: everything deleted (what waits first, so that nothing starts); one last pass records the ends.
    for pk in (borrower, waits):
        if states([pk])[pk] == "queued":
            delete(pk)
    for pk in everyone:
        if states([pk])[pk] != "deleted":
            delete(pk)
    wait_for(lambda: not scene.observer.latest(), timeout=30, what="every pod gone")
    gone = scene.observer.last_listing_at()
    wait_for_pass_after(scene, gone + RECONCILE_S, "a pass after the last pod went")
    wait_for(lambda: not UsageInterval.objects.filter(ended_at=None).exists(), what="every interval closed")
    scene.observer.stop()
    mark("all ended")

    report = compare(scene, everyone)
    print(report.table(marks))
    passes = scene.observer.passes
    print(f"observer: longest listing gap {scene.observer.longest_silence():.2f} s, "
          f"{len(scene.observer.failures)} failed calls; ledger gaps: worker kill {gap_around(passes, killed):.1f} s, "
          f"outage {gap_around(passes, outage):.1f} s")  # fmt: skip

    # The scene happened as staged: the node's pods came back elsewhere, and both blind periods were gaps.
    for pk in victims:
        uids = [uid for uid, pod in scene.observer.pods.items() if pod.workspace_id == pk]
        assert {n for uid in uids for n in scene.observer.nodes(uid)} - {lost}, f"workspace {pk} never moved"
    blind = [gap_around(scene.observer.passes, killed), gap_around(scene.observer.passes, outage)]
    assert min(blind) > GAP_S
    # The observer's resolution at each end is in the bound; a silence as long as the ledger's blind periods
    # in this run would mean it was starved, and could not tell what they hid (a loaded machine holds it up
    # to three seconds now and then, its calls waiting on the cluster: in the bound).
    assert scene.observer.longest_silence() < min(blind), "the observer's own view has a hole"
    assert not report.problems, "\n".join(report.problems)
    # What only ever queued has no pod and no interval.
    assert not [pod for pod in scene.observer.pods.values() if pod.workspace_id == waits]
    assert not UsageInterval.objects.filter(workspace_id=waits).exists()


# -- the comparison -------------------------------------------------------------------------------------


def gap_around(passes: list[datetime], moment: float) -> float:
    """The time between the ledger passes either side of the wall-clock ``moment`` (inf: no pass there)."""
    times = [p.timestamp() for p in passes]
    i = bisect.bisect_right(times, moment)
    return times[i] - times[i - 1] if 0 < i < len(times) else float("inf")


@dataclass
class Run:
    """One pod's time Running, by the observer and by the ledger, and how far apart the two may be."""

    workspace_id: int
    name: str
    truth: float
    billed: float
    bound: float  # half the pass spacing around each end, and the observer's own resolution


@dataclass
class Report:
    runs: dict[str, Run]
    weight: dict[int, float]  # workspace -> GPU-equivalents per pod
    passes: list[datetime]
    problems: list[str]

    def per_workspace(self) -> dict[int, list[Run]]:
        found: dict[int, list[Run]] = defaultdict(list)
        for run in self.runs.values():
            found[run.workspace_id].append(run)
        return found

    def table(self, marks: dict[str, float]) -> str:
        gaps = sorted(b.timestamp() - a.timestamp() for a, b in itertools.pairwise(self.passes))
        lines = [
            "",
            "phases (s from start): " + ", ".join(f"{k} {v:.1f}" for k, v in marks.items()),
            f"ledger passes: {len(self.passes)}, spacing median {gaps[len(gaps) // 2]:.2f} s, "
            f"90th percentile {gaps[len(gaps) * 9 // 10]:.2f} s, longest {', '.join(f'{g:.2f}' for g in gaps[-3:])} s",
            "workspace  runs  truth_s  ledger_s  diff_s  bound_s  nominal_s  worst_run_s  gpu_s_diff",
        ]
        for pk, runs in sorted(self.per_workspace().items()):
            truth, billed = sum(r.truth for r in runs), sum(r.billed for r in runs)
            worst = max(abs(r.billed - r.truth) for r in runs)
            lines.append(
                f"{pk:>9}  {len(runs):>4}  {truth:7.2f}  {billed:8.2f}  {billed - truth:+6.3f}  "
                f"{sum(r.bound for r in runs):7.2f}  {RECONCILE_S * len(runs):9.2f}  {worst:11.3f}  "
                f"{(billed - truth) * self.weight[pk]:+10.4f}"
            )
        return "\n".join(lines)


def _seconds(row: UsageInterval) -> tuple[float, float]:
    return row.started_at.timestamp(), (row.ended_at or row.last_seen_at).timestamp()


def _pod_problems(name: str, pk: int, span: tuple[float, float] | None, intervals: list[UsageInterval],
                  weight: float, passes: list[datetime]) -> list[str]:  # fmt: skip
    """Everything wrong with one pod's intervals, against what the observer saw of it (``span``: when it
    ran, None: never)."""
    billed = sum(b - a for a, b in map(_seconds, intervals))
    found = []
    # Nothing billed that did not run, nor to another workspace; nothing unbilled.
    if intervals and span is None:
        found.append(f"pod {name} billed {billed:.2f} s to workspace {pk}, never seen running")
    if others := {r.workspace_id for r in intervals} - {pk}:
        found.append(f"pod {name} of workspace {pk} billed to workspace(s) {sorted(others)}")
    if span and span[1] - span[0] > RECONCILE_S and not intervals:
        found.append(f"pod {name} ran {span[1] - span[0]:.2f} s and was never billed")
    # Nothing billed twice: one pod's intervals follow each other, and none is left open.
    found += [f"pod {name} still has an open interval" for r in intervals if r.ended_at is None]
    found += [
        f"pod {name} billed twice: {a.started_at}..{a.ended_at} and {b.started_at}..{b.ended_at}"
        for a, b in itertools.pairwise(intervals)
        if a.ended_at is None or b.started_at < a.ended_at
    ]
    found += [
        f"pod {name} billed at {r.gpu_equivalents} GPU-equivalents, not {weight}"
        for r in intervals
        if abs(float(r.gpu_equivalents) - weight) > 1e-4
    ]
    if span is None:
        return found
    # The scene is quiet while the portal is blind: every start and end happens between two passes at the
    # usual pace (else the ledger is by design off by up to the gap, which is not what is measured here).
    found += [f"pod {name} started or ended in a gap of the ledger" for t in span if gap_around(passes, t) > GAP_S]
    # Running on both sides of a gap: billed through it.
    for a, b in itertools.pairwise(p.timestamp() for p in passes):
        if b - a > GAP_S and span[0] < a and b < span[1]:
            covered = sum(max(0.0, min(b, end) - max(a, start)) for start, end in map(_seconds, intervals))
            if covered < b - a - 1e-3:
                found.append(f"pod {name} ran through a {b - a:.1f} s gap and was billed {covered:.2f} s of it")
    return found


def compare(scene: Scene, pks: list[int]) -> Report:
    observer, passes = scene.observer, scene.observer.passes
    rows: dict[str, list[UsageInterval]] = defaultdict(list)
    for row in UsageInterval.objects.order_by("started_at", "pk"):
        rows[row.pod_uid].append(row)
    weight = {w.pk: float(w.offering.gpu_equivalents * w.gpu_count) for w in Workspace.objects.filter(pk__in=pks)}
    report = Report({}, weight, list(passes), [])
    for uid in set(observer.pods) | set(rows):
        pod, intervals = observer.pods.get(uid), rows.get(uid, [])
        spans = observer.spans(uid) if pod else []
        name = pod.name if pod else f"uid {uid}"
        pk = pod.workspace_id if pod else intervals[0].workspace_id
        if len(spans) > 1 or float("inf") in (end for _, end in spans):
            report.problems.append(f"pod {name}: observed running {spans}, not once and over")
            continue
        span = spans[0] if spans else None
        report.problems += _pod_problems(name, pk, span, intervals, weight[pk], passes)
        if span or intervals:  # else created and never ran (e.g. Pending on the lost node): nothing to bill
            billed = sum(b - a for a, b in map(_seconds, intervals))
            ends = [gap_around(passes, t) / 2 + observer.listing_gap(uid, t) / 2 for t in span] if span else []
            bound = DELAY_S + sum(ends)
            report.runs[uid] = Run(pk, name, span[1] - span[0] if span else 0.0, billed, bound)
    for pk, runs in report.per_workspace().items():
        difference, bound = sum(r.billed - r.truth for r in runs), sum(r.bound for r in runs)
        if abs(difference) > bound:
            report.problems.append(f"workspace {pk}: billed {difference:+.3f} s off what ran (bound {bound:.2f} s)")
    return report
