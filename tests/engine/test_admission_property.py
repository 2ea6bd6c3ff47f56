"""Property test of admission (issue 6 acceptance): over random sequences of requests, releases and quota
edits, no team exceeds guarantee + borrowing limit, interactive work is never preempted and never borrows,
and nothing admitted exceeds a department's ceiling or a flavour's capacity.

Preemption is applied either at once or after a notice of two steps, during which victims still hold their
GPUs (marked preempting): then no admission may push any limit over while they are leaving.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from hypothesis import event, given, settings
from hypothesis import strategies as st

from scheduling.engine.admission import AdmissionState, Decisions, decide
from scheduling.engine.quota import UNIT, Kind, QuotaConfig, QuotaError, TeamQuota, Workload, validate

TEAMS = ("t0", "t1", "t2", "t3")
DEPARTMENTS = {"t0": "d0", "t1": "d0", "t2": "d1", "t3": "d1"}
FLAVOURS = ("H100", "A100")
HALF = UNIT // 2

halves = st.integers(min_value=0, max_value=8).map(lambda n: n * HALF)
request = st.tuples(
    st.just("request"),
    st.sampled_from(TEAMS),
    st.sampled_from(FLAVOURS),
    st.integers(min_value=1, max_value=4).map(lambda n: n * HALF),
    st.integers(min_value=0, max_value=3),
    st.booleans(),
)
release = st.tuples(st.just("release"), st.integers(min_value=0, max_value=50))
edit = st.tuples(st.just("edit"), st.sampled_from(TEAMS), st.sampled_from(FLAVOURS), halves, halves)
capacity_edit = st.tuples(st.just("capacity"), st.sampled_from(FLAVOURS), st.none() | halves.map(lambda u: 2 * u))
# Mostly requests, so that departments fill up and borrowing, reclaim and priority preemption happen.
op = st.integers(min_value=0, max_value=9).flatmap(
    lambda n: request if n < 6 else release if n < 8 else edit if n < 9 else capacity_edit
)
ops = st.lists(op, min_size=10, max_size=40)
quotas = st.fixed_dictionaries(
    {
        (t, f): st.tuples(st.integers(min_value=1, max_value=4).map(lambda n: n * HALF), halves)
        for t in TEAMS
        for f in FLAVOURS
    }
)


def make_config(q: dict[tuple[str, str], tuple[int, int]], capacity: dict[str, int]) -> QuotaConfig:
    return QuotaConfig({k: TeamQuota(g, b) for k, (g, b) in q.items()}, DEPARTMENTS, {}, capacity)


def usage(workloads: Iterable[Workload], cfg: QuotaConfig) -> dict[tuple[str, ...], int]:
    """Units per team, team's interactive work, department and flavour."""
    out: dict[tuple[str, ...], int] = defaultdict(int)
    for w in workloads:
        out["team", w.team, w.flavour] += w.units
        out["dept", cfg.department(w.team), w.flavour] += w.units
        out["flavour", w.flavour] += w.units
        if w.kind is Kind.INTERACTIVE:
            out["interactive", w.team, w.flavour] += w.units
    return out


def limit(key: tuple[str, ...], cfg: QuotaConfig) -> int:
    if key[0] == "team":
        return cfg.quota(key[1], key[2]).limit(Kind.BATCH)
    if key[0] == "interactive":
        return cfg.quota(key[1], key[2]).guaranteed
    if key[0] == "dept":
        return cfg.ceiling(key[1], key[2])
    return cfg.capacity_of(key[1])


def check(cfg: QuotaConfig, admitted: list[Workload], pending: list[Workload], d: Decisions) -> None:
    by_id = {w.id: w for w in admitted}
    queued = {w.id: w for w in pending}
    admits = [queued[a.workload_id] for a in d.admit]
    victims = {p.workload_id for p in d.preempt}
    assert victims <= by_id.keys()
    assert all(by_id[v].kind is Kind.BATCH for v in victims), "interactive work preempted"
    assert not any(a.borrowing and queued[a.workload_id].kind is Kind.INTERACTIVE for a in d.admit)
    assert {w.workload_id for w in d.waiting} == queued.keys() - {a.workload_id for a in d.admit}

    # What keeps running once the victims are gone stays within every limit.
    staying = [w for w in admitted if w.id not in victims and not w.preempting] + admits
    for key, used in usage(staying, cfg).items():
        assert used <= limit(key, cfg), f"{key}: {used} > {limit(key, cfg)}"
    # While victims are still leaving, admissions never push a limit over.
    before = usage(admitted, cfg)
    during = usage(admitted + admits, cfg)
    for key in usage(admits, cfg):
        assert during[key] <= limit(key, cfg), f"{key}: {before[key]} pushed to {during[key]} while victims leave"


@settings(max_examples=300, deadline=None)
@given(initial=quotas, steps=ops, notice=st.booleans())
def test_admission_invariants(initial, steps, notice):
    q = dict(initial)
    capacity: dict[str, int] = {}
    cfg = make_config(q, capacity)
    admitted: list[Workload] = []
    pending: list[Workload] = []
    told: dict[str, int] = {}  # victim -> step it was told to stop
    for clock, op in enumerate(steps):
        gone = {w.id for w in admitted if clock - told.get(w.id, clock) >= 2}  # notice served
        pending += [replace(w, admitted_at=None, borrowing=False, preempting=False) for w in admitted if w.id in gone]
        admitted = [w for w in admitted if w.id not in gone]
        if op[0] == "request":
            _, team, flavour, units, priority, interactive = op
            kind = Kind.INTERACTIVE if interactive else Kind.BATCH
            pending.append(Workload(f"w{clock}", team, flavour, units, priority, kind, float(clock)))
        elif op[0] == "release" and admitted:
            admitted.pop(op[1] % len(admitted))
        elif op[0] in ("edit", "capacity"):
            new_q, new_capacity = dict(q), dict(capacity)
            if op[0] == "edit":
                new_q[op[1], op[2]] = (op[3], op[4])
            elif op[2] is None:
                new_capacity.pop(op[1], None)
            else:
                new_capacity[op[1]] = op[2]
            candidate = make_config(new_q, new_capacity)
            try:
                validate(candidate, admitted)
            except QuotaError:
                pass  # refused: the portal shows the error and keeps the old quota
            else:
                q, capacity, cfg = new_q, new_capacity, candidate

        d = decide(AdmissionState(cfg, admitted), pending)
        check(cfg, admitted, pending, d)

        admit_ids = {a.workload_id: a.borrowing for a in d.admit}
        victims = {p.workload_id for p in d.preempt}
        started = [
            replace(w, admitted_at=float(clock), borrowing=admit_ids[w.id]) for w in pending if w.id in admit_ids
        ]
        pending = [w for w in pending if w.id not in admit_ids]
        if notice:
            admitted = [replace(w, preempting=True) if w.id in victims else w for w in admitted]
            told.update(dict.fromkeys(victims, clock))
        else:
            pending += [replace(w, admitted_at=None, borrowing=False) for w in admitted if w.id in victims]
            admitted = [w for w in admitted if w.id not in victims]
        admitted += started
        if victims:
            event("preemption")  # hypothesis --hypothesis-show-statistics: how often preemption is exercised
