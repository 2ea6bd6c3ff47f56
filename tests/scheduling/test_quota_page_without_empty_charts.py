"""The team quota page charts only GPU models with something to show: no empty "CPU" chart, and a plain
sentence when there is nothing to chart at all."""

from __future__ import annotations

from decimal import Decimal

from django.test import Client

from tests import factories
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_team_quota_page import H100, figures, hold, quota
from workspaces.models import GpuOffering


def cpu_offering() -> GpuOffering:
    return GpuOffering.objects.create(
        slug="cpu-small", display_name="CPU only", kind=GpuOffering.Kind.CPU, gpu_equivalents=Decimal(0),
        allowed_counts=[0],
    )  # fmt: skip


def test_cpu_work_gets_no_chart(org: Org) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    quota(org.alpha, H100, 2)
    hold(org.alpha, org.member, h100, "1")
    hold(org.alpha, org.member, cpu_offering(), "0")
    client = Client()
    client.force_login(org.member)
    html = client.get(f"/teams/{org.alpha.pk}/quota/").content.decode()
    assert "<td>CPU</td>" in html  # the table still lists the CPU row
    titles = [figure["layout"]["title"]["text"] for figure in figures(html)]
    assert titles == [f"{H100}: GPU-equivalents"]


def test_a_team_with_nothing_to_chart_reads_a_sentence(org: Org) -> None:
    team = factories.make_team(org.alpha.department, name="Empty", slug="empty")
    factories.add_member(team, org.member)
    hold(team, org.member, cpu_offering(), "0")
    client = Client()
    client.force_login(org.member)
    html = client.get(f"/teams/{team.pk}/quota/").content.decode()
    assert figures(html) == []
    assert 'id="quota-charts"' not in html
    assert "nothing to chart" in html
