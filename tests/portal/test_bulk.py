"""Set-based updates of many rows, each to its own values (portal/bulk.py), on the test database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from portal.bulk import update_rows
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.scheduling.test_admission import make_workspace
from workspaces.models import Workspace


def test_each_row_gets_its_own_values_nulls_and_times_included(org: Org, django_assert_num_queries: object) -> None:
    h100 = install_offerings()["h100-80gb-hbm3"]
    rows = [make_workspace(org, h100, 1, name=f"w{i}") for i in range(3)]
    untouched = make_workspace(org, h100, 1, name="other", reason="as it was")
    start = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)
    for i, workspace in enumerate(rows):
        workspace.reason = f"reason {i}, with 'quotes'"
        workspace.preempt_at = None if i == 1 else start + timedelta(hours=i)
        workspace.borrowing = i == 2
        workspace.gpu_count = 10 + i
    with django_assert_num_queries(1):  # type: ignore[operator]
        assert update_rows(rows, ["reason", "preempt_at", "borrowing", "gpu_count"]) == 3
    stored = {w.pk: w for w in Workspace.objects.all()}
    for i, workspace in enumerate(rows):
        row = stored[workspace.pk]
        assert row.reason == f"reason {i}, with 'quotes'"
        assert row.preempt_at == (None if i == 1 else start + timedelta(hours=i))
        assert (row.borrowing, row.gpu_count) == (i == 2, 10 + i)
    assert stored[untouched.pk].reason == "as it was"


def test_only_columns_can_be_written(org: Org) -> None:
    workspace = make_workspace(org, install_offerings()["h100-80gb-hbm3"], 1)
    with pytest.raises(ValueError, match="events"):
        update_rows([workspace], ["events"])
    assert update_rows([], ["reason"]) == 0
