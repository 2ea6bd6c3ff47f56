"""The chargeback report: clipped, grouped, priced, reconciled with the fleet, spread to the cent."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from portal.billing import report
from portal.billing.models import CapacityInterval, UsageInterval
from portal.billing.report import Mode
from tests import factories
from tests.conftest import Org
from workspaces.models import GpuOffering, Workspace

MARCH = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
H = timedelta(hours=1)


def interval(workspace: Workspace, start: datetime, end: datetime, rate: str, **fields: object) -> UsageInterval:
    team = workspace.team
    per_pod = workspace.offering.gpu_equivalents * workspace.gpu_count
    return UsageInterval.objects.create(
        workspace=workspace, pod_uid=f"u{UsageInterval.objects.count()}", pod_name="p", user=workspace.owner,
        team=team, department=team.department, cost_centre=team.department.cost_centre, offering=workspace.offering,
        offering_kind=workspace.offering.kind, gpu_model=workspace.offering.gpu_model, shape="x",
        units=workspace.gpu_count, gpu_equivalents=per_pod, rate=Decimal(rate), started_at=start, last_seen_at=end,
        ended_at=end, period=start.date().replace(day=1), **fields,
    )  # fmt: skip


def capacity(model: str, gpus: int, start: datetime, end: datetime, rate: str) -> CapacityInterval:
    return CapacityInterval.objects.create(
        gpu_model=model, gpus=gpus, rate=Decimal(rate), started_at=start, last_seen_at=end, ended_at=end,
        period=start.date().replace(day=1),
    )  # fmt: skip


@pytest.fixture
def h100(offerings: dict[str, GpuOffering]) -> GpuOffering:
    return offerings["h100-80gb-hbm3"]


def test_held_time_is_clipped_to_the_period_and_priced(org: Org, h100: GpuOffering) -> None:
    ws = factories.make_workspace(org.alpha, org.member, h100)
    interval(ws, MARCH[0] - 2 * H, MARCH[0], "4")  # the ledger cuts intervals at month starts
    interval(ws, MARCH[0], MARCH[0] + 3 * H, "4")
    interval(ws, MARCH[1] - H, MARCH[1], "4")
    interval(ws, MARCH[1], MARCH[1] + 5 * H, "4")
    assert report.build(MARCH[0] + H, MARCH[0] + 2 * H).lines[0].gpu_hours == 1  # any period, clipped
    got = report.build(*MARCH, group="team")
    [line] = got.lines
    assert (line.key, line.gpu_hours, line.cost) == ("alpha", Decimal("4.0000"), Decimal("16.00"))


def test_used_and_idle_hours_come_from_the_intervals_telemetry(org: Org, h100: GpuOffering) -> None:
    ws = factories.make_workspace(org.alpha, org.member, h100)
    interval(ws, MARCH[0] + H, MARCH[0] + 5 * H, "4", measured_gpu_seconds=4 * 3600.0,
             used_gpu_seconds=3600.0, idle_gpu_seconds=2 * 3600.0)  # fmt: skip
    [line] = report.build(*MARCH).lines
    assert (line.used_share, line.idle_share) == (0.25, 0.5)


def test_held_plus_unallocated_is_capacity_per_model_to_the_cent(org: Org, offerings: dict[str, GpuOffering]) -> None:
    rng = random.Random(7)
    models = {"h100-80gb-hbm3": "4.1337", "a100-sxm4-80gb-1g-10gb": "0.4001", "l40s-shared-4": "0.3033"}
    people = [org.member, org.lead]
    for slug, rate in models.items():
        offering = offerings[slug]
        capacity(offering.gpu_model, 4, *MARCH, str(Decimal(rate) / offering.gpu_equivalents))
        for _ in range(40):
            team = rng.choice([org.alpha, org.beta])
            ws = factories.make_workspace(team, rng.choice(people), offering)
            start = MARCH[0] + timedelta(seconds=rng.randrange(0, 29 * 86400))
            interval(ws, start, start + timedelta(seconds=rng.randrange(1, 2 * 86400)), rate)
    for group in report.GROUPS:
        got = report.build(*MARCH, group=group, mode=Mode.FULL, spread_unallocated=True)
        for m in got.models:
            assert m.held_cost + m.unallocated_cost == m.capacity_cost
            assert m.held_gpu_hours + m.unallocated_gpu_hours == m.capacity_gpu_hours
            assert m.capacity_gpu_hours == Decimal(4 * 31 * 24)
            assert m.spread_cost == m.unallocated_cost  # every model was used, so all of it was spread
        assert sum(line.cost for line in got.lines) == sum(m.held_cost for m in got.models)
        assert got.total == sum(m.capacity_cost for m in got.models)  # full recovery recovers the fleet
        showback = report.build(*MARCH, group=group)
        assert showback.total == showback.held_cost == got.held_cost


def test_unallocated_capacity_stays_a_platform_line_unless_spread(org: Org, h100: GpuOffering) -> None:
    capacity(h100.gpu_model, 2, *MARCH, "4")
    capacity("L40S", 1, *MARCH, "1")  # nobody used it: its cost cannot be spread by use
    for team, hours in ((org.alpha, 3), (org.beta, 1)):
        interval(factories.make_workspace(team, org.lead, h100), MARCH[0], MARCH[0] + hours * H, "4")
    full = report.build(*MARCH, mode=Mode.FULL)
    assert full.unallocated_cost == Decimal(2 * 744 * 4 - 16) + Decimal(744)
    spread = report.build(*MARCH, mode=Mode.FULL, spread_unallocated=True)
    by_team = {line.key: line.platform_cost for line in spread.lines}
    assert by_team == {"alpha": Decimal(5936) * 3 / 4, "beta": Decimal(5936) / 4}
    assert spread.unallocated_cost == Decimal(744)
    assert spread.total == full.total


def test_a_spread_sums_to_the_cent() -> None:
    shares = report.spread(Decimal("100.00"), {"a": Decimal(1), "b": Decimal(1), "c": Decimal(1)})
    assert sum(shares.values()) == Decimal("100.00")
    assert sorted(shares.values()) == [Decimal("33.33"), Decimal("33.33"), Decimal("33.34")]


def test_narrowed_lines_keep_the_organisations_fleet(org: Org, h100: GpuOffering) -> None:
    capacity(h100.gpu_model, 1, *MARCH, "4")
    interval(factories.make_workspace(org.alpha, org.member, h100), MARCH[0], MARCH[0] + H, "4")
    interval(factories.make_workspace(org.beta, org.lead, h100), MARCH[0], MARCH[0] + H, "4")
    got = report.build(*MARCH, group="user", mode=Mode.FULL, spread_unallocated=True, teams=[org.alpha.pk])
    assert [line.key for line in got.lines] == ["alice"]
    assert got.lines[0].platform_cost == (Decimal(744 * 4) - 8) / 2


@pytest.mark.parametrize("teams", [2, 12])
def test_the_query_count_does_not_grow_with_teams(
    org: Org, h100: GpuOffering, teams: int, django_assert_max_num_queries: object
) -> None:
    capacity(h100.gpu_model, 8, *MARCH, "4")
    department = org.alpha.department
    for _ in range(teams):
        team = factories.make_team(department)
        interval(factories.make_workspace(team, org.member, h100), MARCH[0], MARCH[0] + H, "4")
    for group in report.GROUPS:
        with django_assert_max_num_queries(4):  # type: ignore[operator] # closed?, usage, fleet, labels
            report.build(*MARCH, group=group, mode=Mode.FULL, spread_unallocated=True)


def test_the_json_keeps_money_exact(org: Org, h100: GpuOffering) -> None:
    interval(factories.make_workspace(org.alpha, org.member, h100), MARCH[0], MARCH[0] + H / 3, "4.01")
    data = report.as_json(report.build(*MARCH))
    assert data["lines"][0]["cost"] == "1.34" and data["totals"]["total"] == "1.34"


def test_a_member_sees_only_their_own_line(org: Org, h100: GpuOffering) -> None:
    interval(factories.make_workspace(org.alpha, org.member, h100), MARCH[0], MARCH[0] + H, "4")
    interval(factories.make_workspace(org.alpha, org.lead, h100), MARCH[0], MARCH[0] + H, "4")
    got = report.build(*MARCH, group="user", user=org.member.pk)
    assert [(line.key, line.cost) for line in got.lines] == [("alice", Decimal("4.00"))]


def test_bad_groups_and_modes_are_refused(db: None) -> None:
    with pytest.raises(ValueError, match="Group by one of"):
        report.build(*MARCH, group="planet")
    with pytest.raises(ValueError, match="mode is one of"):
        report.build(*MARCH, mode="generous")
