"""The chargeback benchmark (``manage.py bench_chargeback``) at a tiny size: it prints its figures, counts
the same queries for the smaller organisation, and leaves nothing behind. No timing is asserted."""

from __future__ import annotations

import io
import re
from datetime import date

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from portal.billing.models import CapacityInterval, ClosedMonth, RateCardEntry, UsageInterval
from portal.models import Department, Membership, Team, User
from workspaces.models import GpuOffering, Workspace

TINY = ["--workspaces", "300", "--concurrent", "20", "--nodes", "10", "--teams", "5", "--repeats", "1"]
MODELS = (UsageInterval, CapacityInterval, RateCardEntry, Workspace, GpuOffering, Team, Department, User, Membership)


def counts() -> dict[str, int]:
    """Rows of every table the benchmark writes; of the ledger, only its months' (January 2026 and the ones
    before): a session worker of the full-stack tests records the real month's fleet meanwhile."""
    found = {model.__name__: model.objects.count() for model in MODELS}
    for ledger in (UsageInterval, CapacityInterval):
        found[ledger.__name__] = ledger.objects.filter(period__lt=date(2026, 2, 1)).count()
    return found


def bench(*extra: str) -> str:
    out = io.StringIO()
    call_command("bench_chargeback", *TINY, *extra, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_a_tiny_run_prints_the_figures_and_rolls_everything_back() -> None:
    before = counts()
    out = bench()

    assert "chargeback of January 2026" in out
    assert "10 nodes (80 GPUs" in out
    assert "1 departments, 5 teams, 25 users" in out
    generated = re.search(r"300 workspaces, (\d+) usage rows", out)
    assert generated is not None and int(generated[1]) >= 300  # a row per pod and run piece
    for label, lines in (("team, showback", 5), ("cost centre, full + spread", 1), ("user, showback", None)):
        row = re.search(rf"^  {re.escape(label)} +(\d+) +(\S+) +(\S+) +(\S+) +(\d+)(.*)$", out, re.MULTILINE)
        assert row is not None, label
        if lines is not None:
            assert int(row[1]) == lines
        assert float(row[2]) > 0  # build seconds
        queries = int(row[5])
        assert 1 <= queries <= 10  # a handful of set-based queries, not one per team
        exports = row[6].split()
        assert len(exports) == 7  # csv, xlsx, pdf: seconds and kB, then the smaller organisation's count
        assert all(float(figure) > 0 for figure in exports[1:6:2])  # every file has bytes
        assert int(exports[6]) == queries  # the same queries at 1 team as at 5
    for label in ("chargeback page (HTML)", "download csv", "download xlsx", "download pdf"):
        assert re.search(rf"^  {re.escape(label)} +\S+ +\d+ +\S+ +\d+$", out, re.MULTILINE), label
    assert "build queries the same at 1 and 5 teams" in out
    assert "slowest render" in out and "slowest build + export" in out

    assert counts() == before  # rolled back: not a row left


@pytest.mark.django_db
def test_keep_commits_the_generated_month() -> None:
    bench("--keep")
    assert Workspace.objects.filter(name__startswith="cb-").count() == 300
    assert UsageInterval.objects.filter(period=date(2026, 1, 1)).count() >= 300
    assert Team.objects.filter(slug__startswith="cb-").count() == 5
    # A second run would mix its rows with these: it refuses.
    with pytest.raises(CommandError, match="already has ledger rows"):
        bench()


@pytest.mark.django_db
def test_history_copies_the_month_into_the_months_before_on_postgresql() -> None:
    before = counts()
    if connection.vendor != "postgresql":
        with pytest.raises(CommandError, match="needs PostgreSQL"):
            bench("--history", "2")
    else:
        out = bench("--history", "2")
        generated = re.search(r"300 workspaces, (\d+) usage rows", out)
        assert generated is not None
        assert f"history: {2 * int(generated[1])} usage rows copied into the 2 months before" in out
    assert counts() == before


@pytest.mark.django_db
def test_it_refuses_a_closed_month() -> None:
    ClosedMonth.objects.create(period=date(2026, 1, 1), closed_at=timezone.now(), data={})
    with pytest.raises(CommandError, match="closed"):
        bench()
    with pytest.raises(CommandError, match="not a month"):
        bench("--month", "2026-13")
    assert not Workspace.objects.exists()
