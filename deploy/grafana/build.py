"""Build the Grafana dashboards in this folder with Grafana's own Foundation SDK (a dev dependency):

    .venv/bin/python deploy/grafana/build.py

- ``gpu-portal-overview.json``: the queue, admission waits, what happens to workspaces, allocation against
  activity and capacity per GPU model and per team, budgets, and the portal's loops, API errors and broker.
- ``gpu-fleet.json``: dcgm-exporter's series per node, MIG instance and pod (GPU-ON-KUBERNETES.md section
  6: ``Hostname`` became ``hostname`` and pod labels may come as ``exported_*``; both are folded).

tests/portal/metrics/test_dashboards.py checks the files are this script's output, load back through the
SDK's models, and name only metrics that exist.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import bargauge, dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

HERE = Path(__file__).resolve().parent
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
WIDTH = 24


def _query(expr: str, legend: str, ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)


def _series(title: str, unit: str, *queries: tuple[str, str], width: int = 12, stack: bool = False) -> timeseries.Panel:
    panel = timeseries.Panel().title(title).unit(unit).datasource(DATASOURCE).span(width).height(8).min(0)
    if stack:
        panel = panel.fill_opacity(30)
    for i, (expr, legend) in enumerate(queries):
        panel = panel.with_target(_query(expr, legend, chr(ord("A") + i)))
    return panel


def _quantile(q: float, histogram: str, by: str) -> str:
    return f"histogram_quantile({q:g}, sum by ({by}, le) (rate({histogram}_bucket[$__rate_interval])))"


def _datasource_variable() -> dashboard.DatasourceVariable:
    return dashboard.DatasourceVariable("datasource").label("Prometheus").type("prometheus")


def overview() -> dashboard.Dashboard:
    rate = "[$__rate_interval]"
    return (
        dashboard.Dashboard("GPU portal: overview")
        .uid("gpu-portal-overview")
        .tags(["gpu-portal"])
        .refresh("1m")
        .time("now-24h", "now")
        .with_variable(_datasource_variable())
        .with_row(dashboard.Row("Queue"))
        .with_panel(
            _series(
                "Queued requests per GPU model",
                "short",
                ("sum by (gpu_model) (gpu_portal_queue_requests)", "{{gpu_model}}"),
                ("sum by (gpu_model) (gpu_portal_queue_within_quota_requests)", "{{gpu_model}} within quota"),
            )
        )
        .with_panel(
            _series(
                "Longest wait in the queue",
                "s",
                ("max by (gpu_model) (gpu_portal_queue_oldest_wait_seconds)", "{{gpu_model}}"),
                (
                    "max by (gpu_model) (gpu_portal_queue_within_quota_oldest_wait_seconds)",
                    "{{gpu_model}} within quota",
                ),
            )
        )
        .with_panel(
            _series(
                "Admission wait (p50, p95)",
                "s",
                (_quantile(0.5, "gpu_portal_admission_wait_seconds", "gpu_model"), "{{gpu_model}} p50"),
                (_quantile(0.95, "gpu_portal_admission_wait_seconds", "gpu_model"), "{{gpu_model}} p95"),
            )
        )
        .with_panel(
            _series(
                "Admissions, preemptions, idle reclaims, failures",
                "ops",
                (
                    "sum by (state) (rate(gpu_portal_workspace_transitions_total"
                    f'{{state=~"admitted|preempted|reclaimed|failed"}}{rate}))',
                    "{{state}}",
                ),
            )
        )
        .with_row(dashboard.Row("Allocation and activity"))
        .with_panel(
            _series(
                "GPUs per model: capacity, demand, allocated, active",
                "short",
                ("sum by (gpu_model) (gpu_portal_gpus_capacity)", "{{gpu_model}} capacity"),
                ("sum by (gpu_model) (gpu_portal_demand_gpu_equivalents)", "{{gpu_model}} demand"),
                ("sum by (gpu_model) (gpu_portal_gpus_allocated)", "{{gpu_model}} allocated"),
                ("sum by (gpu_model) (gpu_portal_gpus_active)", "{{gpu_model}} active"),
            )
        )
        .with_panel(
            _series(
                "GPU-equivalents per team: allocated, active, borrowed",
                "short",
                ("sum by (team) (gpu_portal_gpus_allocated)", "{{team}} allocated"),
                ("sum by (team) (gpu_portal_gpus_active)", "{{team}} active"),
                ("sum by (team) (gpu_portal_borrowed_gpu_equivalents)", "{{team}} borrowed"),
            )
        )
        .with_panel(
            bargauge.Panel()
            .title("Budget spent this month")
            .unit("percentunit")
            .datasource(DATASOURCE)
            .span(WIDTH)
            .height(6)
            .min(0)
            .max(1)
            .with_target(_query("gpu_portal_budget_used_ratio", "{{team}}"))
        )
        .with_row(dashboard.Row("The portal"))
        .with_panel(
            _series(
                "Loop pass duration (p95)",
                "s",
                (_quantile(0.95, "gpu_portal_loop_duration_seconds", "loop"), "{{loop}}"),
                width=8,
            )
        )
        .with_panel(
            _series(
                "Kubernetes API errors",
                "ops",
                (f"sum by (status) (rate(gpu_portal_kubernetes_api_errors_total{rate}))", "{{status}}"),
                width=8,
            )
        )
        .with_panel(
            _series(
                "Celery queue depth",
                "short",
                ("sum by (queue) (gpu_portal_celery_queue_messages)", "{{queue}}"),
                width=8,
            )
        )
    )


def _by_node(metric: str, how: str = "avg") -> str:
    # dcgm-exporter's host label was Hostname and is hostname since May 2026: fold both into "node".
    folded = (
        f'label_replace(label_replace({metric}, "node", "$1", "Hostname", "(.+)"), "node", "$1", "hostname", "(.+)")'
    )
    return f"{how} by (node) ({folded})"


def _by_pod(metric: str, how: str = "avg") -> str:
    # A ServiceMonitor without honorLabels renames the pod labels to exported_*: fold both.
    only_pods = f'{metric}{{pod!=""}} or {metric}{{exported_pod!=""}}'
    folded = (
        f'label_replace(label_replace({only_pods}, "pod", "$1", "exported_pod", "(.+)"),'
        ' "namespace", "$1", "exported_namespace", "(.+)")'
    )
    return f"{how} by (namespace, pod) ({folded})"


def fleet() -> dashboard.Dashboard:
    engine = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
    mig = _by_node(f'{engine}{{GPU_I_PROFILE!=""}}').replace("by (node)", "by (node, gpu, GPU_I_PROFILE, GPU_I_ID)")
    return (
        dashboard.Dashboard("GPU portal: GPU fleet")
        .uid("gpu-portal-fleet")
        .tags(["gpu-portal", "dcgm"])
        .refresh("1m")
        .time("now-6h", "now")
        .with_variable(_datasource_variable())
        .with_row(dashboard.Row("Per node"))
        .with_panel(
            _series(
                "Graphics engine active (all GPUs and MIG instances)", "percentunit", (_by_node(engine), "{{node}}")
            )
        )
        .with_panel(
            _series(
                "GPU utilisation (whole GPUs; not reported for MIG)",
                "percent",
                (_by_node("DCGM_FI_DEV_GPU_UTIL"), "{{node}}"),
            )
        )
        .with_panel(_series("Power", "watt", (_by_node("DCGM_FI_DEV_POWER_USAGE", "sum"), "{{node}}")))
        .with_panel(
            _series("Temperature (hottest GPU)", "celsius", (_by_node("DCGM_FI_DEV_GPU_TEMP", "max"), "{{node}}"))
        )
        .with_panel(
            _series(
                "Framebuffer used",
                "percentunit",
                (
                    _by_node("DCGM_FI_DEV_FB_USED", "sum")
                    + " / "
                    + _by_node("(DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED)", "sum"),
                    "{{node}}",
                ),
                width=WIDTH,
            )
        )
        .with_row(dashboard.Row("Per MIG instance"))
        .with_panel(
            _series(
                "Graphics engine active per MIG instance",
                "percentunit",
                (mig, "{{node}} GPU {{gpu}} {{GPU_I_PROFILE}} #{{GPU_I_ID}}"),
                width=WIDTH,
            )
        )
        .with_row(dashboard.Row("Per pod"))
        .with_panel(
            _series("Graphics engine active per pod", "percentunit", (_by_pod(engine), "{{namespace}}/{{pod}}"))
        )
        .with_panel(
            _series(
                "Framebuffer used per pod",
                "decmbytes",
                (_by_pod("DCGM_FI_DEV_FB_USED", "sum"), "{{namespace}}/{{pod}}"),
            )
        )
    )


BOARDS = {"gpu-portal-overview.json": overview, "gpu-fleet.json": fleet}


def render(build: str) -> str:
    board = json.loads(JSONEncoder(sort_keys=True, indent=2).encode(BOARDS[build]().build()))
    for number, panel in enumerate(board["panels"], 1):  # the builders leave rows at 0 and panels without
        panel["id"] = number
    return json.dumps(board, sort_keys=True, indent=2) + "\n"


def main() -> int:
    for name in BOARDS:
        (HERE / name).write_text(render(name))
        print(f"wrote {HERE / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
