"""The queue page explains itself: position, reason, estimated start and what would start now."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from portal.demo import PEOPLE, seed_demo_organisation
from portal.models import Team, User
from scheduling.demo import seed_demo_catalogue
from scheduling.kube.client import reset_client
from scheduling.simcluster.testing import SimCluster
from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings, set_quota
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_queue_page_shows_position_reason_estimate_and_alternatives(
    page: Page, live_server, stack_cluster: SimCluster, settings, quiet_cluster_loops: None
) -> None:
    settings.KUBECONFIG = str(stack_cluster.kubeconfig_path)
    reset_client()
    seed_demo_organisation()
    seed_demo_catalogue()
    offerings = install_offerings()
    vision = Team.objects.get(slug="vision")
    alice = User.objects.get(username="alice")
    set_quota(vision, "H100-80GB-HBM3", 1)
    h100 = offerings["h100-80gb-hbm3"]
    common = {"kind": "notebook", "team": vision, "owner": alice, "offering": h100, "gpu_count": 1, "image": "x/y:1",
              "cpu_millis": 1000, "memory_mib": 1024, "gpu_equivalents": Decimal(1)}  # fmt: skip
    started = timezone.now() - timedelta(hours=1)
    Workspace.objects.create(name="running", state="running", started_at=started, max_runtime_seconds=3 * 3600,
                             **common)  # fmt: skip
    reason = (
        "Waiting for team quota: Vision uses 1 of its 1 guaranteed H100-80GB-HBM3 GPU-equivalents and this needs 1."
    )
    first = Workspace.objects.create(name="first", reason=reason, max_runtime_seconds=3600, **common)
    Workspace.objects.create(name="second", reason=reason, max_runtime_seconds=3600, **common)

    log_in(page, live_server.url, "alice", next(p.password for p in PEOPLE if p.username == "alice"))
    page.click("[data-nav=queue]")
    row = page.locator(f"#queue tr[data-id='{first.pk}']")
    expect(row.locator(".position")).to_have_text("1 of 2")
    expect(row.locator(".reason")).to_have_text(reason)
    expected = (started + timedelta(hours=3)).astimezone(timezone.get_current_timezone())
    expect(row.locator(".estimate")).to_contain_text(expected.strftime("%Y-%m-%d %H:%M"))
    expect(row.locator(".alternatives")).to_contain_text("NVIDIA A100-SXM4-80GB MIG 1g.10gb is free now")
    expect(page.locator("#queue tbody tr")).to_have_count(2)
    reset_client()
