"""The rows the scheduling cycle keeps between cycles (scheduling/loops/cycle_rows.py): an instance is
reused only while its row is unchanged, whoever changed it."""

from __future__ import annotations

from scheduling.loops.cycle_rows import CycleRows
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import GpuOffering, Workspace

STATES = ["queued", "admitted", "running"]


def test_unchanged_rows_keep_their_instance_and_changed_ones_are_read_again(org: Org) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    a, b, c = (make_workspace(org, h100, 1, name=n) for n in "abc")
    rows = CycleRows()
    first = {w.pk: w for w in rows.load(STATES)}
    assert set(first) == {a.pk, b.pk, c.pk} and rows.built == 3
    workload = rows.workload(first[a.pk])

    Workspace.objects.filter(pk=b.pk).update(reason="Waiting for team quota: ...")  # another writer
    first[c.pk].state = "admitted"  # changed in memory by a cycle whose transaction then rolled back
    Workspace.objects.filter(pk=a.pk).update(state="cancelled")  # left the states read
    again = {w.pk: w for w in rows.load(STATES)}
    assert set(again) == {b.pk, c.pk}
    assert again[b.pk] is not first[b.pk] and again[b.pk].reason == "Waiting for team quota: ..."
    assert again[c.pk] is not first[c.pk] and again[c.pk].state == "queued"  # the database's, not memory's
    assert rows.built == 5
    assert rows.load(STATES)[0] is again[b.pk]  # nothing changed: nothing built
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
    (before,) = rows.load(STATES)
    assert before.offering.display_name == h100.display_name
    GpuOffering.objects.filter(pk=h100.pk).update(display_name="H100, renamed")
    (after,) = rows.load(STATES)
    assert after is not before and after.offering.display_name == "H100, renamed"
    org.alpha.name = "Alpha renamed"
    org.alpha.save()
    (last,) = rows.load(STATES)
    assert last is not after and last.team.name == "Alpha renamed"
