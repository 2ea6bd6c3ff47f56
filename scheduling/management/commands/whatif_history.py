"""Replay the portal's request history on the cluster as it is, or as it might be.

python manage.py whatif_history --days 30
python manage.py whatif_history --add 2x8xH100-80GB-HBM3 --mig node=gpu-h100-1,config=all-1g.10gb
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduling.engine import gpus
from scheduling.engine.policies import POLICIES, make_policy
from scheduling.kube.client import kube
from scheduling.planning import history, whatif
from workspaces.models import Workspace


class Command(BaseCommand):
    help = "Replay the last days of workspace requests on the live cluster, changed as described."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--days", type=int, default=30, help="How far back to take requests (default 30).")
        parser.add_argument("--add", action="append", default=[], help="COUNTxGPUSxMODEL[,cpu=MILLI][,mem=MIB]")
        parser.add_argument("--remove", action="append", default=[], help="Node name to take out.")
        parser.add_argument("--mig", action="append", default=[], help="node=NAME,config=CONFIG")
        parser.add_argument("--policy", default="ours", choices=sorted(POLICIES))

    def handle(self, *args: Any, **options: Any) -> None:
        if options["days"] < 1:
            raise CommandError("--days must be at least 1.")
        now = timezone.now()
        requests = Workspace.objects.filter(created_at__gte=now - timedelta(days=options["days"]))
        rows = history.pod_rows(requests.select_related("offering"), now)
        if not rows:
            raise CommandError(f"No workspace requests in the last {options['days']} days to replay.")
        nodes, mig = history.node_rows(kube().list("Node", None, ""))
        nodes = [n for n in nodes if n.name not in set(options["remove"])]
        try:
            for spec in options["add"]:
                nodes.extend(whatif.parse_add(spec))
            mig.update(whatif.parse_mig(spec) for spec in options["mig"])
            mig = {name: config for name, config in mig.items() if name in {n.name for n in nodes}}
            state, pool = whatif.build_cluster(nodes, mig)
        except (ValueError, KeyError, gpus.MigError, gpus.UnknownGpuModel) as exc:
            raise CommandError(f"Cannot build that cluster: {exc}") from exc
        policy = make_policy(options["policy"], [r.shape for r in rows], np.random.default_rng(0))
        self.stdout.write(f"{len(rows)} pods from {requests.count()} requests of the last {options['days']} days")
        self.stdout.write(whatif.report_timed(state, whatif.replay_timed(state, pool, rows, policy)))
