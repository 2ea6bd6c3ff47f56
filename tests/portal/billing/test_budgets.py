"""Budgets: month-to-date spend, forecast, thresholds recorded once, refusal at 100 % by policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from portal.billing import actions, budgets
from portal.billing.ledger import RunningPod, record_pods
from portal.billing.models import Budget, BudgetAlert
from portal.models import AuditEvent
from tests import factories
from tests.conftest import Org
from workspaces.models import GpuOffering

NOW = datetime(2026, 3, 11, 0, 0, tzinfo=UTC)  # ten days into March


@pytest.fixture
def spent_40(billing_org: Org, offerings: dict[str, GpuOffering]) -> Org:
    """Alpha held one H100 (4.00/h) for ten hours this month: 40.00 spent."""
    ws = factories.make_workspace(billing_org.alpha, billing_org.member, offerings["h100-80gb-hbm3"], state="running")
    pod = RunningPod("uid-b", "ws-b", ws.pk)
    record_pods(NOW - timedelta(hours=10), [pod])
    record_pods(NOW, [pod])
    return billing_org


def test_status_has_spend_share_and_forecast(spent_40: Org) -> None:
    actions.set_budget(spent_40.finance, spent_40.alpha, amount="50", unit="money", policy="block_batch")
    status = budgets.statuses(NOW)[spent_40.alpha.pk]
    assert (status.spent, status.crossed, status.exhausted) == (Decimal("40.00"), [50, 80], False)
    assert status.forecast == Decimal("124.00")  # 40 in 10 days -> 124 in 31


def test_gpu_hour_budgets_count_gpu_hours(spent_40: Org) -> None:
    actions.set_budget(spent_40.operator, spent_40.alpha, amount="10", unit="gpu_hours", policy="block_all")
    status = budgets.statuses(NOW)[spent_40.alpha.pk]
    assert (status.spent, status.exhausted) == (Decimal("10.0000"), True)


def test_thresholds_are_recorded_once(spent_40: Org) -> None:
    actions.set_budget(spent_40.finance, spent_40.alpha, amount="45", unit="money", policy="warn")
    made = budgets.record_alerts(NOW)
    assert [a.threshold for a in made] == [50, 80]
    assert [a.threshold for a in budgets.newest_per_team(made)] == [80]
    assert budgets.record_alerts(NOW) == []
    assert BudgetAlert.objects.count() == 2


@pytest.mark.parametrize(
    ("policy", "job_refused", "notebook_refused"),
    [("warn", False, False), ("block_batch", True, False), ("block_all", True, True)],
)
def test_at_100_percent_the_policy_decides(
    spent_40: Org, policy: str, job_refused: bool, notebook_refused: bool
) -> None:
    actions.set_budget(spent_40.finance, spent_40.alpha, amount="40", unit="money", policy=policy)
    job = budgets.refusal(spent_40.alpha, "job", NOW)
    assert bool(job) is job_refused
    assert bool(budgets.refusal(spent_40.alpha, "notebook", NOW)) is notebook_refused
    if job:
        assert job.startswith("Budget: Alpha has used its budget for March 2026 (40.00 EUR of 40.00 EUR)")
    assert budgets.refusal(spent_40.beta, "job", NOW) is None  # no budget, no limit


def test_a_team_without_a_budget_costs_a_request_one_query(spent_40: Org, django_assert_num_queries) -> None:
    with django_assert_num_queries(1):  # the budget lookup; no spend summed for nothing to compare with
        assert budgets.refusal(spent_40.beta, "job", NOW) is None
    assert budgets.statuses(NOW) == {}


def test_only_finance_and_operators_set_budgets_and_bad_input_is_refused(spent_40: Org) -> None:
    with pytest.raises(PermissionDenied):
        actions.set_budget(spent_40.lead, spent_40.alpha, amount="10", unit="money", policy="warn")
    for amount, unit, policy in (("-5", "money", "warn"), ("abc", "money", "warn"), ("1.001", "money", "warn"),
                                 ("10", "euros", "warn"), ("10", "money", "maybe")):  # fmt: skip
        with pytest.raises(ValidationError):
            actions.set_budget(spent_40.finance, spent_40.alpha, amount=amount, unit=unit, policy=policy)
    assert not Budget.objects.exists()
    actions.set_budget(spent_40.finance, spent_40.alpha, amount="10", unit="money", policy="warn")
    actions.set_budget(spent_40.finance, spent_40.alpha, amount="20", unit="money", policy="warn")
    actions.remove_budget(spent_40.finance, spent_40.alpha)
    assert [e.action for e in AuditEvent.objects.order_by("id")] == [
        "billing.set_budget", "billing.set_budget", "billing.remove_budget",
    ]  # fmt: skip
