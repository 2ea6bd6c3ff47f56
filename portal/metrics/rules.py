"""The alert rules on the portal's metrics, rendered from the threshold settings (``ALERT_*``): a Prometheus
rules file and the same groups as a Prometheus Operator ``PrometheusRule``. Pure: settings in, dicts out.

``python manage.py alert_rules`` prints them; the files under ``deploy/`` are the defaults' rendering
(tests/portal/metrics/test_rules.py keeps them so and runs ``promtool`` on them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Failures worth an alert: the server's (5xx), throttling, and calls that got no answer at all.
API_FAILURES = 'status=~"5..|429|0|connection"'
CONTROL_LOOPS = 'loop=~"scheduling_cycle|reconcile"'


@dataclass(frozen=True)
class Thresholds:
    queue_wait_p95_seconds: float = 1800.0
    within_quota_wait_minutes: float = 15.0
    contention_minutes: float = 30.0
    idle_share: float = 0.4
    idle_minutes: float = 60.0
    loop_stall_seconds: float = 300.0
    kube_api_errors_per_minute: float = 5.0
    budget_used_ratio: float = 1.0

    @classmethod
    def from_settings(cls, settings: Any) -> Thresholds:
        return cls(
            queue_wait_p95_seconds=settings.ALERT_QUEUE_WAIT_P95_SECONDS,
            within_quota_wait_minutes=settings.ALERT_WITHIN_QUOTA_WAIT_MINUTES,
            contention_minutes=settings.ALERT_CONTENTION_MINUTES,
            idle_share=settings.ALERT_IDLE_SHARE,
            idle_minutes=settings.ALERT_IDLE_MINUTES,
            loop_stall_seconds=settings.ALERT_LOOP_STALL_SECONDS,
            kube_api_errors_per_minute=settings.ALERT_KUBE_API_ERRORS_PER_MINUTE,
            budget_used_ratio=settings.ALERT_BUDGET_USED_RATIO,
        )


def _number(value: float) -> str:
    return f"{value:g}"


def _minutes(value: float) -> str:
    return f"{value:g}m"


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, "service": "gpu-portal"},
        "annotations": {"summary": summary, "description": description},
    }


def groups(t: Thresholds) -> list[dict[str, Any]]:
    within = t.within_quota_wait_minutes * 60
    queue = [
        _alert(
            "GpuPortalQueueWaitHigh",
            "histogram_quantile(0.95, sum by (gpu_model, le) (rate(gpu_portal_admission_wait_seconds_bucket[1h])))"
            f" > {_number(t.queue_wait_p95_seconds)}",
            "15m",
            "warning",
            "Requests for {{ $labels.gpu_model }} wait long for admission",
            "95 % of the admissions of the last hour waited up to {{ $value | humanizeDuration }} "
            f"(threshold {_number(t.queue_wait_p95_seconds)} s).",
        ),
        _alert(
            "GpuPortalWaitingWithinQuota",
            f"max by (gpu_model) (gpu_portal_queue_within_quota_oldest_wait_seconds) > {_number(within)}",
            "5m",
            "critical",
            "Requests within their team's guarantee wait for {{ $labels.gpu_model }}",
            "A request its team's guarantee covers has waited {{ $value | humanizeDuration }}: the cluster lacks "
            f"the capacity the guarantees promise (threshold {_number(t.within_quota_wait_minutes)} min).",
        ),
        _alert(
            "GpuPortalContention",
            "sum by (gpu_model) (gpu_portal_demand_gpu_equivalents) > sum by (gpu_model) (gpu_portal_gpus_capacity)",
            _minutes(t.contention_minutes),
            "warning",
            "Demand for {{ $labels.gpu_model }} exceeds the fleet",
            "Held plus queued GPU-equivalents have exceeded the GPUs in the cluster for "
            f"{_number(t.contention_minutes)} minutes.",
        ),
    ]
    fleet = [
        _alert(
            "GpuPortalIdleAllocatedGpus",
            "(sum by (gpu_model) (gpu_portal_gpus_measured) - sum by (gpu_model) (gpu_portal_gpus_active))"
            f" / sum by (gpu_model) (gpu_portal_gpus_measured) > {_number(t.idle_share)}",
            _minutes(t.idle_minutes),
            "warning",
            "Allocated {{ $labels.gpu_model }} GPUs sit idle",
            "{{ $value | humanizePercentage }} of the allocated, measured GPU-equivalents have been idle for "
            f"{_number(t.idle_minutes)} minutes (threshold {_number(t.idle_share * 100)} %).",
        ),
        _alert(
            "GpuPortalBudgetExhausted",
            f"gpu_portal_budget_used_ratio >= {_number(t.budget_used_ratio)}",
            "5m",
            "warning",
            "Team {{ $labels.team }} has spent its monthly budget",
            "{{ $value | humanizePercentage }} of the team's budget for this month is spent.",
        ),
    ]
    health = [
        _alert(
            "GpuPortalLoopStalled",
            f"time() - gpu_portal_loop_last_success_timestamp_seconds{{{CONTROL_LOOPS}}}"
            f" > {_number(t.loop_stall_seconds)}",
            "1m",
            "critical",
            "The {{ $labels.loop }} loop has stalled",
            "Its last successful pass ended {{ $value | humanizeDuration }} ago: nothing is admitted or "
            "watched. Check the Celery worker, the scheduler and beat.",
        ),
        _alert(
            "GpuPortalKubernetesApiErrors",
            f"sum(rate(gpu_portal_kubernetes_api_errors_total{{{API_FAILURES}}}[5m])) * 60"
            f" > {_number(t.kube_api_errors_per_minute)}",
            "5m",
            "critical",
            "The portal's calls to the Kubernetes API fail",
            "{{ $value | humanize }} failed calls a minute (server errors, throttling, no answer).",
        ),
    ]
    return [
        {"name": "gpu-portal-queue", "rules": queue},
        {"name": "gpu-portal-fleet", "rules": fleet},
        {"name": "gpu-portal-health", "rules": health},
    ]


def rules_file(t: Thresholds) -> dict[str, Any]:
    return {"groups": groups(t)}


def prometheus_rule(t: Thresholds, *, name: str = "gpu-portal", namespace: str = "gpu-portal") -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "gpu-portal", "role": "alert-rules"},
        },
        "spec": {"groups": groups(t)},
    }
