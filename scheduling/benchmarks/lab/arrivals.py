"""The month's requests, drawn once from the organisation model and replayed by every arm.

Per researcher and day, the number of notebook sessions and of training jobs is Poisson: on a working day
its mean is the model's ``per_researcher_per_workday``, on other days that times the day's summed hourly
rates over a working day's (a weekend day at rate 0.1 against a working day of 9 h at 1.0, 5 h at 0.3 and
10 h at 0.03 gets 22% of it), times the deadline multiplier of its week. A request's hour follows the
day's rates, except that ``morning_share`` of a working day's notebook sessions open in the morning
window. Jobs take GPU count and run time together from one whole-GPU pod of the trace. Multi-node jobs
start in working hours on a working day of their week. Deterministic for the model's seed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scheduling.benchmarks.lab.model import SIZES, LabModel
from scheduling.planning import trace

HOUR = 3600.0
DAY = 24 * HOUR
_PREFIX = {"notebook": "nb", "job": "job"}
MIN_RUN_S = 60.0  # the trace has pods that lived seconds; a job takes at least a minute to be worth queueing


@dataclass(frozen=True)
class Request:
    id: str
    kind: str  # notebook | job
    researcher: int
    team: str
    at: float  # seconds after the month's start
    size: str = ""  # notebooks: small | medium | large
    gpus: int = 0  # jobs: GPUs per pod
    pods: int = 1  # jobs: pods (multi-node: one per node)
    run_s: float = 0.0  # jobs: run time on the GPUs asked for
    session_s: float = 0.0  # notebooks: how long the researcher works in it
    forgotten: bool = False  # notebooks: left open and idle after the work
    close_draw: float = 0.0  # forgotten notebooks: where in the next morning window the owner closes it
    multinode: bool = False

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.pods


class Calendar:
    """The month's clock in the lab's terms: seconds after the start <-> weekday and hour."""

    def __init__(self, model: LabModel) -> None:
        self.model = model
        self.first_weekday = model.start.weekday()

    def weekday(self, t: float) -> int:
        return (self.first_weekday + int(t // DAY)) % 7

    def is_workday(self, day: int) -> bool:
        return (self.first_weekday + day) % 7 in self.model.rhythm.workdays

    def next_morning(self, t: float, draw: float) -> float:
        """When the owner of a forgotten notebook closes it: in the morning window of the first working day
        after ``t`` (``draw`` in [0, 1) picks the moment)."""
        lo, hi = self.model.notebooks.morning
        day = int(t // DAY) + 1
        for _ in range(14):
            if self.is_workday(day):
                return day * DAY + (lo + (hi - lo) * draw) * HOUR
            day += 1
        return day * DAY + lo * HOUR  # no working days at all: a week later


def _job_shapes(model: LabModel) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs, run seconds) of the trace's whole-GPU pods."""
    rows = [
        (p.shape.num_gpu, p.deleted - (p.scheduled or p.created))
        for p in trace.read_pods(model.jobs.trace)
        if p.shape.num_gpu >= 1 and p.shape.gpu_milli == 1000 and p.deleted > (p.scheduled or p.created)
    ]
    if not rows:
        raise ValueError(f"{model.jobs.trace} holds no whole-GPU pods to draw jobs from")
    gpus, life = np.array(rows, dtype=np.float64).T
    return gpus.astype(np.int64), np.clip(life, MIN_RUN_S, model.jobs.max_hours * HOUR)


def _multiplier(model: LabModel, day: int, what: str) -> float:
    week = day // 7 + 1
    out = 1.0
    for d in model.deadlines:
        if d.week == week:
            out *= d.jobs if what == "jobs" else d.notebooks
    return out


def draw(model: LabModel) -> list[Request]:
    """Every request of the month, in arrival order."""
    rng = np.random.default_rng(model.seed)
    cal = Calendar(model)
    rhythm, nb = model.rhythm, model.notebooks
    teams = [model.team_of(r).name for r in range(model.researchers)]
    workday = next((d for d in range(7) if d in rhythm.workdays), 0)
    per_workday = sum(rhythm.hourly_rates(workday)) or 1.0
    job_gpus, job_runs = _job_shapes(model)
    size_p = np.array([nb.sizes[s] for s in SIZES]) / sum(nb.sizes.values())
    out: list[Request] = []

    def hours(rates: np.ndarray, n: int) -> np.ndarray:
        return rng.choice(24, size=n, p=rates / rates.sum()) + rng.random(n)

    for day in range(model.days):
        rates = np.array(rhythm.hourly_rates(cal.weekday(day * DAY)))
        if rates.sum() <= 0:
            continue
        scale = rates.sum() / per_workday
        for r, n in enumerate(
            rng.poisson(nb.per_day * scale * _multiplier(model, day, "notebooks"), model.researchers)
        ):
            at = hours(rates, n)
            if cal.is_workday(day):
                morning = rng.random(n) < nb.morning_share
                at[morning] = rng.uniform(*nb.morning, size=int(morning.sum()))
            for h in at:
                lo, hi = nb.session_hours
                out.append(
                    Request(
                        "",
                        "notebook",
                        r,
                        teams[r],
                        float(day * DAY + h * HOUR),
                        size=str(rng.choice(SIZES, p=size_p)),
                        session_s=float(rng.uniform(lo, hi) * HOUR),
                        forgotten=bool(rng.random() < nb.forgotten),
                        close_draw=float(rng.random()),
                    )
                )
        for r, n in enumerate(
            rng.poisson(model.jobs.per_day * scale * _multiplier(model, day, "jobs"), model.researchers)
        ):
            for h in hours(rates, n):
                i = int(rng.integers(len(job_gpus)))
                out.append(
                    Request(
                        "",
                        "job",
                        r,
                        teams[r],
                        float(day * DAY + h * HOUR),
                        gpus=int(job_gpus[i]),
                        run_s=float(job_runs[i]),
                    )
                )

    mn = model.multinode
    for week in range(-(-model.days // 7)):
        days = [d for d in range(week * 7, min(week * 7 + 7, model.days)) if cal.is_workday(d)]
        if not days or mn.per_week <= 0:
            continue
        for _ in range(rng.poisson(mn.per_week * _multiplier(model, days[0], "jobs"))):
            r = int(rng.integers(model.researchers))
            when = float(int(rng.choice(days)) * DAY + rng.uniform(rhythm.work_from, rhythm.work_to) * HOUR)
            out.append(
                Request(
                    "",
                    "job",
                    r,
                    teams[r],
                    when,
                    gpus=8,
                    pods=int(rng.integers(mn.nodes[0], mn.nodes[1] + 1)),
                    run_s=float(rng.uniform(*mn.hours) * HOUR),
                    multinode=True,
                )
            )

    out.sort(key=lambda q: (q.at, q.kind, q.researcher))
    return [replace(q, id=f"{'mn' if q.multinode else _PREFIX[q.kind]}-{i:05d}") for i, q in enumerate(out)]
