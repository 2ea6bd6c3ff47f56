"""A request that cannot start does not hold back the ones that can, and waiting reasons describe the state
the cycle ended in, not what it had planned for requests it then could not admit."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling.kube.client import kube
from scheduling.loops.cycle import run_cycle
from scheduling.models import MemberCap
from tests.catalogue import install_offerings, set_quota
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import GpuOffering, Workspace

H100 = "H100-80GB-HBM3"  # the demo cluster has 16: two nodes of 8


@pytest.fixture
def h100(org: Org) -> GpuOffering:
    set_quota(org.alpha, H100, 16)
    return install_offerings()["h100-80gb-hbm3"]


def state(workspace: Workspace) -> tuple[str, str]:
    workspace.refresh_from_db()
    return workspace.state, workspace.reason


def test_a_request_over_its_members_cap_does_not_block_the_teams_later_requests(
    org: Org, cluster_client: None, h100: GpuOffering
) -> None:
    running = make_workspace(org, h100, 1, name="running", owner=org.lead, state="admitted")
    # The cap was lowered after this was asked for: it cannot start until the lead raises it again.
    MemberCap.objects.create(team=org.alpha, user=org.member, flavour=H100, cap=Decimal(2))
    capped = make_workspace(org, h100, 4, name="capped")
    eight, four, another = (make_workspace(org, h100, n, name=f"lead{n}", owner=org.lead) for n in (8, 4, 8))

    assert run_cycle(kube()) == 2

    assert state(capped) == (
        "queued",
        "Waiting for your share: your lead caps you at 2 H100-80GB-HBM3 GPU-equivalents, you use 0 and this needs 4.",
    )
    assert state(eight)[0] == state(four)[0] == "admitted"
    assert running.pk and state(another)[0] == "queued"
    # The message counts what is held (13 of 16), not the capped request's 4 on top (17).
    assert state(another) == (
        "queued",
        "Waiting for team quota: Alpha uses 13 of its 16 guaranteed H100-80GB-HBM3 GPU-equivalents and this needs 8.",
    )


def test_a_members_second_request_over_the_cap_does_not_take_room_from_others(
    org: Org, cluster_client: None, h100: GpuOffering
) -> None:
    MemberCap.objects.create(team=org.alpha, user=org.member, flavour=H100, cap=Decimal(2))
    first, second = (make_workspace(org, h100, 2, name=f"mine{i}") for i in range(2))
    lead = make_workspace(org, h100, 8, name="lead8", owner=org.lead)
    lead_too = make_workspace(org, h100, 6, name="lead6", owner=org.lead)

    assert run_cycle(kube()) == 3

    assert state(first)[0] == "admitted"
    assert state(second) == (
        "queued",
        "Waiting for your share: your lead caps you at 2 H100-80GB-HBM3 GPU-equivalents, you use 2 and this needs 2.",
    )
    assert state(lead)[0] == state(lead_too)[0] == "admitted"
