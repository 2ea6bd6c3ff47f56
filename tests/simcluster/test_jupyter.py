"""Simulated jupyter_server answers against GPU-ON-KUBERNETES.md section 8."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.simcluster import jupyter, telemetry

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SEED = 11


def parse(ts: str) -> datetime:
    assert ts.endswith("Z")
    return datetime.fromisoformat(ts)


def kernels(profile: telemetry.WorkloadProfile, minutes: float, uid: str = "u") -> list[dict[str, object]]:
    return jupyter.jupyter_kernels(profile, T0, T0 + timedelta(minutes=minutes), SEED, uid)


def status(profile: telemetry.WorkloadProfile, minutes: float, uid: str = "u") -> dict[str, object]:
    return jupyter.jupyter_status(profile, T0, T0 + timedelta(minutes=minutes), SEED, uid)


def test_idle_notebook_after_two_hours():
    now = T0 + timedelta(hours=2)
    [k] = kernels("idle-notebook", 120)
    assert set(k) == {"id", "name", "last_activity", "execution_state", "connections"}
    assert k["name"] == "python3"
    assert k["execution_state"] == "idle"
    assert k["connections"] == 0
    assert now - parse(str(k["last_activity"])) > timedelta(hours=1, minutes=30)
    s = status("idle-notebook", 120)
    assert s == {
        "started": "2026-03-02T09:00:00Z",
        "last_activity": k["last_activity"],
        "kernels": 1,
        "connections": 0,
    }


def test_idle_notebook_is_busy_at_first():
    [k] = kernels("idle-notebook", 2)
    assert k["execution_state"] == "busy"
    assert parse(str(k["last_activity"])) == T0 + timedelta(minutes=2)


def test_steady_training_is_busy_now():
    [k] = kernels("steady-training", 300)
    assert k["execution_state"] == "busy"
    assert parse(str(k["last_activity"])) == T0 + timedelta(minutes=300)
    assert status("steady-training", 300)["connections"] == 1


def test_bursty_notebook_is_sometimes_busy_and_recently_active():
    states = []
    for minute in range(1, 8 * 60, 3):
        now = T0 + timedelta(minutes=minute)
        [k] = kernels("bursty-notebook", minute)
        states.append(k["execution_state"])
        last = parse(str(k["last_activity"]))
        assert last <= now
        if k["execution_state"] == "busy":
            assert last == now
        # the next burst comes within a few 20-minute windows, so activity stays fairly recent
        assert now - last < timedelta(hours=3)
    assert "busy" in states
    assert "idle" in states


def test_none_profile_has_no_kernels():
    assert kernels("none", 60) == []
    assert status("none", 60) == {
        "started": "2026-03-02T09:00:00Z",
        "last_activity": "2026-03-02T09:00:00Z",
        "kernels": 0,
        "connections": 0,
    }


def test_no_kernel_before_it_starts():
    assert kernels("steady-training", 0.1) == []
    assert status("steady-training", 0.1)["kernels"] == 0


@pytest.mark.parametrize("profile", ["idle-notebook", "bursty-notebook", "steady-training"])
def test_kernel_state_matches_gpu_activity(profile):
    for minute in range(1, 6 * 60, 7):
        [k] = kernels(profile, minute, uid="pod-1")
        a = telemetry.activity(profile, seed=SEED, pod_uid="pod-1", started_at=T0, at=T0 + timedelta(minutes=minute))
        assert (k["execution_state"] == "busy") == a.busy
        if not a.busy:
            assert a.gr_engine_active < 0.05


def test_deterministic_ids_and_timestamps():
    a = kernels("bursty-notebook", 90, uid="x")
    assert a == kernels("bursty-notebook", 90, uid="x")
    assert a[0]["id"] != kernels("bursty-notebook", 90, uid="y")[0]["id"]
    assert jupyter.isoformat(datetime(2026, 1, 1, 12, 0, 0, 500, tzinfo=UTC)) == "2026-01-01T12:00:00.000500Z"


def test_status_last_activity_is_the_latest_of_start_and_kernels():
    for minute in (1, 30, 200):
        s = status("bursty-notebook", minute)
        [k] = kernels("bursty-notebook", minute)
        assert parse(str(s["last_activity"])) == max(T0, parse(str(k["last_activity"])))


def test_cpu_preprocessing_kernel_is_busy_with_a_browser():
    [k] = kernels("cpu-preprocessing", 90)
    assert k["execution_state"] == "busy" and k["connections"] == 1
    assert parse(str(k["last_activity"])) == T0 + timedelta(minutes=90)


def test_gpu_background_kernel_is_idle_without_a_browser():
    [k] = kernels("gpu-background", 90)
    assert k["execution_state"] == "idle" and k["connections"] == 0
    assert parse(str(k["last_activity"])) == T0 + jupyter.KERNEL_START_DELAY
    assert status("gpu-background", 90)["connections"] == 0


def test_busy_seconds_freezes_last_activity_early():
    [k] = jupyter.jupyter_kernels("idle-notebook", T0, T0 + timedelta(minutes=5), SEED, "u", 60)
    assert k["execution_state"] == "idle"
    assert parse(str(k["last_activity"])) == T0 + timedelta(seconds=60)
