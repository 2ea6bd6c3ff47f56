"""The idle rule: several signals together, warn then reclaim after the grace period, never on missing or
stale data; training jobs flagged, never reclaimed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.telemetry.idle_rule import Action, IdlePolicy, Judgement, Sample, Verdict, decide, judge, span

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
POLICY = IdlePolicy()  # 5 %, 60 min window, 15 min grace, 120 min for jobs, 90 s gaps
LONG_AGO = NOW - timedelta(hours=5)


def series(
    minutes: int = 70,
    *,
    gpu: float | None = 0.01,
    busy: int | None = 0,
    last: datetime | None = LONG_AGO,
    every: int = 30,
    stale_by: timedelta = timedelta(0),
) -> list[Sample]:
    """Samples every ``every`` seconds over the last ``minutes``."""
    ats = [NOW - timedelta(seconds=s) for s in range(minutes * 60, -1, -every)]
    return [Sample(at, gpu, None if gpu is None else at - stale_by, busy, last) for at in ats]


def notebook(
    samples: list[Sample], *, warned_at: datetime | None = None, kept_alive_until: datetime | None = None
) -> tuple[Action, Judgement]:
    return decide(
        samples,
        now=NOW,
        policy=POLICY,
        has_gpu=True,
        notebook=True,
        warned_at=warned_at,
        kept_alive_until=kept_alive_until,
    )


def test_an_idle_notebook_is_warned_then_reclaimed_after_the_grace_period() -> None:
    action, judgement = notebook(series())
    assert action == Action.WARN
    assert "at most 1%" in judgement.why
    assert notebook(series(), warned_at=NOW - timedelta(minutes=10))[0] == Action.NONE  # still in grace
    assert notebook(series(), warned_at=NOW - timedelta(minutes=15))[0] == Action.RECLAIM


@pytest.mark.parametrize(
    ("samples", "why"),
    [
        (series(busy=1), "a kernel was busy"),  # CPU preprocessing: 0 % GPU, busy kernel
        (series(gpu=0.4), "GPU activity reached 40%"),  # training with no browser connected
        (series(last=NOW - timedelta(minutes=20)), "last user activity"),
    ],
)
def test_any_one_signal_of_use_keeps_a_notebook(samples: list[Sample], why: str) -> None:
    action, judgement = notebook(samples)
    assert action == Action.NONE and why in judgement.why
    assert notebook(samples, warned_at=NOW - timedelta(hours=1))[0] == Action.CLEAR  # and lifts a warning


@pytest.mark.parametrize(
    "samples",
    [
        series(gpu=None),  # the source was down
        series(stale_by=timedelta(minutes=5)),  # figures Prometheus kept answering from an old scrape
        series(busy=None),  # Jupyter did not answer
        series(minutes=40),  # not watched for the whole window yet
        series()[:60] + series()[80:],  # a 10 min gap in collection
        series()[:-10],  # nothing collected for the last 5 min
        [],
    ],
)
def test_missing_or_stale_telemetry_never_warns_nor_reclaims(samples: list[Sample]) -> None:
    action, judgement = notebook(samples)
    assert action == Action.NONE and judgement.verdict == Verdict.UNKNOWN
    assert notebook(samples, warned_at=NOW - timedelta(hours=2))[0] == Action.NONE  # the warning stands, no more


def test_keep_alive_postpones_and_lifts_the_warning() -> None:
    kept = NOW + timedelta(hours=1)
    assert notebook(series(), kept_alive_until=kept)[0] == Action.NONE
    assert notebook(series(), kept_alive_until=kept, warned_at=NOW - timedelta(hours=1))[0] == Action.CLEAR
    assert notebook(series(), kept_alive_until=NOW - timedelta(seconds=1))[0] == Action.WARN  # it ran out


def test_a_cpu_only_notebook_is_judged_on_its_kernels_and_activity() -> None:
    cpu = series(gpu=None)
    assert decide(cpu, now=NOW, policy=POLICY, has_gpu=False, notebook=True)[0] == Action.WARN
    assert decide(series(gpu=None, busy=1), now=NOW, policy=POLICY, has_gpu=False, notebook=True)[0] == Action.NONE


def test_a_training_job_is_flagged_once_never_reclaimed() -> None:
    idle = series(minutes=130, busy=None, last=None)
    action, judgement = decide(idle, now=NOW, policy=POLICY, has_gpu=True, notebook=False)
    assert action == Action.FLAG_STUCK and judgement.verdict == Verdict.IDLE
    assert decide(idle, now=NOW, policy=POLICY, has_gpu=True, notebook=False, flagged_stuck=True)[0] == Action.NONE
    # an hour of idle GPUs is not yet the job's window
    assert decide(series(busy=None, last=None), now=NOW, policy=POLICY, has_gpu=True, notebook=False)[0] == Action.NONE
    busy_job = series(minutes=130, gpu=0.9, busy=None, last=None)
    assert decide(busy_job, now=NOW, policy=POLICY, has_gpu=True, notebook=False)[0] == Action.NONE


def test_the_threshold_and_window_are_the_policys() -> None:
    strict = IdlePolicy(threshold=0.5, window=timedelta(minutes=30))
    judgement = judge(
        series(minutes=31, gpu=0.3), now=NOW, window=strict.window, policy=strict, has_gpu=True, notebook=True
    )
    assert judgement.verdict == Verdict.IDLE and judgement.peak_gpu_active == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("duration", "words"),
    [(timedelta(seconds=30), "30 s"), (timedelta(minutes=15), "15 min"), (timedelta(minutes=90), "90 min"),
     (timedelta(hours=2), "2 h"), (timedelta(seconds=4), "4 s")],
)  # fmt: skip
def test_span_reads_as_people_write_durations(duration: timedelta, words: str) -> None:
    assert span(duration) == words
