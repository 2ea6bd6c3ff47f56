"""The rows the scheduling cycle keeps between cycles (scheduling/loops/cycle_rows.py): an instance is
reused only while its row is unchanged, whoever changed it."""

from __future__ import annotations

from scheduling.loops.cycle_rows import CycleRows, shape_of
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import GpuOffering, Workspace

ACTIVE = ["admitted", "running"]


def load(rows: CycleRows, per_shape: int = 20) -> list[Workspace]:
    """Every row a cycle reads: active ones, the queue's heads and its unseen rows."""
    loaded = rows.load(ACTIVE, per_shape)
    return [*loaded.active, *loaded.queued, *loaded.unseen]


def test_unchanged_rows_keep_their_instance_and_changed_ones_are_read_again(org: Org) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    a, b, c = (make_workspace(org, h100, 1, name=n) for n in "abc")
    rows = CycleRows()
    first = {w.pk: w for w in load(rows)}
    assert set(first) == {a.pk, b.pk, c.pk} and rows.built == 3
    workload = rows.workload(first[a.pk])

    Workspace.objects.filter(pk=b.pk).update(reason="Waiting for team quota: ...")  # another writer
    first[c.pk].state = "admitted"  # changed in memory by a cycle whose transaction then rolled back
    Workspace.objects.filter(pk=a.pk).update(state="cancelled")  # left the states read
    again = {w.pk: w for w in load(rows)}
    assert set(again) == {b.pk, c.pk}
    assert again[b.pk] is not first[b.pk] and again[b.pk].reason == "Waiting for team quota: ..."
    assert again[c.pk] is not first[c.pk] and again[c.pk].state == "queued"  # the database's, not memory's
    assert rows.built == 5
    assert load(rows)[0] is again[b.pk]  # nothing changed: nothing built
    assert rows.built == 5

    workspace = again[b.pk]
    assert rows.workload(workspace) is rows.workload(workspace)
    workspace.borrowing = True
    assert rows.workload(workspace).borrowing is True  # computed again for the changed values
    assert workload.id == str(a.pk)


def test_a_changed_offering_or_team_renews_every_instance(org: Org) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    make_workspace(org, h100, 1)
    rows = CycleRows()
    (before,) = load(rows)
    assert before.offering.display_name == h100.display_name
    GpuOffering.objects.filter(pk=h100.pk).update(display_name="H100, renamed")
    (after,) = load(rows)
    assert after is not before and after.offering.display_name == "H100, renamed"
    org.alpha.name = "Alpha renamed"
    org.alpha.save()
    (last,) = load(rows)
    assert last is not after and last.team.name == "Alpha renamed"


def test_only_the_oldest_of_each_shape_are_read_and_the_unseen_rest_once(org: Org) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    ones = [make_workspace(org, h100, 1, name=f"one-{i}") for i in range(5)]
    twos = [make_workspace(org, h100, 2, name=f"two-{i}") for i in range(2)]
    running = make_workspace(org, h100, 1, name="running", state="running")
    Workspace.objects.filter(state="queued").update(reason=Workspace.FIRST_REASON)  # as requests are made
    rows = CycleRows()
    loaded = rows.load(ACTIVE, 2)
    assert loaded.active == [running]
    assert [w.name for w in loaded.queued] == ["one-0", "one-1", "two-0", "two-1"]  # oldest first
    assert [w.name for w in loaded.unseen] == ["one-2", "one-3", "one-4"]  # still with their first reason
    assert loaded.cut == {shape_of(ones[0])}  # one shape has more waiting than was read; the other not
    assert shape_of(ones[0]) != shape_of(twos[0])

    Workspace.objects.filter(pk__in=[w.pk for w in ones[2:]]).update(reason="Waiting in line: ...")
    loaded = rows.load(ACTIVE, 2)
    assert loaded.unseen == []  # given a reason: read again only when it nears the front
    Workspace.objects.filter(pk=ones[0].pk).update(state="admitted")
    loaded = rows.load(ACTIVE, 2)
    assert [w.name for w in loaded.queued] == ["one-1", "one-2", "two-0", "two-1"]
