"""The metric families of ``/metrics`` (names, help, labels: the contract the alert rules and dashboards
read) and the text format, through prometheus_client's collector API.

Every family is prefixed ``gpu_portal_``. Labels: ``gpu_model`` (the GPU Feature Discovery product name,
e.g. ``H100-80GB-HBM3``; ``cpu`` for CPU-only offerings), ``team`` (slug), ``kind`` (notebook, job),
``priority``, ``state``, ``loop``, ``queue``, ``status``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from portal.metrics import events, gauges
from scheduling.loops.passes import BUCKETS as PASS_BUCKETS
from scheduling.loops.passes import flush_api_errors

# Every family this module exposes, for the rules and dashboards to be checked against (tests/metrics).
FAMILIES = {
    "gpu_portal_queue_requests": "gauge",
    "gpu_portal_queue_oldest_wait_seconds": "gauge",
    "gpu_portal_queue_within_quota_requests": "gauge",
    "gpu_portal_queue_within_quota_oldest_wait_seconds": "gauge",
    "gpu_portal_demand_gpu_equivalents": "gauge",
    "gpu_portal_gpus_capacity": "gauge",
    "gpu_portal_gpus_allocated": "gauge",
    "gpu_portal_gpus_measured": "gauge",
    "gpu_portal_gpus_active": "gauge",
    "gpu_portal_borrowed_gpu_equivalents": "gauge",
    "gpu_portal_budget_used_ratio": "gauge",
    "gpu_portal_celery_queue_messages": "gauge",
    "gpu_portal_loop_last_success_timestamp_seconds": "gauge",
    "gpu_portal_loop_duration_seconds": "histogram",
    "gpu_portal_loop_failures": "counter",
    "gpu_portal_kubernetes_api_errors": "counter",
    "gpu_portal_workspace_transitions": "counter",
    "gpu_portal_admission_wait_seconds": "histogram",
}


def _buckets(bounds: tuple[float, ...], cumulative: list[int], count: int) -> list[tuple[str, float]]:
    padded = list(cumulative) + [cumulative[-1] if cumulative else 0] * (len(bounds) - len(cumulative))
    return [*((repr(b), float(n)) for b, n in zip(bounds, padded, strict=False)), ("+Inf", float(count))]


class PortalCollector(Collector):
    def __init__(self, now: datetime) -> None:
        self.now = now

    def describe(self) -> list[Metric]:
        return []  # families are known only once read; no registration-time collection

    def collect(self) -> Iterator[Metric]:
        now = self.now
        queued = gauges.queue(now)
        per_team, within, queued_demand = queued.per_team, queued.within_per_model(), queued.demand
        requests = GaugeMetricFamily(
            "gpu_portal_queue_requests", "Workspaces waiting in the queue.", labels=["gpu_model", "team"]
        )
        oldest = GaugeMetricFamily(
            "gpu_portal_queue_oldest_wait_seconds",
            "Seconds the longest-waiting queued workspace has waited since it last entered the queue.",
            labels=["gpu_model", "team"],
        )
        for (gpu_model, team), waiting in sorted(per_team.items()):
            requests.add_metric([gpu_model, team], waiting.requests)
            oldest.add_metric([gpu_model, team], waiting.oldest_seconds)
        yield from (requests, oldest)
        within_requests = GaugeMetricFamily(
            "gpu_portal_queue_within_quota_requests",
            "Queued workspaces whose team's guarantee covers them: they wait for capacity, not for quota.",
            labels=["gpu_model"],
        )
        within_oldest = GaugeMetricFamily(
            "gpu_portal_queue_within_quota_oldest_wait_seconds",
            "Seconds the longest-waiting queued workspace within its team's guarantee has waited.",
            labels=["gpu_model"],
        )
        for gpu_model, waiting in sorted(within.items()):
            within_requests.add_metric([gpu_model], waiting.requests)
            within_oldest.add_metric([gpu_model], waiting.oldest_seconds)
        yield from (within_requests, within_oldest)

        held = gauges.held(now)
        capacity = gauges.capacity()
        demand = GaugeMetricFamily(
            "gpu_portal_demand_gpu_equivalents",
            "GPU-equivalents held by running workspaces plus those asked for by queued ones.",
            labels=["gpu_model"],
        )
        totals = dict(queued_demand)
        for (gpu_model, _team), amount in held["allocated"].items():
            totals[gpu_model] = totals.get(gpu_model, 0.0) + amount
        for gpu_model, amount in sorted(totals.items()):
            demand.add_metric([gpu_model], amount)
        yield demand
        fleet = GaugeMetricFamily(
            "gpu_portal_gpus_capacity", "GPUs of each model in the cluster (as GPU Feature Discovery counts them).",
            labels=["gpu_model"],
        )  # fmt: skip
        for gpu_model, gpus in sorted(capacity.items()):
            fleet.add_metric([gpu_model], gpus)
        yield fleet
        helps = {
            "allocated": ("gpu_portal_gpus_allocated", "GPU-equivalents held by pods the portal saw running."),
            "measured": (
                "gpu_portal_gpus_measured",
                "Allocated GPU-equivalents of workspaces with a recent GPU activity sample.",
            ),
            "active": (
                "gpu_portal_gpus_active",
                "Allocated GPU-equivalents weighted by each workspace's latest GPU activity sample.",
            ),
            "borrowed": (
                "gpu_portal_borrowed_gpu_equivalents",
                "GPU-equivalents held beyond the team's guarantee (preemptible).",
            ),
        }
        for figure, (name, text) in helps.items():
            family = GaugeMetricFamily(name, text, labels=["gpu_model", "team"])
            for (gpu_model, team), amount in sorted(held[figure].items()):
                family.add_metric([gpu_model, team], amount)
            yield family

        budget = GaugeMetricFamily(
            "gpu_portal_budget_used_ratio", "Share of the team's monthly budget spent (1 = exhausted).",
            labels=["team"],
        )  # fmt: skip
        for team, share in sorted(gauges.budget_shares(now).items()):
            budget.add_metric([team], share)
        yield budget

        broker = GaugeMetricFamily(
            "gpu_portal_celery_queue_messages", "Tasks waiting in the broker's queue.", labels=["queue"]
        )
        for queue, depth in gauges.broker_queues().items():
            if depth is not None:
                broker.add_metric([queue], depth)
        yield broker

        yield from self._loops()
        yield from self._events(now)

    def _loops(self) -> Iterator[Metric]:
        last = GaugeMetricFamily(
            "gpu_portal_loop_last_success_timestamp_seconds",
            "When the loop's last successful pass ended (Unix time).",
            labels=["loop"],
        )
        durations = HistogramMetricFamily(
            "gpu_portal_loop_duration_seconds", "Seconds each pass of the loop took.", labels=["loop"]
        )
        failures = CounterMetricFamily("gpu_portal_loop_failures", "Passes of the loop that raised.", labels=["loop"])
        for stat in gauges.loops():
            if stat.last_finished_at is not None:
                last.add_metric([stat.loop], stat.last_finished_at.timestamp())
            durations.add_metric(
                [stat.loop], _buckets(PASS_BUCKETS, stat.buckets, stat.passes), sum_value=stat.seconds_total
            )
            failures.add_metric([stat.loop], stat.failures)
        yield from (last, durations, failures)
        flush_api_errors()  # this process's own failed calls count too
        errors = CounterMetricFamily(
            "gpu_portal_kubernetes_api_errors",
            'Failed Kubernetes API calls by HTTP status ("0": refused before sending, "connection": no answer).',
            labels=["status"],
        )
        for status, count in sorted(gauges.api_errors().items()):
            errors.add_metric([status], count)
        yield errors

    def _events(self, now: datetime) -> Iterator[Metric]:
        totals = events.current(now)
        transitions = CounterMetricFamily(
            "gpu_portal_workspace_transitions",
            "Workspaces moved into a state (admitted, preempted, reclaimed, failed...).",
            labels=["state", "gpu_model", "kind"],
        )
        for labels, count in sorted(totals.transitions.items()):
            transitions.add_metric(list(labels), count)
        yield transitions
        waits = HistogramMetricFamily(
            "gpu_portal_admission_wait_seconds",
            "Seconds from entering the queue to admission.",
            labels=["gpu_model", "kind", "priority"],
        )
        for labels, hist in sorted(totals.waits.items()):
            waits.add_metric(list(labels), _buckets(events.WAIT_BUCKETS, hist.buckets, hist.count), hist.total)
        yield waits


def render(now: datetime) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector(now))
    return generate_latest(registry)
