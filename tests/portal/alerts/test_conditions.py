"""What counts as wrong, from figures: the same conditions, thresholds and periods as the Prometheus rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from portal.alerts import kinds
from portal.alerts.conditions import Observation, Readings, api_failures, observe, quantile, stalled_loops
from portal.metrics.events import WAIT_BUCKETS
from portal.metrics.figures import Waiting
from portal.metrics.rules import Thresholds

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T = Thresholds()


def by_key(readings: Readings, previous_api: dict[str, Any] | None = None) -> dict[str, Observation]:
    return {o.key: o for o in observe(readings, T, NOW, previous_api)}


def test_each_kind_takes_its_period_and_severity_from_the_rendered_rule() -> None:
    rules = kinds.rules_by_kind(Thresholds(contention_minutes=45, idle_minutes=7.5))
    assert rules[kinds.CONTENTION].hold == timedelta(minutes=45)
    assert rules[kinds.IDLE].hold == rules[kinds.IDLE_TEAM].hold == timedelta(minutes=7.5)
    assert rules[kinds.WITHIN_QUOTA] == kinds.Rule(timedelta(minutes=5), kinds.CRITICAL)
    assert rules[kinds.QUEUE_WAIT] == kinds.Rule(timedelta(minutes=15), kinds.WARNING)
    assert rules[kinds.LOOP_STALLED] == kinds.Rule(timedelta(minutes=1), kinds.CRITICAL)
    assert rules[kinds.KUBE_API_ERRORS].severity == kinds.CRITICAL
    with pytest.raises(ValueError):
        kinds.parse_duration("5 minutes")


def test_the_quantile_is_prometheus_histogram_quantile() -> None:
    bounds = (1.0, 5.0, 10.0)
    # 10 observations: 2 <= 1 s, 8 <= 5 s, 10 <= 10 s: rank 9.5 falls in (5, 10], 1.5 of its 2.
    assert quantile(0.95, bounds, [2, 8, 10], 10) == pytest.approx(5 + 5 * 1.5 / 2)
    assert quantile(0.5, bounds, [2, 8, 10], 10) == pytest.approx(1 + 4 * 3 / 6)
    assert quantile(0.95, bounds, [0, 0, 1], 10) == 10.0  # in +Inf: the highest finite bound
    assert quantile(0.95, bounds, [0, 0, 0], 0) is None


def test_long_admission_waits_per_model() -> None:
    slow = [0] * 8 + [100] * (len(WAIT_BUCKETS) - 8)  # all 100 admissions between 600 and 1800 s
    quick = [100] * len(WAIT_BUCKETS)
    found = by_key(Readings(waits={"H100": (slow, 100), "A100": (quick, 100)}, wait_bounds=WAIT_BUCKETS))
    assert found["queue_wait:H100"].breached is False  # p95 = 1740 s, under 1800
    assert found["queue_wait:H100"].value == pytest.approx(600 + 1200 * 0.95)
    assert not found["queue_wait:A100"].breached
    slower = [0] * 9 + [100] * (len(WAIT_BUCKETS) - 9)  # between 1800 and 3600 s
    assert by_key(Readings(waits={"H100": (slower, 100)}, wait_bounds=WAIT_BUCKETS))["queue_wait:H100"].breached


def test_within_quota_waits_contention_and_idle_shares() -> None:
    readings = Readings(
        within_quota={("H100", 1): Waiting(2, 16 * 60.0), ("H100", 2): Waiting(1, 14 * 60.0)},
        demand={"H100": 9.0, "A100": 4.0},
        capacity={"H100": 8, "A100": 4},
        measured={("H100", 1): 4.0, ("H100", 2): 4.0, ("A100", 2): 2.0},
        active={("H100", 1): 1.0, ("H100", 2): 3.6, ("A100", 2): 2.0},
        team_names={1: "Alpha", 2: "Beta"},
    )
    found = by_key(readings)
    alpha = found["within_quota:H100:1"]
    assert (alpha.breached, alpha.team_id, alpha.kind) == (True, 1, kinds.WITHIN_QUOTA)
    assert "2 request(s) of Alpha for H100" in alpha.message and "16 min" in alpha.message
    assert not found["within_quota:H100:2"].breached  # 14 min < 15
    assert found["contention:H100"].breached and not found["contention:A100"].breached  # 4 is not above 4
    assert found["idle:H100"].value == pytest.approx((8 - 4.6) / 8) and found["idle:H100"].breached  # 42.5 %
    assert not found["idle:A100"].breached
    assert found["idle_team:1"].value == pytest.approx(0.75) and found["idle_team:1"].breached
    assert found["idle_team:2"].value == pytest.approx((6 - 5.6) / 6) and not found["idle_team:2"].breached
    assert "contention:cpu" not in found  # no capacity figure: as in PromQL, no comparison


def test_api_failures_are_counted_by_the_rules_matcher_and_made_a_rate() -> None:
    counts = {"500": 3, "503": 2, "429": 4, "0": 1, "connection": 5, "409": 100, "404": 7, "5000": 9}
    assert api_failures(counts) == 15  # 409, 404 and the 5-digit status are not failures of the API
    first = by_key(Readings(api_errors=counts))["kube_api_errors"]
    assert first.breached is False and first.value is None and first.data["count"] == 15
    earlier = {"count": 5, "at": (NOW - timedelta(minutes=2)).isoformat()}
    later = by_key(Readings(api_errors=counts), earlier)["kube_api_errors"]
    assert later.value == pytest.approx(5.0) and not later.breached  # 10 in 2 minutes: not above 5
    faster = {"count": 3, "at": (NOW - timedelta(minutes=2)).isoformat()}
    assert by_key(Readings(api_errors=counts), faster)["kube_api_errors"].breached  # 6 a minute
    reset = {"count": 50, "at": (NOW - timedelta(minutes=1)).isoformat()}
    assert by_key(Readings(api_errors=counts), reset)["kube_api_errors"].value is None  # counter went back


def test_only_the_control_loops_stall() -> None:
    last = {
        "scheduling_cycle": NOW - timedelta(seconds=301),
        "reconcile": NOW - timedelta(seconds=299),
        "telemetry": NOW - timedelta(hours=3),
    }
    stalls = stalled_loops(last, T, NOW)
    assert [s.loop for s in stalls] == ["scheduling_cycle"]
    assert "5 min ago" in stalls[0].message and "Celery worker, the scheduler and beat" in stalls[0].message
    assert stalled_loops({"reconcile": None}, T, NOW) == []  # never succeeded: no figure
    found = by_key(Readings(loops=last))
    assert found["loop_stalled:scheduling_cycle"].breached and not found["loop_stalled:reconcile"].breached
