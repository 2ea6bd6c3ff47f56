"""The lab-month benchmark's organisation model: a YAML file (``scenarios/lab-month.yaml`` is the worked
example) read into frozen dataclasses, every problem reported at once.

Keys (times of day ``"HH:MM"`` in the lab's local time; ranges ``[low, high]``, drawn uniformly):

- ``name``, ``seed`` (every draw follows from it), ``start`` (a date; the month starts there at 00:00),
  ``days``, ``cluster`` (a node file of the simulated cluster, relative to the model file).
- ``departments``: each ``name``, ``teams`` and optionally ``cap`` (GPU-equivalents per GPU model the
  department's teams may hold together; without one, the sum of their guarantees, so they borrow only from
  each other); a team has ``name``, ``researchers``, ``guarantee`` and ``borrow`` (GPU-equivalents per GPU
  model: the portal's quota).
- ``rhythm``: ``workdays`` (mon..sun), ``working_hours`` [from, to], ``evening_until``, and ``rates``: the
  relative request rate per hour in ``working`` hours, the ``evening``, the ``night`` and the ``weekend``.
- ``notebooks``: ``per_researcher_per_workday`` sessions, of which ``morning_share`` open in the
  ``morning`` window on working days (the rest follow the rates); ``session_hours`` of work in bursts;
  ``forgotten``: the share left open and idle after the work until the next working morning; ``sizes``:
  shares of ``small``, ``medium`` and ``large`` requests.
- ``jobs``: ``per_researcher_per_workday`` (following the rates), ``trace`` (a pod list under
  ``../shared/traces``: whole-GPU pods give GPU count and run time together), ``max_hours`` (cut).
- ``multinode``: ``per_week`` jobs of ``nodes`` [low, high] whole 8-GPU nodes for ``hours``.
- ``deadlines``: ``name``, ``week`` (1-based) and multipliers of that week's ``jobs`` and ``notebooks``.
- ``idle``: the portal's idle rule for notebooks, ``window_minutes`` and ``grace_minutes``.
- ``arms``: ``name``, ``kind`` (``static`` or ``portal``); a portal arm has ``whole_gpus_only``,
  ``idle_reclaim`` and ``offerings``: for ``notebook`` per size and for ``job``, offering slugs (as the
  portal's discovery names them on that arm's cluster) in order of preference. With ``dynamic_mig`` the
  arm's MIG layouts follow demand as the portal's repartition loop decides them (``dynamic_arm.py``); its
  lists may then name the MIG shapes of any named layout of the cluster's MIG-capable GPUs, and
  ``mig_reconfigure_seconds`` is how long the MIG manager takes to apply a layout (default: the simulated
  cluster's, ``Timings.mig_reconfigure_s``; at most 600, within the loop's timeout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml

from scheduling.engine import gpus
from scheduling.simcluster.controllers import Timings

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
SIZES = ("small", "medium", "large")
PERIODS = ("working", "evening", "night", "weekend")
ARM_KINDS = ("static", "portal")
TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "traces"


class ModelError(ValueError):
    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Department:
    name: str
    cap: Mapping[str, float]  # GPU model -> GPU-equivalents; models not named: the teams' guarantees


@dataclass(frozen=True)
class Team:
    name: str
    department: str
    researchers: int
    guarantee: Mapping[str, float]  # GPU model -> GPU-equivalents
    borrow: Mapping[str, float]


@dataclass(frozen=True)
class Rhythm:
    workdays: frozenset[int]  # 0 = Monday
    work_from: float  # hours after midnight
    work_to: float
    evening_until: float
    rates: Mapping[str, float]

    def period(self, weekday: int, hour: float) -> str:
        if weekday not in self.workdays:
            return "weekend"
        if self.work_from <= hour < self.work_to:
            return "working"
        if self.work_to <= hour < self.evening_until:
            return "evening"
        return "night"

    def hourly_rates(self, weekday: int) -> list[float]:
        """The request rate of each hour of such a day (taken at the hour's middle)."""
        return [self.rates[self.period(weekday, h + 0.5)] for h in range(24)]


@dataclass(frozen=True)
class Notebooks:
    per_day: float
    morning: tuple[float, float]
    morning_share: float
    session_hours: tuple[float, float]
    forgotten: float
    sizes: Mapping[str, float]


@dataclass(frozen=True)
class Jobs:
    per_day: float
    trace: Path
    max_hours: float


@dataclass(frozen=True)
class Multinode:
    per_week: float
    nodes: tuple[int, int]
    hours: tuple[float, float]


@dataclass(frozen=True)
class Deadline:
    name: str
    week: int
    jobs: float
    notebooks: float


@dataclass(frozen=True)
class Idle:
    window_s: float
    grace_s: float


@dataclass(frozen=True)
class Arm:
    name: str
    kind: str  # static | portal
    whole_gpus_only: bool = False
    idle_reclaim: bool = False
    notebook_offerings: Mapping[str, tuple[str, ...]] | None = None  # size -> slugs by preference
    job_offerings: tuple[str, ...] = ()
    dynamic_mig: bool = False  # MIG layouts follow demand (the portal's repartition loop)
    mig_reconfigure_s: float = Timings.mig_reconfigure_s  # the MIG manager applies a layout in this long


@dataclass(frozen=True)
class LabModel:
    name: str
    seed: int
    start: datetime
    days: int
    cluster: Path
    departments: tuple[Department, ...]
    teams: tuple[Team, ...]
    rhythm: Rhythm
    notebooks: Notebooks
    jobs: Jobs
    multinode: Multinode
    deadlines: tuple[Deadline, ...]
    idle: Idle
    arms: tuple[Arm, ...]

    @property
    def researchers(self) -> int:
        return sum(t.researchers for t in self.teams)

    def team_of(self, researcher: int) -> Team:
        for team in self.teams:
            if researcher < team.researchers:
                return team
            researcher -= team.researchers
        raise IndexError(researcher)

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(name)


class _Reader:
    """Reads values out of the YAML, collecting problems instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def section(self, data: Mapping[str, Any], key: str, where: str = "") -> Mapping[str, Any]:
        value = data.get(key)
        if not isinstance(value, Mapping):
            self.fail(f"{where}{key}", "must be a mapping")
            return {}
        return value

    def number(
        self,
        data: Mapping[str, Any],
        key: str,
        where: str,
        *,
        low: float = 0.0,
        high: float | None = None,
        default: float | None = None,
    ) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(f"{where}{key}", f"must be a number, not {value!r}")
            return low
        if value < low or (high is not None and value > high):
            bounds = f"from {low:g} to {high:g}" if high is not None else f"at least {low:g}"
            self.fail(f"{where}{key}", f"must be {bounds}, not {value:g}")
            return low
        return float(value)

    def span(self, data: Mapping[str, Any], key: str, where: str, *, clock: bool = False) -> tuple[float, float]:
        value = data.get(key)
        if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
            self.fail(f"{where}{key}", "must be a pair [low, high]")
            return 0.0, 0.0
        low, high = (
            (self.clock(v, f"{where}{key}") for v in value)
            if clock
            else (self.number({"v": v}, "v", f"{where}{key} ") for v in value)
        )
        if low > high:
            self.fail(f"{where}{key}", f"{value[0]} comes after {value[1]}")
        return low, high

    def clock(self, value: Any, where: str) -> float:
        try:
            hours, minutes = (int(x) for x in str(value).split(":"))
            if not (0 <= hours <= 24 and 0 <= minutes < 60):
                raise ValueError
        except ValueError:
            self.fail(where, f"{value!r} is not a time of day HH:MM")
            return 0.0
        return hours + minutes / 60

    def gpu_amounts(self, value: Any, where: str) -> dict[str, float]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.fail(where, "must map GPU models to GPU-equivalents")
            return {}
        out: dict[str, float] = {}
        for model, amount in value.items():
            if str(model) not in gpus.MODELS:
                self.fail(where, f"{model!r} is not a GPU model of the catalogue")
            out[str(model)] = self.number({"v": amount}, "v", f"{where} {model} ")
        return out


def parse_model(data: Mapping[str, Any], base: Path) -> LabModel:
    """The model in ``data``; ``base`` is the folder relative paths in it start from."""
    r = _Reader()
    if not isinstance(data, Mapping):
        raise ModelError(["the model file must hold a mapping"])
    start = data.get("start")
    if not isinstance(start, date):
        r.fail("start", f"must be a date YYYY-MM-DD, not {start!r}")
        start = date(2027, 2, 1)
    cluster = base / str(data.get("cluster", ""))
    if not cluster.is_file():
        r.fail("cluster", f"no node file at {cluster}")

    teams: list[Team] = []
    depts: list[Department] = []
    departments = data.get("departments")
    if not isinstance(departments, Sequence) or not departments:
        r.fail("departments", "must list at least one department")
        departments = []
    for d in departments:
        dname = str(d.get("name", "")) if isinstance(d, Mapping) else ""
        if not dname:
            r.fail("departments", "every department needs a name")
            continue
        depts.append(Department(dname, r.gpu_amounts(d.get("cap"), f"department {dname} cap")))
        for t in d.get("teams") or []:
            where = f"team {t.get('name', '?')}" if isinstance(t, Mapping) else "teams"
            if not isinstance(t, Mapping) or not t.get("name"):
                r.fail(where, "every team needs a name")
                continue
            teams.append(
                Team(
                    str(t["name"]),
                    dname,
                    int(r.number(t, "researchers", f"{where} ", low=1)),
                    r.gpu_amounts(t.get("guarantee"), f"{where} guarantee"),
                    r.gpu_amounts(t.get("borrow"), f"{where} borrow"),
                )
            )
    if len({t.name for t in teams}) != len(teams):
        r.fail("departments", "team names must be unique")

    rh = r.section(data, "rhythm")
    workdays = rh.get("workdays", [])
    bad_days = [d for d in workdays if d not in DAYS] if isinstance(workdays, list) else [workdays]
    if bad_days:
        r.fail("rhythm workdays", f"{bad_days} are not days ({', '.join(DAYS)})")
    work_from, work_to = r.span(rh, "working_hours", "rhythm ", clock=True)
    rates = r.section(rh, "rates", "rhythm ")
    rhythm = Rhythm(
        frozenset(DAYS.index(d) for d in workdays if d in DAYS) if isinstance(workdays, list) else frozenset(),
        work_from,
        work_to,
        r.clock(rh.get("evening_until", "23:00"), "rhythm evening_until"),
        {p: r.number(rates, p, "rhythm rates ") for p in PERIODS},
    )
    if rhythm.evening_until < rhythm.work_to:
        r.fail("rhythm evening_until", "comes before the end of working hours")

    nb = r.section(data, "notebooks")
    sizes = r.section(nb, "sizes", "notebooks ")
    notebooks = Notebooks(
        r.number(nb, "per_researcher_per_workday", "notebooks "),
        r.span(nb, "morning", "notebooks ", clock=True),
        r.number(nb, "morning_share", "notebooks ", high=1),
        r.span(nb, "session_hours", "notebooks "),
        r.number(nb, "forgotten", "notebooks ", high=1),
        {s: r.number(sizes, s, "notebooks sizes ", default=0) for s in SIZES},
    )
    if sum(notebooks.sizes.values()) <= 0:
        r.fail("notebooks sizes", "at least one size needs a share above 0")
    if notebooks.session_hours[0] <= 0:
        r.fail("notebooks session_hours", "sessions must last more than 0 hours")

    jb = r.section(data, "jobs")
    trace_path = TRACES / str(jb.get("trace", ""))
    if not trace_path.is_file():
        r.fail("jobs trace", f"no pod list at {trace_path}")
    jobs = Jobs(
        r.number(jb, "per_researcher_per_workday", "jobs "), trace_path, r.number(jb, "max_hours", "jobs ", low=0.1)
    )

    mn = r.section(data, "multinode")
    low_nodes, high_nodes = r.span(mn, "nodes", "multinode ")
    multinode = Multinode(
        r.number(mn, "per_week", "multinode "), (int(low_nodes), int(high_nodes)), r.span(mn, "hours", "multinode ")
    )
    if multinode.per_week and multinode.nodes[0] < 1:
        r.fail("multinode nodes", "a multi-node job needs at least 1 node")

    days = int(r.number(data, "days", "", low=1, high=366))
    deadlines = tuple(
        Deadline(
            str(x.get("name", "deadline")),
            int(r.number(x, "week", "deadline ", low=1, high=max(1, -(-days // 7)))),
            r.number(x, "jobs", "deadline ", default=1),
            r.number(x, "notebooks", "deadline ", default=1),
        )
        for x in data.get("deadlines") or []
        if isinstance(x, Mapping)
    )

    idle = r.section(data, "idle")
    arms = tuple(_arm(r, a) for a in data.get("arms") or [])
    if not arms:
        r.fail("arms", "list at least one arm")
    if len({a.name for a in arms}) != len(arms):
        r.fail("arms", "arm names must be unique")
    if r.problems:
        raise ModelError(r.problems)
    return LabModel(
        name=str(data.get("name", "lab")),
        seed=int(data.get("seed", 0)),
        start=datetime(start.year, start.month, start.day, tzinfo=UTC),  # the lab's own clock
        days=days,
        cluster=cluster,
        departments=tuple(depts),
        teams=tuple(teams),
        rhythm=rhythm,
        notebooks=notebooks,
        jobs=jobs,
        multinode=multinode,
        deadlines=deadlines,
        idle=Idle(r.number(idle, "window_minutes", "idle ", low=1) * 60, r.number(idle, "grace_minutes", "idle ") * 60),
        arms=arms,
    )


def _arm(r: _Reader, a: Any) -> Arm:
    if not isinstance(a, Mapping) or not a.get("name"):
        r.fail("arms", "every arm needs a name")
        return Arm("?", "static")
    where = f"arm {a['name']}"
    kind = a.get("kind")
    if kind not in ARM_KINDS:
        r.fail(where, f"kind must be one of {', '.join(ARM_KINDS)}, not {kind!r}")
        return Arm(str(a["name"]), "static")
    if kind == "static":
        return Arm(str(a["name"]), "static")
    offerings: Mapping[str, Any] = a["offerings"] if isinstance(a.get("offerings"), Mapping) else {}
    notebook: Mapping[str, Any] = offerings["notebook"] if isinstance(offerings.get("notebook"), Mapping) else {}
    by_size = {s: tuple(str(x) for x in notebook.get(s) or []) for s in SIZES}
    jobs = tuple(str(x) for x in offerings.get("job") or [])
    for s, slugs in by_size.items():
        if not slugs:
            r.fail(f"{where} offerings notebook {s}", "name at least one offering")
    if not jobs:
        r.fail(f"{where} offerings job", "name at least one offering")
    dynamic = bool(a.get("dynamic_mig", False))
    if dynamic and a.get("whole_gpus_only"):
        r.fail(where, "dynamic_mig needs MIG: it cannot go with whole_gpus_only")
    return Arm(
        str(a["name"]),
        "portal",
        bool(a.get("whole_gpus_only", False)),
        bool(a.get("idle_reclaim", False)),
        by_size,
        jobs,
        dynamic,
        r.number(a, "mig_reconfigure_seconds", f"{where} ", high=600, default=Timings.mig_reconfigure_s),
    )


def load_model(path: Path) -> LabModel:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ModelError([f"cannot read {path}: {exc}"]) from exc
    return parse_model(data, path.parent)
