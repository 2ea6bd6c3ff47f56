"""The alert rules: the files in deploy/ are the default thresholds' rendering, promtool accepts them, and
promtool's unit tests prove each alert fires and resolves (deploy/prometheus/tests/)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from portal.management.commands.alert_rules import render
from portal.metrics.exposition import FAMILIES
from portal.metrics.rules import Thresholds, groups

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy/prometheus/gpu-portal-rules.yaml"
OPERATOR = ROOT / "deploy/base/prometheusrule.yaml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if not Path(PROMTOOL).exists():
        pytest.fail("promtool is missing: apt-get install prometheus (.ci/run installs it)")
    return subprocess.run([PROMTOOL, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def test_the_files_are_the_default_thresholds_rendered(settings: Any) -> None:
    assert Thresholds.from_settings(settings) == Thresholds()
    assert RULES.read_text() == render("prometheus", Thresholds())
    assert OPERATOR.read_text() == render("operator", Thresholds())
    operator = yaml.safe_load(OPERATOR.read_text())
    assert operator["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]


def test_a_threshold_setting_reaches_the_rule(settings: Any) -> None:
    settings.ALERT_WITHIN_QUOTA_WAIT_MINUTES = 45
    rendered = yaml.safe_load(render("prometheus", Thresholds.from_settings(settings)))
    rule = next(r for g in rendered["groups"] for r in g["rules"] if r["alert"] == "GpuPortalWaitingWithinQuota")
    assert rule["expr"].endswith("> 2700")


def test_promtool_checks_the_rules() -> None:
    checked = _promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 7 rules found" in checked.stdout


def test_promtool_unit_tests_fire_and_resolve_every_alert() -> None:
    tests = ROOT / "deploy/prometheus/tests/gpu-portal-rules.test.yaml"
    tested = {t["alertname"] for case in yaml.safe_load(tests.read_text())["tests"] for t in case["alert_rule_test"]}
    assert tested == {r["alert"] for g in groups(Thresholds()) for r in g["rules"]}
    ran = _promtool("test", "rules", str(tests))
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_rules_read_only_metrics_the_portal_exports() -> None:
    exported = set()
    for name, kind in FAMILIES.items():
        if kind == "histogram":
            exported |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif kind == "counter":
            exported.add(f"{name}_total")
        else:
            exported.add(name)
    for group in groups(Thresholds()):
        for rule in group["rules"]:
            used = set(re.findall(r"\bgpu_portal_[a-z_]+", rule["expr"]))
            assert used and used <= exported, (rule["alert"], used - exported)
