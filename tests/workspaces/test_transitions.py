"""Reasons and their timeline events."""

from __future__ import annotations

from typing import Any

from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import Workspace, WorkspaceEvent
from workspaces.transitions import Move, set_reason, set_reasons, transition_many


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


def test_many_moves_take_a_fixed_number_of_statements_and_skip_what_another_writer_moved(
    org: Org, django_assert_max_num_queries: Any
) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    queued = [make_workspace(org, h100, 1, name=f"q{i}") for i in range(30)]
    Workspace.objects.filter(pk=queued[3].pk).update(state="cancelled")  # its owner was first
    moves = [
        Move(w, f"Admitted {i}.", {"pinned_node": f"node-{i}", "borrowing": i % 2 == 0}) for i, w in enumerate(queued)
    ]
    with django_assert_max_num_queries(4):  # lock, update, insert events (and a savepoint at most)
        moved = transition_many(moves, "admitted", expected=["queued"], source="scheduler")
    assert [w.pk for w in moved] == [w.pk for i, w in enumerate(queued) if i != 3]
    rows = {w.pk: w for w in Workspace.objects.filter(pk__in=[w.pk for w in queued])}
    assert rows[queued[3].pk].state == "cancelled" and rows[queued[3].pk].reason == ""
    for i, workspace in enumerate(queued):
        if i == 3:
            continue
        row = rows[workspace.pk]
        assert (row.state, row.reason, row.pinned_node, row.borrowing) == (
            "admitted",
            f"Admitted {i}.",
            f"node-{i}",
            i % 2 == 0,
        )
        assert row.admitted_at is not None
    events = WorkspaceEvent.objects.filter(workspace__in=queued, to_state="admitted")
    assert sorted(events.values_list("workspace", flat=True)) == sorted(w.pk for w in moved)


def test_many_reasons_log_only_a_changed_gist_and_leave_moved_rows_alone(
    org: Org, django_assert_max_num_queries: Any
) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    same, numbers, gist, gone = (make_workspace(org, h100, 1, name=n) for n in ("same", "numbers", "gist", "gone"))
    for workspace in (same, numbers, gist, gone):
        set_reason(workspace, "Waiting for team quota: Alpha uses 3 of its 4.", source="scheduler")
    Workspace.objects.filter(pk=gone.pk).update(state="cancelled")
    logged_before = WorkspaceEvent.objects.count()
    changes = [
        (same, "Waiting for team quota: Alpha uses 3 of its 4."),
        (numbers, "Waiting for team quota: Alpha uses 4 of its 4."),
        (gist, "Waiting for a free NVIDIA H100: 0/7 nodes are available."),
        (gone, "Waiting for a free NVIDIA H100: 0/7 nodes are available."),
    ]
    with django_assert_max_num_queries(4):
        set_reasons(changes, source="scheduler")
    reasons = dict(Workspace.objects.values_list("pk", "reason"))
    assert reasons[numbers.pk] == changes[1][1] and reasons[gist.pk] == changes[2][1]
    assert reasons[gone.pk] == "Waiting for team quota: Alpha uses 3 of its 4."  # moved meanwhile: untouched
    new = WorkspaceEvent.objects.order_by("pk")[logged_before:]
    assert [(e.workspace_id, e.reason) for e in new] == [(gist.pk, changes[2][1])]
