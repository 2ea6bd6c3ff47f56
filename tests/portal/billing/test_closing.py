"""Closing a month: frozen figures, identical re-exports, late usage booked as next month's adjustment."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from portal.billing import closing, exports, report, sums
from portal.billing.ledger import RunningPod, record_pods
from portal.billing.models import ClosedMonth, UsageInterval
from portal.models import AuditEvent
from tests import factories
from tests.conftest import Org
from workspaces.models import GpuOffering

MARCH = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
APRIL = datetime(2026, 4, 1, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC)
S = timedelta(seconds=1)


def _exports(built: report.Report) -> tuple[bytes, bytes, bytes]:
    return exports.to_csv(built), exports.to_xlsx(built), exports.to_pdf(built, title="March")


def test_only_finance_closes_and_only_ended_months(billing_org: Org) -> None:
    with pytest.raises(PermissionDenied):
        closing.close_month(billing_org.operator, date(2026, 3, 1))
    with pytest.raises(ValidationError, match="has not ended"):
        closing.close_month(billing_org.finance, date(2099, 3, 1))
    closing.close_month(billing_org.finance, date(2026, 3, 1))
    with pytest.raises(ValidationError, match="already closed"):
        closing.close_month(billing_org.finance, date(2026, 3, 1))
    assert AuditEvent.objects.filter(action="billing.close_month").count() == 1


def test_late_usage_of_a_closed_month_is_next_months_adjustment(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    ws = factories.make_workspace(billing_org.alpha, billing_org.member, offerings["h100-80gb-hbm3"], state="running")
    pod = RunningPod("uid-1", "ws-1", ws.pk)
    late = MARCH[1] - timedelta(minutes=30)
    record_pods(late - timedelta(hours=2), [pod])
    record_pods(late, [pod])  # then the workers were down over the month's end...
    closing.close_month(billing_org.finance, date(2026, 3, 1))
    closed = report.as_json(report.build(*MARCH))
    assert closed["totals"]["total"] == "8.00"  # two hours at 4.00
    files = _exports(report.build(*MARCH, group="user", mode="full", spread_unallocated=True))
    team = billing_org.alpha
    team.name = "Alpha renamed"
    team.save()
    record_pods(MARCH[1] + timedelta(minutes=30), [pod])  # ...and found the pod still running: it ran through
    assert report.as_json(report.build(*MARCH)) == closed  # the closed month did not move, nor its labels
    assert _exports(report.build(*MARCH, group="user", mode="full", spread_unallocated=True)) == files
    april = report.build(*APRIL)
    assert [(line.label, line.cost) for line in april.adjustments] == [
        ("Alpha renamed: late usage of March 2026", Decimal("2.00"))
    ]
    assert [(line.key, line.cost) for line in april.lines] == [("alpha", Decimal("2.00"))]
    assert april.total == Decimal("4.00")
    march_rows = UsageInterval.objects.filter(period=date(2026, 3, 1))
    assert [(r.started_at, r.last_seen_at) for r in march_rows] == [(late - timedelta(hours=2), late)]


def test_a_closed_month_is_assembled_from_what_was_stored(billing_org: Org) -> None:
    closing.close_month(billing_org.finance, date(2026, 3, 1))
    stored = ClosedMonth.objects.get()
    assert stored.data["month"] == "2026-03-01"
    assert report.build(*MARCH).closed_at == stored.closed_at
    assert report.build(MARCH[0], MARCH[1] - S).closed_at is None  # not the calendar month: the ledger now


def test_the_twelve_month_charts_read_closed_months_from_what_was_stored(
    billing_org: Org, offerings: dict[str, GpuOffering]
) -> None:
    ws = factories.make_workspace(billing_org.alpha, billing_org.member, offerings["h100-80gb-hbm3"], state="running")
    pod = RunningPod("uid-m", "ws-m", ws.pk)
    record_pods(MARCH[0] + timedelta(days=3), [pod])
    record_pods(MARCH[0] + timedelta(days=3, hours=2), [pod])
    record_pods(MARCH[0] + timedelta(days=3, hours=3), [])  # a gap: closed at the last sighting, 2 hours
    closing.close_month(billing_org.finance, date(2026, 3, 1))
    UsageInterval.objects.update(rate=Decimal(100))  # what no ledger pass does to a closed month
    costs = sums.monthly(date(2026, 1, 1), date(2026, 4, 1), ["team", "cost_centre"])
    assert costs["team"][(date(2026, 3, 1), str(billing_org.alpha.pk))].money == pytest.approx(8.0)
    assert costs["cost_centre"][(date(2026, 3, 1), "RES-1")].money == pytest.approx(8.0)
