"""The idle rule (pure): from a workspace's recent samples, whether it is idle, and what to do about it.

A notebook is **idle** when, over the whole idle window, its GPU activity stayed below the threshold (GPU
workspaces), no kernel was busy, and Jupyter saw no user activity. One signal alone is not enough: a busy
kernel with 0 % GPU is CPU preprocessing, an active GPU with no browser connected is a training run in a
notebook. Then: **warn** -> after the grace period, still idle -> **reclaim**. Activity clears a warning.

**Missing data never reclaims**: the window must be covered by samples (no gap longer than ``max_gap``), each
with every figure the rule needs, and GPU figures fresh (observed within ``max_gap`` of their sample). Where it
is not, the verdict is ``unknown``: a warning stands but does not ripen into a reclaim.

Training jobs are never reclaimed for idleness: a job whose GPUs stayed below the threshold for the
policy's window is flagged **possibly stuck**, once, for its owner and lead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import pairwise


class Verdict(StrEnum):
    ACTIVE = "active"
    IDLE = "idle"
    UNKNOWN = "unknown"  # the window is not covered by complete, fresh figures


class Action(StrEnum):
    NONE = "none"
    WARN = "warn"  # idle: start the grace period
    CLEAR = "clear"  # a warned workspace became active (or was kept alive): drop the warning
    RECLAIM = "reclaim"  # warned, the grace period over, still idle: stop it, home volume kept
    FLAG_STUCK = "flag_stuck"  # a training job's GPUs idle for the window: tell its owner and lead


@dataclass(frozen=True)
class Sample:
    at: datetime
    gpu_active: float | None
    gpu_observed_at: datetime | None
    busy_kernels: int | None
    last_activity: datetime | None


@dataclass(frozen=True)
class IdlePolicy:
    threshold: float = 0.05  # GR engine activity below this is idle
    window: timedelta = timedelta(minutes=60)
    grace: timedelta = timedelta(minutes=15)
    stuck_window: timedelta = timedelta(minutes=120)  # training jobs
    max_gap: timedelta = timedelta(seconds=90)  # three 30 s collections


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    why: str  # the figures that led to it, for the workspace's timeline
    peak_gpu_active: float | None = None
    busy_samples: int = 0
    last_activity: datetime | None = None


def span(duration: timedelta) -> str:
    """A policy duration as people read it: "90 min", "2 h", "30 s" (the demo's shortened rules)."""
    seconds = round(duration.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    minutes = seconds // 60
    return f"{minutes // 60} h" if minutes >= 120 and minutes % 60 == 0 else f"{minutes} min"


def _covered(samples: Sequence[Sample], start: datetime, now: datetime, max_gap: timedelta) -> bool:
    if not samples or samples[0].at - start > max_gap or now - samples[-1].at > max_gap:
        return False
    return all(b.at - a.at <= max_gap for a, b in pairwise(samples))


def judge(
    samples: Sequence[Sample], *, now: datetime, window: timedelta, policy: IdlePolicy, has_gpu: bool, notebook: bool
) -> Judgement:
    """Idle, active or unknown over ``window`` before ``now``. ``samples`` in time order; older ones ignored."""
    start = now - window
    recent = [s for s in samples if start <= s.at <= now]
    length = span(window)
    if not _covered(recent, start, now, policy.max_gap):
        return Judgement(Verdict.UNKNOWN, f"Telemetry does not cover the last {length}; nothing is judged.")
    if has_gpu and any(
        s.gpu_active is None or s.gpu_observed_at is None or s.at - s.gpu_observed_at > policy.max_gap for s in recent
    ):
        return Judgement(Verdict.UNKNOWN, "GPU telemetry is missing or stale; nothing is judged.")
    if notebook and any(s.busy_kernels is None or s.last_activity is None for s in recent):
        return Judgement(Verdict.UNKNOWN, "The notebook's own activity could not be read; nothing is judged.")
    peak = max((s.gpu_active for s in recent if s.gpu_active is not None), default=None)
    busy = sum(1 for s in recent if s.busy_kernels)
    last = max((s.last_activity for s in recent if s.last_activity is not None), default=None)
    reasons = []
    if has_gpu and peak is not None and peak >= policy.threshold:
        reasons.append(f"GPU activity reached {peak:.0%}")
    if notebook and busy:
        reasons.append(f"a kernel was busy in {busy} of {len(recent)} samples")
    if notebook and last is not None and last > start:
        reasons.append(f"last user activity {last:%H:%M} UTC")
    if reasons:
        why = f"Active in the last {length}: " + "; ".join(reasons) + "."
        return Judgement(Verdict.ACTIVE, why, peak, busy, last)
    gpu = (
        f"GPU activity at most {peak:.0%} (threshold {policy.threshold:.0%}), " if has_gpu and peak is not None else ""
    )
    kernels = "no kernel busy, no user activity " if notebook else ""
    return Judgement(Verdict.IDLE, f"Idle: {gpu}{kernels}for {length}.", peak, busy, last)


def decide(
    samples: Sequence[Sample],
    *,
    now: datetime,
    policy: IdlePolicy,
    has_gpu: bool,
    notebook: bool,
    warned_at: datetime | None = None,
    kept_alive_until: datetime | None = None,
    flagged_stuck: bool = False,
) -> tuple[Action, Judgement]:
    """What to do now. ``warned_at``: when the current warning was given; ``kept_alive_until``: the owner's
    keep-alive, during which a notebook is not judged idle."""
    if not notebook:
        if not has_gpu:
            return Action.NONE, Judgement(Verdict.UNKNOWN, "A CPU-only job: GPU idleness does not apply.")
        judgement = judge(samples, now=now, window=policy.stuck_window, policy=policy, has_gpu=True, notebook=False)
        stuck = judgement.verdict == Verdict.IDLE and not flagged_stuck
        return (Action.FLAG_STUCK if stuck else Action.NONE), judgement
    if kept_alive_until is not None and now < kept_alive_until:
        judgement = Judgement(Verdict.ACTIVE, f"Kept alive by its owner until {kept_alive_until:%H:%M} UTC.")
        return (Action.CLEAR if warned_at else Action.NONE), judgement
    judgement = judge(samples, now=now, window=policy.window, policy=policy, has_gpu=has_gpu, notebook=True)
    if warned_at is None:
        return (Action.WARN if judgement.verdict == Verdict.IDLE else Action.NONE), judgement
    if judgement.verdict == Verdict.ACTIVE:
        return Action.CLEAR, judgement
    if judgement.verdict == Verdict.IDLE and now >= warned_at + policy.grace:
        return Action.RECLAIM, judgement
    return Action.NONE, judgement  # still in its grace period, or unknown: the warning stands, nothing more
