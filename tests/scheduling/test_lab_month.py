"""The lab-month benchmark (scheduling/benchmarks/lab): its model, arrivals, arms and figures.

Pure code over the shipped model and small ones written here; no database, no cluster process: the portal
arm runs the live admission engine and placement inventory in simulated time.
"""

from __future__ import annotations

import html
import math
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from scheduling.benchmarks.lab import __main__ as cli
from scheduling.benchmarks.lab import dynamic_arm
from scheduling.benchmarks.lab.arrivals import DAY, HOUR, Calendar, Request, draw
from scheduling.benchmarks.lab.dynamic_arm import DynamicArm
from scheduling.benchmarks.lab.figures import figures
from scheduling.benchmarks.lab.fleet import node_objects, whole_gpus_file
from scheduling.benchmarks.lab.model import Idle, ModelError, load_model, parse_model
from scheduling.benchmarks.lab.outcome import ArmOutcome, Step
from scheduling.benchmarks.lab.portal_arm import PortalArm
from scheduling.benchmarks.lab.runs import Plan, Run, Wait, plan
from scheduling.benchmarks.lab.static_arm import cards_for, cards_needed, median_waits, simulate_static
from scheduling.discovery import propose_offerings

SHIPPED = cli.DEFAULT_MODEL

SMALL_CLUSTER = """
seed: 5
devicePlugin:
  default: default
  configs:
    default: {version: v1, flags: {migStrategy: mixed}}
    ts-4: {replicas: 4}
nodes:
  - {name: h100-0, cpu: 224, memory: 2Ti, gpu: {model: H100-80GB-HBM3, count: 8}}
  - {name: a100-0, cpu: 256, memory: 2Ti, gpu: {model: A100-SXM4-80GB, count: 2}, migConfig: all-1g.10gb}
"""


def shipped_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(SHIPPED.read_text())
    return data


def small_model(tmp_path: Path, **changes: Any) -> Any:
    """Two teams of 4 and 6 on one 8 x H100 node and 2 A100 split in 7 x 1g.10gb each."""
    (tmp_path / "cluster.yaml").write_text(SMALL_CLUSTER)
    data = shipped_data()
    data.update(cluster="cluster.yaml", days=7, deadlines=[])
    data["departments"] = [
        {
            "name": "lab",
            "teams": [
                {
                    "name": "a",
                    "researchers": 4,
                    "guarantee": {"H100-80GB-HBM3": 4, "A100-SXM4-80GB": 1},
                    "borrow": {"H100-80GB-HBM3": 4},
                },
                {
                    "name": "b",
                    "researchers": 6,
                    "guarantee": {"H100-80GB-HBM3": 4, "A100-SXM4-80GB": 1},
                    "borrow": {"H100-80GB-HBM3": 4},
                },
            ],
        }
    ]
    data["arms"] = [
        {"name": "static", "kind": "static"},
        {
            "name": "shared",
            "kind": "portal",
            "idle_reclaim": True,
            "offerings": {
                "notebook": {s: ["a100-sxm4-80gb-1g-10gb", "h100-80gb-hbm3"] for s in ("small", "medium", "large")},
                "job": ["h100-80gb-hbm3"],
            },
        },
    ]
    data.update(changes)
    return parse_model(data, tmp_path)


# -- the model ------------------------------------------------------------------------------------------


def test_the_shipped_model_describes_a_60_person_lab_on_60_gpus():
    model = load_model(SHIPPED)
    assert model.researchers == 60 and len(model.teams) == 6 and len({t.department for t in model.teams}) == 2
    assert [a.name for a in model.arms] == ["static", "portal-whole", "portal-shared", "portal-dynamic"]
    assert [a.dynamic_mig for a in model.arms] == [False, False, False, True]


def test_every_problem_of_a_model_is_reported_at_once(tmp_path):
    data = shipped_data()
    data["cluster"] = "nowhere.yaml"
    data["rhythm"]["rates"]["evening"] = -1
    data["departments"][0]["teams"][0]["guarantee"] = {"Z100": 2}
    data["notebooks"]["forgotten"] = 1.5
    data["arms"][1]["kind"] = "kueue"
    data["arms"][3]["whole_gpus_only"] = True
    with pytest.raises(ModelError) as caught:
        parse_model(data, SHIPPED.parent)
    text = "\n".join(caught.value.problems)
    assert "cluster: no node file" in text
    assert "rhythm rates evening: must be at least 0" in text
    assert "'Z100' is not a GPU model" in text
    assert "notebooks forgotten: must be from 0 to 1, not 1.5" in text
    assert "arm portal-whole: kind must be one of static, portal, not 'kueue'" in text
    assert "arm portal-dynamic: dynamic_mig needs MIG" in text


def test_an_offering_the_cluster_does_not_have_is_named_with_the_ones_it_has(tmp_path):
    model = small_model(tmp_path)
    arm = replace(model.arm("shared"), job_offerings=("l40s-shared-4",))
    with pytest.raises(ValueError, match=r"no offering 'l40s-shared-4' on its cluster .*h100-80gb-hbm3"):
        PortalArm(model, arm, [])


def test_guarantees_beyond_the_cluster_are_refused_by_the_quota_rules(tmp_path):
    model = small_model(tmp_path)
    teams = tuple(replace(t, guarantee={"H100-80GB-HBM3": 6}) for t in model.teams)
    with pytest.raises(ValueError, match="H100-80GB-HBM3"):
        PortalArm(replace(model, teams=teams), model.arm("shared"), [])


# -- arrivals -------------------------------------------------------------------------------------------


def test_arrivals_are_deterministic_and_follow_the_week():
    model = load_model(SHIPPED)
    first, again = draw(model), draw(model)
    assert first == again
    assert draw(replace(model, seed=model.seed + 1)) != first
    cal = Calendar(model)
    per_day = Counter(int(q.at // DAY) for q in first)
    workdays = [per_day[d] for d in range(model.days) if cal.is_workday(d)]
    weekends = [per_day[d] for d in range(model.days) if not cal.is_workday(d)]
    assert min(workdays) > 2 * max(weekends)
    # The conference deadline (week 3) doubles that week's jobs.
    jobs_by_week = Counter(int(q.at // (7 * DAY)) for q in first if q.kind == "job" and not q.multinode)
    assert jobs_by_week[2] > 1.6 * max(jobs_by_week[w] for w in (0, 1, 3))
    mornings = [q for q in first if q.kind == "notebook" and cal.is_workday(int(q.at // DAY))]
    in_window = [q for q in mornings if 8.5 <= (q.at % DAY) / HOUR <= 11]
    assert 0.65 < len(in_window) / len(mornings) < 0.85


def test_jobs_take_gpu_count_and_run_time_from_the_trace():
    model = load_model(SHIPPED)
    jobs = [q for q in draw(model) if q.kind == "job" and not q.multinode]
    assert {q.gpus for q in jobs} <= {1, 2, 4, 8} and Counter(q.gpus for q in jobs).most_common(1)[0][0] == 1
    assert all(60 <= q.run_s <= model.jobs.max_hours * HOUR for q in jobs)
    multi = [q for q in draw(model) if q.multinode]
    assert multi and all(q.gpus == 8 and 2 <= q.pods <= 3 for q in multi)


# -- runs -----------------------------------------------------------------------------------------------


IDLE = Idle(window_s=3600, grace_s=900)


def test_the_idle_rule_reclaims_after_the_first_quiet_stretch_long_enough():
    p = Plan("bursty-notebook", 20_000, 20_000, ((0, 600), (1200, 1500), (6000, 6300), (14_000, 14_100)))
    # Quiet 1,500-6,000 s (75 min: exactly window + grace) reclaims at 6,000 s.
    assert p.reclaim_after(IDLE) == 1500 + 3600 + 900
    assert p.reclaim_after(Idle(4000, 900)) == 6300 + 4900  # the next quiet stretch long enough
    assert p.back_after(6000) == 6000 and p.back_after(7000) == 14_000
    assert Plan("steady-training", 9_999, 0, ((0, 9_999),)).reclaim_after(IDLE) is None


def test_a_forgotten_notebook_stays_open_until_the_next_working_morning(tmp_path):
    model = small_model(tmp_path)
    cal = Calendar(model)
    friday_evening = 4 * DAY + 17 * HOUR
    q = Request(
        "nb-1", "notebook", 0, "a", friday_evening, size="small", session_s=2 * HOUR, forgotten=True, close_draw=0.0
    )
    p = plan(q, friday_evening, cal, seed=1)
    assert friday_evening + p.length == 7 * DAY + 8.5 * HOUR  # Monday, the morning window's start
    assert p.busy == ((0.0, 2 * HOUR),) and p.reclaim_after(IDLE) == 2 * HOUR + 4500


# -- the arms -------------------------------------------------------------------------------------------


def test_the_static_arm_queues_each_researcher_on_their_own_card(tmp_path):
    model = small_model(tmp_path)
    requests = [
        Request("job-1", "job", 0, "a", 100.0, gpus=4, run_s=1000.0),
        Request("job-2", "job", 0, "a", 200.0, gpus=1, run_s=500.0),
        Request("job-3", "job", 1, "a", 300.0, gpus=1, run_s=500.0),
    ]
    outcome = simulate_static(model, requests)
    runs = {r.request.id: r for r in outcome.runs}
    assert (runs["job-1"].start, runs["job-1"].end) == (100.0, 4100.0)  # 4 GPUs' work on one card
    assert runs["job-2"].start == 4100.0  # behind its owner's first job, while other cards sit idle
    assert runs["job-3"].start == 300.0 and runs["job-1"].offering != runs["job-3"].offering


def test_with_more_cards_a_researcher_runs_wider_and_alongside(tmp_path):
    model = small_model(tmp_path)
    requests = [
        Request("job-1", "job", 0, "a", 100.0, gpus=4, run_s=1000.0),
        Request("nb-2", "notebook", 0, "a", 200.0, size="small", session_s=600.0),
        Request("job-3", "job", 0, "a", 300.0, gpus=1, run_s=500.0),
    ]
    outcome = simulate_static(model, requests, cards_each=[3] + [1] * (model.researchers - 1))
    runs = {r.request.id: r for r in outcome.runs}
    assert (runs["job-1"].start, runs["job-1"].end, runs["job-1"].gpu_eq) == (100.0, 100.0 + 4000 / 3, 3.0)
    assert runs["nb-2"].start == runs["job-1"].end  # first come, first served: it waits for a card
    assert outcome.capacity == 12.0  # 3 + 9 cards, beyond the cluster's 10 GPUs


def test_the_hardware_what_if_finds_the_fewest_cards_for_the_target_waits(tmp_path):
    model = small_model(tmp_path)
    requests = draw(replace(model, jobs=replace(model.jobs, per_day=4.0)))
    assert sorted(cards_for(model, requests, 13), reverse=True)[:4] == [2, 2, 2, 1]
    needed = cards_needed(model, requests, {"notebook": 0.0, "job": 0.0})
    assert needed is not None and needed > model.researchers

    def medians(total: int) -> dict[str, float]:
        return median_waits(simulate_static(model, requests, cards_each=cards_for(model, requests, total)))

    assert all(v == 0.0 for v in medians(needed).values())
    assert any(v > 0.0 for v in medians(needed - 1).values())


def _portal(model: Any, requests: list[Request]) -> tuple[PortalArm, ArmOutcome]:
    arm = PortalArm(model, model.arm("shared"), requests)
    return arm, arm.run()


def test_the_portal_arm_borrows_idle_gpus_and_reclaims_them_for_a_team_within_guarantee(tmp_path):
    model = small_model(tmp_path)
    long = 3 * HOUR
    requests = [Request(f"job-a{i}", "job", 0, "a", 60.0, gpus=1, run_s=long) for i in range(8)]
    requests.append(Request("job-b", "job", 5, "b", 600.0, gpus=2, run_s=HOUR))
    _, outcome = _portal(model, requests)
    starts = {w.request.id: w.started for w in outcome.waits}
    assert all(starts[f"job-a{i}"] == 60.0 for i in range(8))  # team a borrows b's idle half
    assert starts["job-b"] is not None and starts["job-b"] <= 600 + 120 + 10  # b takes it back after the notice
    preempted = [r for r in outcome.runs if r.outcome == "preempted"]
    assert len(preempted) == 2 and all(r.request.team == "a" for r in preempted)
    wait_of = {w.request.id: w for w in outcome.waits}
    assert wait_of["job-b"].in_quota and not wait_of["job-a7"].in_quota


def test_the_portal_arm_never_holds_more_than_a_pool_or_preempts_a_notebook(tmp_path):
    model = small_model(tmp_path, days=3)
    requests = draw(replace(model, jobs=replace(model.jobs, per_day=6.0)))
    _, outcome = _portal(model, requests)
    assert np.all(outcome.step.held <= outcome.step.capacity[None, :] + 1e-9)
    assert outcome.step.asked.max() > outcome.step.capacity.min()  # the lab was short at times
    assert not [r for r in outcome.runs if r.request.kind == "notebook" and r.outcome == "preempted"]
    per_team: Counter[str] = Counter()
    for r in outcome.runs:
        per_team[r.request.team] += 1
    assert set(per_team) == {"a", "b"}
    small = [r for r in outcome.runs if r.request.kind == "notebook"]
    assert small and Counter(r.offering for r in small).most_common(1)[0][0] == "a100-sxm4-80gb-1g-10gb"


def test_a_notebook_reclaimed_while_its_owner_works_is_asked_for_again(tmp_path):
    model = small_model(tmp_path, idle={"window_minutes": 10, "grace_minutes": 5})
    q = Request("nb-1", "notebook", 0, "a", 100.0, size="small", session_s=8 * HOUR)
    arm, outcome = _portal(model, [q])
    first = next(r for r in outcome.runs if r.request.id == "nb-1")
    assert first.outcome == "reclaimed" and first.lost_in_use
    assert "nb-1+" in arm.requests and any(r.request.id == "nb-1+" for r in outcome.runs)


# -- figures --------------------------------------------------------------------------------------------


def test_figures_from_a_known_outcome():
    job = Request("job-1", "job", 0, "a", 0.0, gpus=1, run_s=2 * HOUR)
    nb = Request("nb-1", "notebook", 1, "a", 0.0, size="small", session_s=HOUR)
    runs = [
        Run(job, "x", 1.0, HOUR, 3 * HOUR, "done", Plan("steady-training", 2 * HOUR, 0, ((0, 2 * HOUR),))),
        Run(nb, "x", 1.0, 0.0, 4 * HOUR, "closed", Plan("idle-notebook", 4 * HOUR, HOUR, ((0, HOUR),))),
    ]
    waits = [Wait(job, True, HOUR), Wait(nb, True, 0.0)]
    # Two GPUs; from 0 to 1 h both are asked for but one is held: short, half allocated.
    step = Step(
        ("x",),
        np.array([2.0]),
        np.array([0.0, HOUR, 3 * HOUR]),
        np.array([[1.0], [2.0], [1.0]]),
        np.array([[2.0], [2.0], [1.0]]),
    )
    f = figures(ArmOutcome("t", 2.0, 4 * HOUR, runs, waits, step))
    assert f.allocated_while_short == pytest.approx((1 * 1 + 2 * 2) / (2 * 3))
    assert f.short_hours == pytest.approx(3.0)
    assert f.allocated == pytest.approx(6 / 8)
    busy = 2 * 0.915 + 1 * 0.5 + 3 * 0.0025  # GPU-hours times mean activity
    assert f.activity_of_allocated == pytest.approx(busy / 6)
    assert f.idle_gpu_hours == pytest.approx(3.0)
    assert f.waits_in_quota["job"].median_min == 60.0 and f.jobs_done == 1 and f.lost_in_use == 0
    assert sum(f.hourly_allocated) == pytest.approx(6.0)


# -- the command ----------------------------------------------------------------------------------------


def test_the_command_prints_every_arm_and_the_targets(tmp_path, capsys):
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    assert cli.main(["--days", "2", "--json", str(out), "--html", str(page)]) == 0
    text = capsys.readouterr().out
    for arm in ("static", "portal-whole", "portal-shared", "portal-dynamic"):
        assert f"\n{arm} " in text
    assert any(line.startswith("arm ") and line.rstrip().endswith("repart  cpu s") for line in text.splitlines())
    difference = next(line for line in text.splitlines() if line.startswith("portal-dynamic against portal-shared ("))
    assert "repartitions): held " in difference and "held while short " in difference and "idle GPU-h " in difference
    assert "busy of held " in difference and "notebook wait p50/p95 " in difference
    assert "targets, arm portal-shared:" in text and "median wait of in-quota requests" in text
    assert "hardware what-if: one card per person needs" in text
    data = yaml.safe_load(out.read_text())
    assert [a["arm"] for a in data["arms"]] == ["static", "portal-whole", "portal-shared", "portal-dynamic"]
    assert data["differences"] == [difference]
    assert data["whatif"]["arm"] == "portal-shared" and data["whatif"]["static_gpus_needed"] >= 60
    assert html.escape(difference) in page.read_text()


def test_the_command_refuses_a_bad_model_or_arm(tmp_path, capsys):
    bad = tmp_path / "m.yaml"
    bad.write_text("name: x\n")
    with pytest.raises(SystemExit):
        cli.main(["--model", str(bad)])
    assert "the model has problems" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["--arms", "nope"])
    assert "no arm nope in the model" in capsys.readouterr().err


def test_the_whole_gpu_node_file_renders_the_nodes_the_whole_gpu_arms_decide_on(tmp_path: Path) -> None:
    model = load_model(SHIPPED)
    written = whole_gpus_file(model.cluster, tmp_path)
    as_file = node_objects(written)
    as_arm = node_objects(model.cluster, whole_gpus_only=True)
    assert [n["metadata"]["labels"] for n in as_file] == [n["metadata"]["labels"] for n in as_arm]
    assert [n["status"]["allocatable"] for n in as_file] == [n["status"]["allocatable"] for n in as_arm]
    slugs = sorted(o.slug for o in propose_offerings(as_file))
    assert slugs == sorted(o.slug for o in propose_offerings(as_arm))
    assert not any("1g" in s or "shared" in s for s in slugs)  # no MIG slices, no time-sliced shares
    assert "all-balanced" in model.cluster.read_text()  # the model's own file untouched


# -- MIG layouts that follow demand ---------------------------------------------------------------------


def dynamic_model(tmp_path: Path) -> Any:
    """The small model with an arm whose notebooks ask only for H100 1g.10gb slices, which no node serves
    until the arm splits the H100 node."""
    model = small_model(tmp_path)
    arm = replace(
        model.arm("shared"),
        name="dynamic",
        dynamic_mig=True,
        notebook_offerings=dict.fromkeys(("small", "medium", "large"), ("h100-80gb-hbm3-1g-10gb",)),
    )
    return replace(model, arms=(*model.arms, arm))


class WatchedArm(DynamicArm):
    """Checks, as it runs, that a node chosen has no GPU pod and that nothing lands on a node in flight."""

    def _pass(self, t: float) -> None:
        before = self.in_flight
        super()._pass(t)
        if self.in_flight is not None and before is None:
            assert self.on_node[self.in_flight.change.node] <= 0

    def _start(self, q: Any, nodes: list[str], now: float, borrowing: bool) -> None:
        assert self.in_flight is None or self.in_flight.change.node not in nodes
        super()._start(q, nodes, now, borrowing)


def test_the_dynamic_arm_splits_an_idle_node_for_mig_requests_that_wait(tmp_path):
    model = dynamic_model(tmp_path)
    requests = [Request(f"nb-{i}", "notebook", i, "a", 100.0, size="small", session_s=HOUR) for i in range(4)]
    arm = WatchedArm(model, model.arm("dynamic"), requests)
    outcome = arm.run()
    # Waiting since 100 s; the first pass after a minute's wait (165 s) picks the idle H100 node, the next
    # (180 s) applies all-1g.10gb, the one after (195 s) finds it done; the cycle at 200 s starts them.
    [done] = arm.done
    assert (done.node, done.old, done.new) == ("h100-0", "all-disabled", "all-1g.10gb")
    assert (done.started, done.done) == (165.0, 195.0) and "4 x mig-1g.10gb" in done.reason
    assert {w.started for w in outcome.waits} == {200.0} and outcome.repartitions == 1
    assert figures(outcome).repartitions == 1
    assert dynamic_arm.INTERVAL_S == 15.0 and dynamic_arm.MIN_WAIT_S == 60.0  # the live defaults
    # With fixed layouts no node ever serves the slice, and the arm's list is refused.
    with pytest.raises(ValueError, match="no offering 'h100-80gb-hbm3-1g-10gb' on its cluster"):
        PortalArm(model, replace(model.arm("dynamic"), dynamic_mig=False), requests)


def test_the_dynamic_arm_never_repartitions_a_node_holding_work(tmp_path):
    model = dynamic_model(tmp_path)
    job = Request("job-1", "job", 0, "a", 0.0, gpus=1, run_s=3 * HOUR)
    notebooks = [Request(f"nb-{i}", "notebook", i, "b", 600.0, size="small", session_s=HOUR) for i in range(3)]
    arm = WatchedArm(model, model.arm("dynamic"), [job, *notebooks])
    outcome = arm.run()
    [done] = arm.done
    assert done.started >= 3 * HOUR  # only once the job has ended and left the node without GPU pods
    runs = [r for r in outcome.runs if r.request.id == "job-1"]
    assert [(r.start, r.outcome) for r in runs] == [(0.0, "done")]
    # Split for notebooks, the node turns back for a whole-GPU job only once the last notebook has closed.
    notebooks = [Request(f"nb-{i}", "notebook", i, "b", 100.0, size="small", session_s=HOUR) for i in range(3)]
    job = Request("job-1", "job", 0, "a", 300.0, gpus=1, run_s=HOUR)
    arm = WatchedArm(model, model.arm("dynamic"), [*notebooks, job])
    outcome = arm.run()
    assert [(d.old, d.new) for d in arm.done] == [("all-disabled", "all-1g.10gb"), ("all-1g.10gb", "all-disabled")]
    ran = [r for r in outcome.runs if r.request.kind == "notebook"]
    assert len(ran) == 3 and all(r.outcome == "closed" and r.end - r.start == HOUR for r in ran)
    assert max(r.end for r in ran) <= arm.done[1].started
    assert next(w.started for w in outcome.waits if w.request.id == "job-1") == math.ceil(arm.done[1].done / 10) * 10
    # Two busy days: every node the planner chose had no GPU pod and nothing landed on a node in flight.
    watched = WatchedArm(replace(model, days=2), model.arm("dynamic"), draw(replace(model, days=2)))
    assert watched.run().repartitions >= 2
