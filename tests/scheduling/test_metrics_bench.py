"""The /metrics benchmark (``manage.py bench_metrics``) at a tiny size: it prints its figures, the page it
renders has the series the scenario made (the queue, the requests within quota, the admissions counted from
the log, before and after new events), and it leaves nothing behind. No timing is asserted."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from portal.billing.models import Budget, CapacityInterval, RateCardEntry, UsageInterval
from portal.metrics import events
from portal.models import Department, Membership, Team, User
from scheduling.models import ActivitySample, TeamQuota
from tests.catalogue import install_offerings
from tests.factories import make_department, make_team, make_user, make_workspace
from workspaces.models import GpuOffering, Workspace, WorkspaceEvent

TINY = ["--nodes", "10", "--teams", "5", "--queued", "40", "--running", "20", "--events", "1500"]
TINY += ["--added", "25", "--repeats", "2"]
MODELS = (Workspace, WorkspaceEvent, ActivitySample, TeamQuota, Budget, GpuOffering, Team, Department, User, Membership)

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the benchmark needs PostgreSQL")


def counts() -> dict[str, int]:
    """Rows of every table the benchmark writes. Of the ledger, only the benchmark's own rows (pods mx-...,
    the open fleet, its rate card's prices): a session worker of the full-stack tests records the real
    month's ledger meanwhile. LoopStat is left out: that worker's loops write it too."""
    found = {model.__name__: model.objects.count() for model in MODELS}
    found["UsageInterval"] = UsageInterval.objects.filter(pod_uid__startswith="mx-").count()
    found["CapacityInterval"] = CapacityInterval.objects.filter(ended_at=None).count()
    found["RateCardEntry"] = RateCardEntry.objects.count()
    return found


@pytest.fixture
def clean(db: None, quiet_cluster_loops: None) -> Iterator[None]:
    """A database of its own, as the benchmark wants: the session worker of the full-stack tests paused (it
    records the fleet as it goes), without the fleet it recorded before (removed inside the test's
    transaction, so put back when it rolls back); the event totals' cache entry as it was afterwards (a
    kept run's totals count rows the test rolls back)."""
    CapacityInterval.objects.filter(ended_at=None).delete()
    saved = cache.get(events.CACHE_KEY)
    yield
    if saved is None:
        cache.delete(events.CACHE_KEY)
    else:
        cache.set(events.CACHE_KEY, saved, timeout=None)


def bench(*extra: str) -> str:
    out = io.StringIO()
    call_command("bench_metrics", *TINY, *extra, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_tiny_run_prints_the_figures_and_rolls_everything_back(clean: None, tmp_path: Path) -> None:
    before = counts()
    cached = cache.get(events.CACHE_KEY)
    figures = tmp_path / "figures.json"
    out = bench("--json", str(figures))

    assert "/metrics on postgresql: 10 nodes (80 GPUs" in out
    assert "1 departments, 5 teams, 25 users" in out
    assert re.search(
        r"now: 40 queued \(\d+ queued again after a preemption or a stop, \d+ within quota\), 20 running", out
    )
    assert "log: 1500 events over 30 days" in out
    rows = {}
    for label in ("cold (whole log counted)", "warm (nothing new)", "after 25 new events"):
        row = re.search(
            rf"^  {re.escape(label)} +(\S+) +\S+-\S+ +(\d+) +(\S+) +(\d+) +(\d+) +(\d+) +(\d+)$", out, re.MULTILINE
        )
        assert row is not None, label
        assert float(row[1]) > 0 and float(row[3]) > 0  # seconds, kB
        assert 5 <= int(row[2]) <= 30  # a few grouped queries, not one per workspace or event
        rows[label] = row
    assert "page: queue as made (40), within quota as made" in out
    assert re.search(r"admissions as made \(\d+, then \d+ with the 50 events added\)", out)
    assert "cold scrape" in out and "slowest warm or incremental" in out

    report: dict[str, Any] = json.loads(figures.read_text())
    made, (cold, warm, new) = report["generated"], report["scrapes"]
    assert made["queued"] == 40 and made["running"] == 20 and made["events"] == 1500
    assert 0 < made["requeued"] < 40  # some wait since an event, not since their creation
    assert made["within_quota"] > 0  # some queued requests wait for capacity, not quota
    assert made["pods"] >= 20 and made["samples"] == 20
    assert made["admissions"] > 0 and made["budgets"] >= 0 and made["quotas"] > 0
    for scrape in (cold, warm, new):
        page = scrape["page"]
        assert page["queue_requests"] == 40  # the queued workspaces made, and no others
        assert page["within_quota_requests"] == made["within_quota"]
        assert page["capacity"] == 80
        assert page["allocated"] > 0
    # The admissions counted from the whole log equal the admission events made; warm counts nothing new;
    # after the new events, the incremental counts add theirs.
    assert cold["page"]["admitted"] == made["admissions"] == cold["page"]["admission_waits"]
    assert warm["page"]["admitted"] == made["admissions"]
    assert report["added_events"] == 50 and report["added_admissions"] == 10
    assert new["page"]["admitted"] == made["admissions"] + 10 == new["page"]["admission_waits"]
    assert cold["queries"] > warm["queries"]  # the whole log is counted: the transitions and the waits
    assert int(rows["cold (whole log counted)"][7]) == made["admissions"]

    assert counts() == before  # rolled back: not a row left
    assert cache.get(events.CACHE_KEY) == cached  # and the totals of the rolled-back log are not kept


def test_keep_commits_the_generated_state(clean: None) -> None:
    bench("--keep")
    assert Workspace.objects.filter(state="queued", name__startswith="mx-").count() == 40
    assert Workspace.objects.filter(state="running", name__startswith="mx-").count() == 20
    assert WorkspaceEvent.objects.filter(workspace__name__startswith="mx-").count() == 1500 + 50
    # A second run would mix its rows with these: it refuses.
    with pytest.raises(CommandError, match="rows of a kept run are here"):
        bench()


def test_it_refuses_a_database_that_holds_workspaces_or_a_fleet(clean: None) -> None:
    before = counts()
    offering = install_offerings()["h100-80gb-hbm3"]
    team = make_team(make_department(name="Research", slug="research", cost_centre="RES-1"), name="A", slug="a")
    make_workspace(team=team, owner=make_user("alice"), offering=offering, name="theirs")
    with pytest.raises(CommandError, match="already holds 1 workspaces"):
        bench()
    Workspace.objects.all().delete()
    now = timezone.now()
    CapacityInterval.objects.create(
        gpu_model="H100-80GB-HBM3",
        gpus=8,
        rate=Decimal(0),
        started_at=now,
        last_seen_at=now,
        period=now.date().replace(day=1),
    )
    with pytest.raises(CommandError, match="already records a fleet"):
        bench()
    CapacityInterval.objects.filter(ended_at=None).delete()
    with pytest.raises(CommandError, match="at least one repeat"):
        bench("--repeats", "0")
    assert counts()["Workspace"] == before["Workspace"]
