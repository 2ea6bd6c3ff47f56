"""Fair share from decayed usage that is kept between scheduling cycles."""

from __future__ import annotations

import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from scheduling.engine.quota import Kind, Workload
from scheduling.kube.client import kube
from scheduling.loops import cycle
from scheduling.models import DecayedUsage, TeamQuota
from scheduling.quota import fair_share as decayed_usage
from tests import factories
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import Workspace

H100 = "H100-80GB-HBM3"


def held(team: str, units: int) -> Workload:
    return Workload(f"{team}-w", team, H100, units, 0, Kind.BATCH, 0.0, 0.0)


def test_usage_decays_by_half_each_half_life_and_is_kept(org: Org, settings: Any) -> None:
    settings.FAIR_SHARE_HALF_LIFE_SECONDS = 3600
    start = timezone.now()
    # No history yet: the average starts from nothing, whatever is held at this instant.
    assert decayed_usage.advance([held("alpha", 2000)], start) == {("alpha", H100): 0.0}
    hour = timedelta(hours=1)
    assert decayed_usage.advance([held("alpha", 2000)], start + hour) == {("alpha", H100): 1000.0}
    assert decayed_usage.advance([], start + 2 * hour) == {("alpha", H100): 500.0}
    row = DecayedUsage.objects.get(team=org.alpha, flavour=H100)
    assert (row.usage, row.updated_at) == (500.0, start + 2 * hour)
    assert decayed_usage.advance([held("beta", 1000)], start + 3 * hour) == {
        ("alpha", H100): 250.0,
        ("beta", H100): 0.0,
    }
    assert DecayedUsage.objects.count() == 2


@pytest.mark.parametrize(("heavy", "first"), [("alpha", "beta"), ("beta", "alpha")])
def test_the_cycle_serves_the_team_that_used_less_lately_first(
    org: Org, cluster_client: None, heavy: str, first: str
) -> None:
    # One idle H100 of a third team to borrow; alpha and beta may each borrow one and both ask.
    gamma = factories.make_team(org.alpha.department, name="Gamma", slug="gamma")
    TeamQuota.objects.create(team=gamma, flavour=H100, guaranteed=Decimal(1))
    for team in (org.alpha, org.beta):
        TeamQuota.objects.create(team=team, flavour=H100, guaranteed=Decimal(0), borrow_limit=Decimal(1))
    teams = {"alpha": org.alpha, "beta": org.beta}
    DecayedUsage.objects.create(team=teams[heavy], flavour=H100, usage=4000.0, updated_at=timezone.now())
    offering = install_offerings()["h100-80gb-hbm3"]
    # alpha asked first: by age alone it would go first.
    asked = {
        name: make_workspace(org, offering, 1, team=teams[name], kind="job", name=f"{name}-job")
        for name in ("alpha", "beta")
    }
    _one_cycle()
    states = {name: Workspace.objects.get(pk=w.pk).state for name, w in asked.items()}
    assert states[first] == "admitted"
    assert states[heavy] == "queued"
    assert Workspace.objects.get(pk=asked[first].pk).borrowing is True


def _one_cycle() -> None:
    """One cycle of our own: run_cycle skips (and only asks for another) while some other process of the
    test run holds the cycle's lock for a moment, which left both requests queued once in CI."""
    deadline = time.monotonic() + 20
    while cycle._try_cycle(kube()) is None:
        assert time.monotonic() < deadline, "the scheduling cycle's lock stayed taken for 20 s"
        time.sleep(0.2)
