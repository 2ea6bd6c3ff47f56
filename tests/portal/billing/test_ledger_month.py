"""The usage ledger over a simulated month and a bit (28 February to 3 April, Europe/Berlin), against the
truth the simulation knows (``tests/ledger_month.py``): worker kills, Kubernetes API outages, a lost node,
preemptions, idle reclaims, a price change, and February closed while the worker is down over its end.

The ledger is driven through what the reconcile pass calls: ``read_cluster`` (which raises when the pod
list fails, so an outage records nothing) and ``metering.record`` with an explicit ``observed_at``, on a
simulated clock. The reconcile interval is 20 simulated minutes (about 2,400 passes, ~30 s here; the gap
setting is derived as in settings.py, 3 x 20 min + 5 s), so "within one reconcile interval per pod run" means
here: each end of a run within half the spacing of the two passes around it, 20 min + jitter per run where passes
kept time. Where a run's end fell in a gap, the ledger's documented rule is asserted exactly instead.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from typing import Any, cast
from unittest import mock

import pytest
from django.db import transaction

from portal.billing import actions, closing, periods, report
from portal.billing.ledger import zone
from portal.billing.models import ClosedMonth, UsageInterval
from portal.billing.sums import FIGURES, GROUPS, gather, to_json
from portal.models import Membership, Team, User
from scheduling.kube.calls import Kube, TransientKubeError
from scheduling.kube.keys import MANAGED_BY, MANAGER, WORKSPACE_ID
from scheduling.loops import metering
from scheduling.loops.reconcile import MANAGED, read_cluster
from tests import factories
from tests import ledger_month as sim
from tests.catalogue import demo_nodes
from tests.conftest import Org
from workspaces.models import GpuOffering, Workspace

pytestmark = pytest.mark.slow

SEED = 20260228
US = timedelta(microseconds=1)  # a midpoint is rounded to the microsecond
PER_RUN = sim.INTERVAL + timedelta(seconds=sim.JITTER_S)  # one reconcile interval, as the passes kept it
FEBRUARY, MARCH_M, APRIL_M = date(2026, 2, 1), date(2026, 3, 1), date(2026, 4, 1)


class _Killed(Exception):
    """The worker dies in the middle of a pass."""


class FakeKube:
    """The cluster's API at one pass: pods (any phase) and nodes as listed, or failing."""

    def __init__(self, pods: list[dict[str, Any]], nodes: list[dict[str, Any]], *, pods_fail: bool, nodes_fail: bool):
        self.pods, self.nodes, self.pods_fail, self.nodes_fail = pods, nodes, pods_fail, nodes_fail

    def list(self, kind: str, namespace: str | None, label_selector: str = "") -> list[dict[str, Any]]:
        if kind == "Pod":
            if self.pods_fail:
                raise TransientKubeError("connection refused", status=None)
            assert label_selector == MANAGED
            return self.pods
        if kind == "Node":
            if self.nodes_fail or self.pods_fail:
                raise TransientKubeError("the server was unable to return a response in time", status=504)
            return self.nodes
        return []  # jobs: the ledger does not read them


@contextmanager
def clock(at: datetime) -> Iterator[None]:
    """The portal's ``timezone.now()`` at ``at`` (for what finance does: prices, closing)."""
    with mock.patch("django.utils.timezone.now", return_value=at):
        yield


@dataclass
class Run:
    """What the drive recorded, and what it saw at closing."""

    scenario: sim.Scenario
    workspaces: dict[int, Workspace]  # Spec.key -> workspace
    pod_passes: list[datetime] = field(default_factory=list)  # the passes that recorded pods
    capacity_passes: list[tuple[datetime, frozenset[str]]] = field(default_factory=list)  # and the nodes seen
    stale: int = 0
    at_closing: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # February's rows then
    closed: ClosedMonth | None = None
    failures_logged: int = 0
    node_list_failures: int = 0  # passes whose node list failed when capacity was due


def _people(org: Org) -> tuple[list[Team], list[User]]:
    vision = factories.make_department(name="Vision", slug="vision", cost_centre="VIS-7")
    teams = [org.alpha, org.beta, factories.make_team(vision, name="Gamma"), factories.make_team(vision, name="Delta")]
    users = [org.member, org.lead, *(factories.make_user() for _ in range(6))]
    for index, user in enumerate(users):
        team = teams[index % len(teams)]
        if not Membership.objects.filter(team=team, user=user).exists():
            factories.add_member(team, user)
    return teams, users


def _workspaces(scenario: sim.Scenario, org: Org, offerings: Mapping[str, GpuOffering]) -> dict[int, Workspace]:
    teams, users = _people(org)
    made = {}
    for spec in scenario.specs:
        offering = offerings[spec.slug]
        job = spec.kind == "job"
        made[spec.key] = factories.make_workspace(
            teams[spec.team], users[spec.owner], offering, state="running", kind=spec.kind, workers=spec.workers,
            gpu_count=spec.gpu_count, gpu_equivalents=offering.gpu_equivalents * spec.gpu_count * spec.workers,
            command=["train"] if job else [], priority="normal" if job else "interactive",
        )  # fmt: skip
    return made


def drive(org: Org, offerings: Mapping[str, GpuOffering], caplog: pytest.LogCaptureFixture) -> Run:
    scenario = sim.make_scenario(SEED)
    run = Run(scenario, _workspaces(scenario, org, offerings))
    nodes = {node["metadata"]["name"]: node for node in demo_nodes()}
    pk = {key: ws.pk for key, ws in run.workspaces.items()}
    due_since: list[datetime] = []

    def capacity_due() -> bool:  # capacity_record_due on the simulated clock (cache.add with a timeout)
        if due_since and now - due_since[-1] < sim.CAPACITY_EVERY:
            return False
        due_since.append(now)
        return True

    finance = [(p.set_at, "price", p) for p in sim.PRICES] + [(sim.CLOSE_FEBRUARY_AT, "close", None)]
    finance.sort(key=lambda item: item[0])
    caplog.set_level(logging.ERROR, logger="scheduling.loops.metering")
    with mock.patch.object(metering, "capacity_record_due", capacity_due):
        for p, listed in scenario.listing():
            while finance and finance[0][0] <= p.at:
                at, _, price = finance.pop(0)
                with clock(at):
                    if price is not None:
                        actions.set_price(org.finance, gpu_model=price.gpu_model, shape=price.shape,
                                          hourly_price=price.price, effective_from=price.effective_from)  # fmt: skip
                    else:
                        run.closed = closing.close_month(org.finance, FEBRUARY)
                        run.at_closing = _rows(period=FEBRUARY)
            now = p.at
            labels = {key: {MANAGED_BY: MANAGER, WORKSPACE_ID: str(pk[key])} for key in pk}
            up = scenario.nodes_up(p.at)
            kube = FakeKube(
                [sim.pod_object(pod, p.at, labels[pod.workspace]) for pod in listed],
                [node for name, node in nodes.items() if name in up],
                pods_fail=p.kind == "api-out",
                nodes_fail=p.kind == "nodes-fail",
            )
            capacity_before = len(due_since)
            try:
                with transaction.atomic() if p.kind == "crash" else nullcontext():
                    view = read_cluster(cast(Kube, kube), sweep=False)
                    metering.record(cast(Kube, kube), view.pods, p.at)
                    if p.kind == "crash":
                        raise _Killed
            except TransientKubeError:
                assert p.kind == "api-out"
                continue
            except _Killed:  # rolled back whole
                continue
            if p.kind == "stale":
                run.stale += 1
                continue
            run.pod_passes.append(p.at)
            if len(due_since) > capacity_before and p.kind == "nodes-fail":
                run.node_list_failures += 1
            if len(due_since) > capacity_before and p.kind == "ok":
                run.capacity_passes.append((p.at, frozenset(up)))
    run.failures_logged = sum("could not record" in r.getMessage() for r in caplog.records)
    return run


def _rows(**filters: Any) -> dict[int, tuple[Any, ...]]:
    fields = ("started_at", "last_seen_at", "ended_at", "rate", "period", "adjusts", "pod_uid")
    return {row[0]: row[1:] for row in UsageInterval.objects.filter(**filters).values_list("pk", *fields)}


def secs(delta: timedelta) -> float:
    return delta.total_seconds()


# -- the test -----------------------------------------------------------------------------------------


def test_a_month_of_usage_matches_what_ran(
    org: Org, offerings: dict[str, GpuOffering], settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.TIME_ZONE = sim.ZONE_NAME
    settings.BILLING_OBSERVATION_GAP_SECONDS = secs(sim.GAP)
    settings.BILLING_CAPACITY_SECONDS = secs(sim.CAPACITY_EVERY)
    run = drive(org, offerings, caplog)
    scenario = run.scenario
    assert run.closed is not None
    # Only the node list's failures were logged by metering: the ledger itself never failed a pass.
    assert run.failures_logged == run.node_list_failures > 0
    assert run.stale == sum(p.kind == "stale" for p in scenario.passes) > 0

    rows = list(UsageInterval.objects.order_by("pod_uid", "started_at"))
    chains: dict[str, list[UsageInterval]] = defaultdict(list)
    for row in rows:
        chains[row.pod_uid].append(row)
    pods = {pod.uid: pod for pod in scenario.pods}
    specs = {spec.key: spec for spec in scenario.specs}
    ws_of = {key: ws.pk for key, ws in run.workspaces.items()}

    # Nothing billed that did not run: every billed pod is one the cluster ran, in its workspace.
    assert set(chains) <= set(pods)
    for uid, chain in chains.items():
        assert {r.workspace_id for r in chain} == {ws_of[pods[uid].workspace]}

    coverage: dict[str, int] = defaultdict(int)
    billed_ws: dict[int, float] = defaultdict(float)
    truth_ws: dict[int, float] = defaultdict(float)
    bound_ws: dict[int, float] = defaultdict(float)
    runs_ws: dict[int, int] = defaultdict(int)
    last_pass = run.pod_passes[-1]
    for pod in scenario.pods:
        e = sim.expected(pod, run.pod_passes)
        chain = chains.get(pod.uid, [])
        spec = specs[pod.workspace]
        equivalents = float(sim.OFFERS[spec.slug].equivalents * spec.gpu_count)
        if e.start is None:
            # Started and ended between two passes (inside a gap, or too briefly): unobservable, never billed.
            assert not chain, pod
            coverage["unobservable" if pod.end and pod.end > pod.start else "never ran"] += 1
            continue
        assert e.end is not None
        # One contiguous chain per pod run: pieces end where the next begins, never overlap.
        assert chain, f"{pod.name} ran {pod.start}..{pod.end} and was seen, but is not billed"
        for before, after in pairwise(chain):
            assert before.ended_at == before.last_seen_at == after.started_at, pod.name
        assert (chain[0].started_at, chain[-1].last_seen_at) == (e.start, e.end), pod.name
        assert (chain[-1].ended_at is None) == e.open, pod.name
        # Against the truth: each end within half the spacing of the passes around it; in a gap, the rule.
        start_error = secs(e.start - pod.start)
        if e.start_gap:
            assert -1 < start_error <= 0, pod.name  # its reported start, to the second (early by < 1 s)
            coverage["opened at its reported start after a gap"] += 1
            bound = 1.0
        else:
            assert abs(start_error) <= secs(e.start_spacing / 2 + US), pod.name
            bound = secs(e.start_spacing / 2 + US)
        true_end = pod.end if pod.end is not None and pod.end <= last_pass else last_pass
        if e.open:
            assert pod.end is None or pod.end > last_pass
            assert e.end == last_pass
            coverage["running at the end, open"] += 1
        elif e.end_gap:
            # Ended in a gap: billed to its last sighting; the time after it is not known, not billed.
            assert timedelta(0) < pod.end - e.end <= e.end_spacing, pod.name  # type: ignore[operator]
            coverage["closed at its last sighting after a gap"] += 1
            true_end = e.end
        else:
            assert abs(secs(e.end - true_end)) <= secs(e.end_spacing / 2 + US), pod.name
            bound += secs(e.end_spacing / 2 + US)
        billed = sum(secs(r.last_seen_at - r.started_at) for r in chain)
        assert abs(billed - secs(e.end - e.start)) < 1e-6
        if e.start_spacing <= PER_RUN and e.end_spacing <= PER_RUN:
            assert abs(billed - secs(true_end - pod.start)) <= secs(PER_RUN), pod.name  # one interval per run
            coverage["runs within one reconcile interval"] += 1
        key = ws_of[pod.workspace]
        billed_ws[key] += billed * equivalents
        truth_ws[key] += secs(true_end - pod.start) * equivalents
        bound_ws[key] += bound * equivalents
        runs_ws[key] += 1
        coverage[pod.reason] += 1
        if spec.kind == "job":
            coverage["job pods"] += 1
        coverage[sim.OFFERS[spec.slug].shape.split("-")[0]] += 1
        for r in chain:  # what each piece holds and costs
            assert (r.units, r.gpu_equivalents) == (spec.gpu_count, sim.OFFERS[spec.slug].equivalents * spec.gpu_count)
            assert (r.gpu_model, r.shape) == (sim.OFFERS[spec.slug].gpu_model, sim.OFFERS[spec.slug].shape)
            unit = sim.price_at(r.gpu_model, r.shape, sim.OFFERS[spec.slug].equivalents, r.started_at)
            assert r.rate == unit * spec.gpu_count, (pod.name, r.started_at)
        # Cut exactly at every month start and price change the run crossed, and nowhere else but where a
        # closed month's row had to stop (its last sighting before closing).
        cuts = {r.started_at for r in chain[1:]}
        offer = sim.OFFERS[spec.slug]
        changes = sim.price_changes(offer.gpu_model, offer.shape)
        boundaries = {b for b in sim.month_starts() + changes if e.start < b < e.end}
        assert boundaries <= cuts, pod.name
        for extra in cuts - boundaries:
            before = next(r for r in chain if r.last_seen_at == extra)
            assert before.pk in run.at_closing and before.period == FEBRUARY, (pod.name, extra)
            coverage["cut where February closed"] += 1
        for b in boundaries:
            coverage["cut at a month start" if b in sim.month_starts() else "cut at a price change"] += 1

    # Per workspace, GPU-equivalent hours against the truth: within the per-run bounds, which are one
    # reconcile interval per run where the passes kept time (and the gap rule where they did not).
    assert set(billed_ws) == set(truth_ws)
    for key, billed in billed_ws.items():
        assert abs(billed - truth_ws[key]) <= bound_ws[key] + 1e-6, key
        assert bound_ws[key] <= runs_ws[key] * secs(sim.GAP) * 2
    # Nothing running goes unbilled: the open rows are exactly the pods still running at the last pass.
    running = {p.uid for p in scenario.pods if p.start <= last_pass and (p.end is None or p.end > last_pass)}
    assert set(UsageInterval.objects.filter(ended_at=None).values_list("pod_uid", flat=True)) == running

    _months(run, rows)
    _capacity(run)
    for case in (
        "unobservable", "opened at its reported start after a gap", "closed at its last sighting after a gap",
        "running at the end, open", "runs within one reconcile interval", "preempted", "idle-reclaimed",
        "node-lost", "completed", "job pods", "mig", "shared", "whole", "cut at a month start",
        "cut at a price change", "cut where February closed",
    ):  # fmt: skip
        assert coverage[case] > 0, f"the scenario never covered: {case}"


def _months(run: Run, rows: list[UsageInterval]) -> None:
    """Periods by the month each piece lies in; February's rows untouched after closing; its late usage
    booked in March as adjustments."""
    tz = zone()
    for r in rows:
        month = periods.month_of(r.started_at, tz)
        assert periods.month_of(r.last_seen_at - US, tz) == month or r.last_seen_at == r.started_at
        if r.pk in run.at_closing:
            before = run.at_closing[r.pk]
            # A row of the closed month keeps its figures: at most it is marked ended at its last sighting.
            assert (r.started_at, r.last_seen_at, r.rate, r.period, r.adjusts) == (before[0], before[1], *before[3:6])
            assert r.ended_at == (before[2] or r.last_seen_at)
        elif month == FEBRUARY:
            assert (r.period, r.adjusts) == (MARCH_M, FEBRUARY), r  # late: an adjustment in the next open month
        else:
            assert (r.period, r.adjusts) == (month, None), r
    late = [r for r in rows if r.adjusts == FEBRUARY]
    assert late, "no usage of February arrived after it closed"
    # The closed month re-reports as it was stored, and its report says so.
    assert run.closed is not None
    start, end = periods.month_bounds(FEBRUARY, tz)
    now = to_json(gather(start, end, groups=GROUPS))
    stored = dict(run.closed.data)

    # (The same sums, in whatever order PostgreSQL adds the floats: equal to a few ulps, not bit for bit.)
    def keyed(usage: list[dict[str, Any]]) -> dict[tuple[Any, ...], float]:
        return {(*(u[g] for g in (*GROUPS, "gpu_model", "adjusts")), f): u[f] for u in usage for f in FIGURES}

    assert keyed(now["usage"]) == pytest.approx(keyed(stored["usage"]), rel=1e-12)
    assert {(m, f): v for m, c in now["capacity"].items() for f, v in c.items()} == pytest.approx(
        {(m, f): v for m, c in stored["capacity"].items() for f, v in c.items()}, rel=1e-12
    )
    assert len(now["usage"]) == len(stored["usage"])
    february = report.build(start, end, group="team")
    assert february.closed_at == sim.CLOSE_FEBRUARY_AT and not february.adjustments
    # March shows the late usage as adjustments, per team, to the cent of what its rows hold.
    march = report.build(*periods.month_bounds(MARCH_M, tz), group="team")
    late_hours = sum(secs(r.last_seen_at - r.started_at) * float(r.gpu_equivalents) for r in late) / 3600
    assert march.adjustments and all("late usage of February 2026" in line.label for line in march.adjustments)
    assert abs(float(sum(line.gpu_hours for line in march.adjustments)) - late_hours) <= 0.0001 * len(march.adjustments)


def _capacity(run: Run) -> None:
    """Capacity per model and month through the report: held + unallocated = capacity, to the cent, and the
    capacity is the fleet times the month's hours (743 in March: summer time)."""
    tz = zone()
    march = report.build(*periods.month_bounds(MARCH_M, tz), group="team", mode=report.Mode.FULL)
    hours_in_march = Decimal(secs(sim.APRIL - sim.MARCH)) / 3600
    assert hours_in_march == 743
    models = {m.gpu_model: m for m in march.models}
    assert set(models) == set(sim.FLEET)
    for model, line in models.items():
        assert line.held_gpu_hours + line.unallocated_gpu_hours == line.capacity_gpu_hours
        assert line.held_cost + line.unallocated_cost == line.capacity_cost
        assert line.unallocated_gpu_hours >= 0 and line.unallocated_cost >= 0, model  # never held beyond the fleet
        own = UsageInterval.objects.filter(period=MARCH_M, adjusts=None, gpu_model=model)
        held = sum(secs(r.last_seen_at - r.started_at) * float(r.gpu_equivalents) for r in own) / 3600
        assert abs(float(line.held_gpu_hours) - held) <= 0.0001 * 4, model  # rounded per team (four)
        if model == sim.H100:
            continue
        price = sim.price_at(model, "", Decimal(1), sim.MARCH)
        assert line.capacity_gpu_hours == sim.FLEET[model] * hours_in_march, model
        assert line.capacity_cost == report.cents(sim.FLEET[model] * hours_in_march * price), model
    # The H100s: a node of eight lost from one capacity pass to the next, back days later; each change is
    # placed within half the spacing of the passes around it; priced 4.00, then 4.40 from the 16th noon.
    h100 = models[sim.H100]
    lost, back = sim.NODE_LOST_AT, sim.NODE_BACK_AT
    change = sim.price_changes(sim.H100, "whole")[0]
    truth_hours = Decimal(16) * hours_in_march - Decimal(8 * secs(back - lost)) / 3600
    times = [at for at, _ in run.capacity_passes]

    def spacing(moment: datetime) -> float:
        after = next(i for i, t in enumerate(times) if t > moment)
        return secs(times[after] - times[after - 1])

    slack = Decimal(8 * (spacing(lost) + spacing(back)) / 2 / 3600)
    assert abs(h100.capacity_gpu_hours - truth_hours) <= slack
    assert sim.MARCH < change < lost < back < sim.APRIL
    truth_cost = (
        Decimal(16) * Decimal(secs(change - sim.MARCH)) * Decimal("4.00")
        + (Decimal(16) * Decimal(secs(sim.APRIL - change)) - Decimal(8 * secs(back - lost))) * Decimal("4.40")
    ) / 3600
    assert abs(h100.capacity_cost - truth_cost) <= slack * Decimal("4.40") + Decimal("0.01")
    # February (closed while the worker was down): the fleet as it stood at closing, from the first pass to
    # the last sighting before the gap; April: from its first instant to the last pass.
    february = {m.gpu_model: m for m in report.build(*periods.month_bounds(FEBRUARY, tz), mode=report.Mode.FULL).models}
    before_close = max(t for t in times if t < sim.CLOSE_FEBRUARY_AT)
    april = {m.gpu_model: m for m in report.build(*periods.month_bounds(APRIL_M, tz), mode=report.Mode.FULL).models}
    for model, gpus in sim.FLEET.items():
        expect_feb = report.hours(Decimal(gpus * secs(before_close - times[0])) / 3600)
        assert abs(february[model].capacity_gpu_hours - expect_feb) <= Decimal("0.0001"), model
        expect_apr = report.hours(Decimal(gpus * secs(times[-1] - sim.APRIL)) / 3600)
        assert abs(april[model].capacity_gpu_hours - expect_apr) <= Decimal("0.0001"), model
        for month in (february, april):
            line = month[model]
            assert line.held_cost + line.unallocated_cost == line.capacity_cost
