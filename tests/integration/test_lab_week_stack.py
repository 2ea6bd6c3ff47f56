"""The lab model on the full stack (``manage.py bench_lab_week``), shortened: 12 researchers whose working
day starts at 01:00, the first 8 hours of a Monday at 600x (48 s), a real worker with beat, the simulated
cluster with fast workloads and its telemetry. The live portal must get what the engines promise on the same
arrivals: jobs done, GPUs held, notebooks closed by their owners, forgotten ones reclaimed by the live idle
rule, none lost while in use."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.db import connection

from portal.models import User
from scheduling.benchmarks.lab.__main__ import DEFAULT_MODEL
from scheduling.benchmarks.lab.agreement import agreement
from scheduling.benchmarks.lab.arrivals import draw
from scheduling.benchmarks.lab.figures import figures
from scheduling.benchmarks.lab.model import load_model
from scheduling.benchmarks.lab.portal_arm import simulate_portal
from scheduling.benchmarks.lab.stack_week import PREFIX, WeekConfig, _stop, run
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace
from workspaces.models import Workspace

HOURS, SPEED = 8, 600.0


@pytest.fixture
def small_lab(tmp_path: Path) -> Path:
    data = yaml.safe_load(DEFAULT_MODEL.read_text())
    data["cluster"] = str(DEFAULT_MODEL.parent / data["cluster"])
    data["days"] = 1
    for department in data["departments"]:
        for team in department["teams"]:
            team["researchers"] = 2
    # The day moved to the small hours, so that its work fits the first model hours the test lives.
    data["rhythm"] |= {"working_hours": ["01:00", "10:00"], "evening_until": "15:00"}
    data["notebooks"] |= {"morning": ["00:30", "03:00"], "forgotten": 0.5}
    # Short enough that forgotten notebooks are reclaimed by 08:00, long enough that the bursty ones' quiet
    # stretches are not (the live rule judges every 20 model minutes at this speed, the engine exactly).
    data["idle"] = {"window_minutes": 90, "grace_minutes": 5}
    data["deadlines"] = []
    path = tmp_path / "small-lab.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.django_db(transaction=True)
def test_a_morning_in_a_small_lab_on_the_full_stack_matches_the_engines(small_lab: Path) -> None:
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("the full stack needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL)")
    model = load_model(small_lab)
    arm = model.arm("portal-shared")
    requests = draw(model)
    asked = [q for q in requests if q.at < HOURS * 3600]
    engine = simulate_portal(model, arm, requests, horizon=HOURS * 3600)

    result = run(WeekConfig(model, arm, requests, speed=SPEED, concurrency=2, hours=HOURS), say=lambda _: None)

    live = result.outcome
    assert {w.request.id for w in live.waits} >= {q.id for q in asked}  # every request was made (re-asks too)
    by_outcome = {o: [r for r in live.runs if r.outcome == o] for o in ("done", "closed", "reclaimed")}
    assert by_outcome["done"] and all(r.request.kind == "job" for r in by_outcome["done"])
    assert by_outcome["closed"] and all(r.request.kind == "notebook" for r in by_outcome["closed"])
    engine_reclaimed = [r.request.id for r in engine.runs if r.outcome == "reclaimed"]
    assert engine_reclaimed, "the model should have forgotten notebooks the idle rule reclaims by 08:00"
    # Every reclaim is one the notebook's own pod called for: idle by every signal for the window, then the
    # grace. A live pod plays the busy stretches of its own uid (random), not those the engine drew for the
    # request, so an attended notebook may go quiet for longer on the stack than in the engine, and be reclaimed
    # while its owner still works in it: that must be its own plan's doing, never a burst the rule missed. The
    # live rule judges every 20 model minutes and stamps times to the second (ten model minutes here): allowed.
    late_s = 20 * 60
    for r in by_outcome["reclaimed"]:
        due = r.plan.reclaim_after(model.idle)
        assert due is not None and r.end - r.start >= due - late_s, (r.request.id, r.start, r.end, due, r.plan.busy)
    # Forgotten notebooks (their work does not depend on the pod's uid) reclaimed by the live idle rule on the
    # cluster's telemetry, as the engine says (the live rule sees a sample every 20 model minutes here, so one
    # due just before 08:00 may come after it). A pod's start is stamped to the second, so the live rule may
    # also reclaim one the engine reclaims just after 08:00: compare with what the engine reclaims by 08:30.
    # A loaded machine may also stop the stack late, by model minutes: a reclaim it made after 08:30 is not
    # compared.
    cutoff = (HOURS + 0.5) * 3600
    later = simulate_portal(model, arm, requests, horizon=cutoff)
    live_reclaimed = {r.request.id: r.end for r in by_outcome["reclaimed"] if r.request.forgotten}
    compared = {request for request, end in live_reclaimed.items() if end <= cutoff}
    engine_later = {r.request.id for r in later.runs if r.outcome == "reclaimed"}
    assert compared and compared <= engine_later, (live_reclaimed, engine_later)

    # At 600x a real second is ten model minutes, so a loaded machine (the suite runs beside it) delays what the
    # live portal does by model minutes: near the end, a job the engine finishes may not be done yet. Every job
    # the engine finished two model hours before the end must be done, and the GPUs held stay close.
    done = {r.request.id for r in live.runs if r.outcome == "done"}
    early = {r.request.id for r in engine.runs if r.outcome == "done" and r.end < (HOURS - 2) * 3600}
    assert early and early <= done, early - done
    stack_f, engine_f = figures(live), figures(engine)
    checks = {c.figure: c for c in agreement(stack_f, engine_f, resolution_min=SPEED / 120)}
    # A notebook lost in use is only ever an attended one its own pod's quiet stretch had reclaimed (above).
    assert all(r.outcome == "reclaimed" for r in live.runs if r.lost_in_use), checks
    held = checks["GPUs held, % of capacity"]
    assert held.stack is not None and held.engine is not None
    assert abs(held.stack - held.engine) <= 0.15 * held.engine, checks
    assert result.measured.held_gpu_h > 0 and result.measured.activity is not None
    assert 0.3 < result.measured.activity <= 1.0  # the portal's own samples saw the GPUs at work
    assert result.behind_s < 5

    # Everything it made is gone again.
    assert not User.objects.filter(username__startswith=PREFIX).exists()
    assert not Workspace.objects.filter(owner__username__startswith=PREFIX).exists()


@pytest.mark.django_db
def test_the_week_ends_workspaces_the_worker_ended_meanwhile_without_an_error(org: Org) -> None:
    """The week's end stops what it read as live; the worker may have reclaimed one since (CI saw it)."""
    h100 = install_offerings()["h100-80gb-hbm3"]
    reclaimed = make_workspace(org.alpha, org.member, h100, state=Workspace.State.RECLAIMED)
    queued = make_workspace(org.alpha, org.member, h100)
    stale = Workspace.objects.get(pk=reclaimed.pk)
    stale.state = Workspace.State.RUNNING  # as read before the worker reclaimed it
    _stop(stale)
    _stop(queued)
    reclaimed.refresh_from_db()
    queued.refresh_from_db()
    assert (reclaimed.state, queued.state) == (Workspace.State.RECLAIMED, Workspace.State.CANCELLED)
