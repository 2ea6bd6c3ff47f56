"""The Grafana dashboards: the files are deploy/grafana/build.py's output, load back through the Foundation
SDK's models (Grafana's own schema, as code), and name only metrics that exist: the portal's families and
the dcgm-exporter series the simulated cluster serves as real exporters do (GPU-ON-KUBERNETES.md)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard

from portal.metrics.exposition import FAMILIES
from scheduling.simcluster import telemetry as simulated_dcgm

ROOT = Path(__file__).resolve().parents[3]
GRAFANA = ROOT / "deploy/grafana"


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grafana_build", GRAFANA / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exported() -> set[str]:
    names = set()
    for name, kind in FAMILIES.items():
        suffixes = {"histogram": ("_bucket", "_sum", "_count"), "counter": ("_total",)}.get(kind, ("",))
        names |= {name + suffix for suffix in suffixes}
    names |= set(re.findall(r"DCGM_FI_[A-Z_]+", Path(simulated_dcgm.__file__).read_text()))
    return names


@pytest.mark.parametrize("name", ["gpu-portal-overview.json", "gpu-fleet.json"])
def test_each_dashboard_is_the_builders_output_and_loads_as_grafana_json(name: str) -> None:
    assert (GRAFANA / name).read_text() == _builder().render(name), "run .venv/bin/python deploy/grafana/build.py"
    register_default_plugins()
    data = json.loads((GRAFANA / name).read_text())
    board = Dashboard.from_json(data)
    assert board.title and board.uid and board.panels
    ids = [panel["id"] for panel in data["panels"]]
    assert len(ids) == len(set(ids))
    queries = [t for panel in board.panels for t in (getattr(panel, "targets", None) or [])]
    assert queries and all(q.expr for q in queries)


@pytest.mark.parametrize("name", ["gpu-portal-overview.json", "gpu-fleet.json"])
def test_dashboards_name_only_metrics_that_exist(name: str) -> None:
    panels = json.loads((GRAFANA / name).read_text())["panels"]
    exprs = [target["expr"] for panel in panels for target in panel.get("targets", [])]
    used = {m for expr in exprs for m in re.findall(r"\b(?:gpu_portal_[a-z_]+|DCGM_FI_[A-Z_]+)", expr)}
    assert used, name
    assert used <= _exported(), used - _exported()


def test_the_overview_shows_every_portal_family_but_the_loop_failures() -> None:
    text = (GRAFANA / "gpu-portal-overview.json").read_text()
    missing = {name for name in FAMILIES if name not in text} - {
        "gpu_portal_loop_failures",
        "gpu_portal_loop_last_success_timestamp_seconds",  # alert material, not a chart
        "gpu_portal_gpus_measured",
    }
    assert not missing
