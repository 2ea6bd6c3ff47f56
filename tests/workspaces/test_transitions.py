"""Reasons and their timeline events."""

from __future__ import annotations

from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.transitions import set_reason


def test_the_timeline_logs_a_new_reason_not_every_change_of_its_numbers(org: Org) -> None:
    workspace = make_workspace(org, install_offerings()["h100-80gb-hbm3"], 2)
    reasons = [
        "Waiting for team quota: Alpha uses 3 of its 4 guaranteed GPU-equivalents and this needs 2.",
        "Waiting for team quota: Alpha uses 4 of its 4 guaranteed GPU-equivalents and this needs 2.",
        "Waiting for a free NVIDIA H100: 0/7 nodes are available: 2 Insufficient nvidia.com/gpu.",
        "Waiting for a free NVIDIA H100: 0/7 nodes are available: 1 Insufficient nvidia.com/gpu.",
        "Waiting for team quota: Alpha uses 3 of its 4 guaranteed GPU-equivalents and this needs 2.",
    ]
    for reason in reasons:
        set_reason(workspace, reason, source="scheduler")
        workspace.refresh_from_db()
        assert workspace.reason == reason  # the page always shows the latest numbers
    logged = list(workspace.events.filter(source="scheduler").order_by("pk").values_list("reason", flat=True))
    assert logged == [reasons[0], reasons[2], reasons[4]]
