"""The usage ledger from observations: opening, extending, closing, gaps, splits, prices, concurrency."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection

from portal.billing import ledger
from portal.billing.ledger import RunningPod, Seen, record_capacity, record_pods
from portal.billing.models import CapacityInterval, RateCardEntry, UsageInterval
from tests import factories
from tests.conftest import Org
from tests.portal.billing.conftest import T0
from workspaces.models import GpuOffering, Workspace

S = timedelta(seconds=1)


def notebook(org: Org, offering: GpuOffering, **fields: object) -> Workspace:
    return factories.make_workspace(org.alpha, org.member, offering, **({"state": "running"} | fields))


def pod(workspace: Workspace, n: int = 0) -> RunningPod:
    return RunningPod(f"uid-{workspace.pk}-{n}", f"ws-{workspace.pk}-{n}", workspace.pk)


def seconds(interval: UsageInterval) -> float:
    return (interval.last_seen_at - interval.started_at).total_seconds()


def test_a_pod_is_billed_from_first_to_last_sighting_with_half_a_pass_at_each_end(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(T0, [])
    record_pods(T0 + 10 * S, [pod(ws)])  # started somewhere in (T0, T0+10]
    record_pods(T0 + 20 * S, [pod(ws)])
    record_pods(T0 + 30 * S, [])  # ended somewhere in (T0+20, T0+30]
    [row] = UsageInterval.objects.all()
    assert (row.started_at, row.ended_at) == (T0 + 5 * S, T0 + 25 * S)
    assert row.rate == Decimal("4.00") and row.gpu_equivalents == 1 and row.units == 1
    assert (row.team, row.user, row.cost_centre, row.shape) == (billing_org.alpha, billing_org.member, "RES-1", "whole")


def test_queued_and_admitted_workspaces_cost_nothing(billing_org: Org, offerings: dict[str, GpuOffering]) -> None:
    notebook(billing_org, offerings["h100-80gb-hbm3"], state="admitted")
    record_pods(T0, [])
    record_pods(T0 + 10 * S, [])
    assert not UsageInterval.objects.exists()


def test_a_gap_in_observation_is_closed_at_the_last_sighting(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(T0, [pod(ws)])
    record_pods(T0 + 10 * S, [pod(ws)])
    record_pods(T0 + 10 * S + timedelta(minutes=10), [])  # the API was out for ten minutes; the pod is gone
    [row] = UsageInterval.objects.all()
    assert row.ended_at == T0 + 10 * S


def test_the_same_pod_on_both_sides_of_a_gap_ran_through_it(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(T0, [pod(ws)])
    record_pods(T0 + timedelta(minutes=30), [pod(ws)])  # a worker was down half an hour
    [row] = UsageInterval.objects.all()
    assert row.ended_at is None and seconds(row) == 1800


def test_a_pod_first_seen_after_a_gap_opens_when_it_was_seen(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(T0, [])
    record_pods(T0 + timedelta(minutes=30), [pod(ws)])  # the cluster did not say when it started
    assert UsageInterval.objects.get().started_at == T0 + timedelta(minutes=30)


@pytest.mark.parametrize(
    ("reported", "opened"),
    [
        (T0 + timedelta(minutes=12), T0 + timedelta(minutes=12)),  # within the gap: the cluster's word
        (T0 - timedelta(hours=5), T0),  # a clock far behind cannot bill time before the gap
        (T0 + timedelta(hours=5), T0 + timedelta(minutes=30)),  # nor one ahead time after the sighting
    ],
)
def test_a_pod_that_started_during_a_gap_is_billed_from_its_reported_start(
    billing_org: Org, offerings: dict[str, GpuOffering], reported: datetime, opened: datetime
) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(T0, [])
    record_pods(T0 + timedelta(minutes=30), [RunningPod("u", "p", ws.pk, reported)])
    assert UsageInterval.objects.get().started_at == opened


def test_running_pods_read_their_containers_start() -> None:
    containers = [
        {"state": {"running": {"startedAt": "2026-03-10T12:05:00Z"}}},
        {"state": {"running": {"startedAt": "2026-03-10T12:04:00Z"}}},
    ]
    running = {"metadata": {"uid": "a", "name": "p"}, "status": {"phase": "Running", "containerStatuses": containers}}
    pending = {"metadata": {"uid": "b"}, "status": {"phase": "Pending"}}
    pods: dict[int, list[dict[str, Any]]] = {7: [running, pending]}
    assert ledger.running_pods(pods) == [RunningPod("a", "p", 7, datetime(2026, 3, 10, 12, 4, tzinfo=UTC))]


def test_repeated_and_stale_passes_change_nothing(billing_org: Org, offerings: dict[str, GpuOffering]) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(T0, [pod(ws)])
    record_pods(T0 + 10 * S, [pod(ws)])
    before = list(UsageInterval.objects.values())
    assert record_pods(T0 + 10 * S, [pod(ws)]).stale
    assert record_pods(T0 + 5 * S, []).stale  # an older pass finishing late must not close the interval
    assert list(UsageInterval.objects.values()) == before


def test_a_job_bills_each_running_pod(billing_org: Org, offerings: dict[str, GpuOffering]) -> None:
    job = notebook(billing_org, offerings["h100-80gb-hbm3"], kind="job", workers=2, gpu_count=2,
                   gpu_equivalents=Decimal(4), command=["train"], priority="normal")  # fmt: skip
    record_pods(T0, [pod(job, 0)])  # one worker started first
    record_pods(T0 + 10 * S, [pod(job, 0), pod(job, 1)])
    rows = list(UsageInterval.objects.order_by("pod_uid"))
    assert [(r.units, r.gpu_equivalents, r.rate) for r in rows] == [(2, Decimal(2), Decimal(8))] * 2
    assert [r.started_at for r in rows] == [T0, T0 + 5 * S]


def test_a_rate_change_mid_interval_splits_it(billing_org: Org, offerings: dict[str, GpuOffering]) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    change = T0 + timedelta(hours=1)
    RateCardEntry.objects.create(gpu_model="H100-80GB-HBM3", hourly_price=Decimal(5), effective_from=change)
    record_pods(T0, [pod(ws)])
    record_pods(T0 + timedelta(minutes=50), [pod(ws)])
    record_pods(T0 + timedelta(minutes=70), [pod(ws)])
    rows = list(UsageInterval.objects.order_by("started_at"))
    assert [(r.started_at, r.last_seen_at, r.ended_at, r.rate) for r in rows] == [
        (T0, change, change, Decimal(4)),
        (change, T0 + timedelta(minutes=70), None, Decimal(5)),
    ]


def test_an_interval_crossing_months_is_split_at_the_month_start(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    ws = notebook(billing_org, offerings["h100-80gb-hbm3"])
    end_of_march = datetime(2026, 3, 31, 23, 0, tzinfo=UTC)
    record_pods(end_of_march, [pod(ws)])
    record_pods(end_of_march + timedelta(hours=3), [])  # a gap: closed at the last sighting...
    record_pods(end_of_march + timedelta(hours=4), [pod(ws, 1)])
    record_pods(end_of_march + timedelta(hours=4) + 10 * S, [pod(ws, 1)])
    record_pods(end_of_march + timedelta(hours=30), [pod(ws, 1)])  # ...and this one runs into April 2
    assert [(str(r.period), seconds(r)) for r in UsageInterval.objects.order_by("started_at")] == [
        ("2026-03-01", 0.0), ("2026-04-01", 26 * 3600.0),
    ]  # fmt: skip
    ws2 = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(datetime(2026, 4, 30, 23, 59, 50, tzinfo=UTC), [pod(ws2)])
    record_pods(datetime(2026, 5, 1, 0, 0, 10, tzinfo=UTC), [pod(ws2)])
    may = datetime(2026, 5, 1, tzinfo=UTC)
    assert [(str(r.period), r.started_at, r.last_seen_at, r.ended_at) for r in ws2.usage.order_by("started_at")] == [
        ("2026-04-01", may - 10 * S, may, may),
        ("2026-05-01", may, may + 10 * S, None),
    ]


@pytest.mark.parametrize(
    ("slug", "rate", "equivalents"),
    [
        ("a100-sxm4-80gb-1g-10gb", Decimal("2.80") * Decimal("0.1429"), Decimal("0.1429")),
        ("l40s-shared-4", Decimal("0.30"), Decimal("0.25")),
        ("h100-80gb-hbm3", Decimal(4), Decimal(1)),
    ],
)
def test_slices_and_shares_cost_their_share_of_the_gpu(
    billing_org: Org, offerings: dict[str, GpuOffering], slug: str, rate: Decimal, equivalents: Decimal
) -> None:
    ws = notebook(billing_org, offerings[slug])
    record_pods(T0, [pod(ws)])
    row = UsageInterval.objects.get()
    assert (row.rate, row.gpu_equivalents) == (rate, equivalents)


def test_a_shape_price_of_its_own_wins_over_the_derived_one(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    RateCardEntry.objects.create(gpu_model="A100-SXM4-80GB", shape="mig-1g.10gb", hourly_price=Decimal("0.50"),
                                 effective_from=T0 - timedelta(days=1))  # fmt: skip
    ws = notebook(billing_org, offerings["a100-sxm4-80gb-1g-10gb"])
    record_pods(T0, [pod(ws)])
    assert UsageInterval.objects.get().rate == Decimal("0.50")


def test_cpu_only_workspaces_are_not_in_the_gpu_ledger(billing_org: Org, offerings: dict[str, GpuOffering]) -> None:
    ws = notebook(billing_org, offerings["cpu"])
    record_pods(T0, [pod(ws)])
    assert not UsageInterval.objects.exists()


def test_activity_lands_on_the_open_intervals_weighted_by_each_pod(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    shared = notebook(billing_org, offerings["l40s-shared-4"])
    whole = notebook(billing_org, offerings["h100-80gb-hbm3"])
    record_pods(T0, [pod(shared), pod(whole)])
    ledger.add_activity({shared.pk: Seen(30, 15, 0), whole.pk: Seen(30, 0.3, 30)}, batch=1)
    got = {r.workspace_id: (r.measured_gpu_seconds, r.used_gpu_seconds, r.idle_gpu_seconds)
           for r in UsageInterval.objects.all()}  # fmt: skip
    assert got == {shared.pk: (7.5, 3.75, 0.0), whole.pk: (30.0, pytest.approx(0.3), 30.0)}


def test_capacity_follows_the_fleet(db: None) -> None:
    record_capacity(T0, {"H100-80GB-HBM3": 8, "L40S": 2})
    record_capacity(T0 + timedelta(seconds=60), {"H100-80GB-HBM3": 8, "L40S": 2})
    record_capacity(T0 + timedelta(seconds=120), {"H100-80GB-HBM3": 7, "L40S": 2})  # a node was lost
    rows = [
        (r.gpu_model, r.gpus, r.started_at, r.ended_at)
        for r in CapacityInterval.objects.order_by("gpu_model", "started_at")
    ]
    change = T0 + timedelta(seconds=90)
    assert rows == [
        ("H100-80GB-HBM3", 8, T0, change),
        ("H100-80GB-HBM3", 7, change, None),
        ("L40S", 2, T0, None),
    ]


@pytest.mark.django_db(transaction=True)
def test_concurrent_passes_never_open_a_pod_twice(org: Org) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL")
    from tests.catalogue import install_offerings

    offering = install_offerings()["h100-80gb-hbm3"]
    workspaces = [notebook(org, offering) for _ in range(5)]
    pods = [pod(w) for w in workspaces]
    errors: list[BaseException] = []

    def run(offset: int) -> None:
        try:
            for step in range(10):
                record_pods(T0 + (step * 10 + offset) * S, pods)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert UsageInterval.objects.count() == 5
    assert set(UsageInterval.objects.values_list("ended_at", flat=True)) == {None}
