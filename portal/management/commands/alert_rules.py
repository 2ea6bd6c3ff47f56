"""Print the portal's alert rules with this deployment's thresholds (the ``ALERT_*`` settings).

python manage.py alert_rules                       # a Prometheus rules file
python manage.py alert_rules --format operator     # a PrometheusRule for the Prometheus Operator
"""

from __future__ import annotations

from typing import Any

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from portal.metrics.rules import Thresholds, prometheus_rule, rules_file

HEADER = "# Rendered by `python manage.py alert_rules{flag}` from the ALERT_* settings (docs/metrics.md).\n"


def render(fmt: str, thresholds: Thresholds) -> str:
    document = prometheus_rule(thresholds) if fmt == "operator" else rules_file(thresholds)
    flag = " --format operator" if fmt == "operator" else ""
    return HEADER.format(flag=flag) + yaml.safe_dump(document, sort_keys=False, width=120)


class Command(BaseCommand):
    help = "Print the alert rules (Prometheus rules file or PrometheusRule) with the configured thresholds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=("prometheus", "operator"), default="prometheus")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(render(options["format"], Thresholds.from_settings(settings)), ending="")
