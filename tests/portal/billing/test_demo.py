"""The demo's months of billing history: every chart has data, closed months, figures that reconcile."""

from __future__ import annotations

from django.utils import timezone

from portal.billing import periods, report
from portal.billing.demo import seed_billing_history
from portal.billing.ledger import zone
from portal.billing.models import Budget, ClosedMonth, RateCardEntry, UsageInterval
from portal.demo import seed_demo_organisation
from scheduling.demo import seed_activity_history, seed_demo_catalogue, seed_demo_history
from scheduling.models import ActivitySample
from tests.catalogue import install_offerings

FLEET = {"H100-80GB-HBM3": 16, "A100-SXM4-80GB": 8, "H200-141GB": 8, "L40S": 4}


def test_a_new_demo_gets_months_of_billing_history_once(db: None) -> None:
    seed_demo_organisation()
    seed_demo_catalogue()
    install_offerings()
    now = timezone.now()
    seed_demo_history(now)
    made = seed_billing_history(now, FLEET)
    assert made > 500
    assert seed_billing_history(now, FLEET) == 0  # only on an empty ledger
    assert seed_activity_history(now) > 0 and ActivitySample.objects.filter(hourly=True).exists()
    assert RateCardEntry.objects.count() == 5 and Budget.objects.count() == 3
    this = periods.month_of(now, zone())
    last = periods.previous_month(this)
    closed = set(ClosedMonth.objects.values_list("period", flat=True))
    assert last not in closed and this not in closed and len(closed) >= 2  # last month is finance's to close
    start, end = periods.month_bounds(last, zone())
    full = report.build(start, end, group="cost_centre", mode=report.Mode.FULL, spread_unallocated=True)
    assert {line.key for line in full.lines} == {"RES-4100", "ENG-2200"}
    for model in full.models:
        assert model.unallocated_gpu_hours >= 0, model  # history never holds more than the fleet
        assert model.held_cost + model.unallocated_cost == model.capacity_cost
    assert all(0 < (line.idle_share or 0) < 1 for line in full.lines)
    assert UsageInterval.objects.filter(ended_at=None).count() == 0
