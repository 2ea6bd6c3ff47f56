from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from scheduling.discovery import propose_offerings
from scheduling.kube.calls import PermanentKubeError
from scheduling.kube.client import kube
from workspaces.models import GpuOffering


class Command(BaseCommand):
    help = "Read the cluster's nodes and propose GPU offerings; --apply creates or updates them."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--apply", action="store_true", help="Write the proposals (default: print only).")

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = kube()
        try:
            slices = cluster.list("ResourceSlice", None, "")
        except PermanentKubeError as exc:
            if exc.status != 404:
                raise
            slices = []  # a cluster without DRA (before Kubernetes 1.34, or with it turned off)
        proposals = propose_offerings(cluster.list("Node", None, ""), slices)
        with transaction.atomic():
            for proposal in proposals:
                fields = asdict(proposal)
                nodes = fields.pop("nodes")
                slug = fields.pop("slug")
                verb = "proposed"
                if options["apply"]:
                    _, created = GpuOffering.objects.update_or_create(slug=slug, defaults=fields)
                    verb = "created" if created else "updated"
                self.stdout.write(
                    f"{verb:>8} {slug:<28} {proposal.resource_name or '-':<28} "
                    f"x{proposal.gpu_equivalents.normalize():f} on {', '.join(nodes)}"
                )
