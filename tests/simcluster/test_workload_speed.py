"""Workloads faster than the clock (``--workload-speed``): job durations, GPU activity and Jupyter's kernel
activity play that many times faster, while every timestamp stays on the (real-time) clock, as the
full-stack lab week needs (``scheduling/benchmarks/lab/stack_week.py``)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from scheduling.simcluster.clock import SimClock, parse_time
from scheduling.simcluster.telemetry import BUSY_ANNOTATION, PROFILE_ANNOTATION
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests.simcluster.conftest import pod_manifest, wait_for, wait_for_phase

WORKLOAD_SPEED = 100.0
TOKEN = "5b1e0c7d9a3f46e28c0d4b7a1e9f3c62"


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_simcluster(
        seed=3, speed=1.0, workload_speed=WORKLOAD_SPEED, tmp_dir=tmp_path_factory.mktemp("fast-workloads")
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def fast_api(fast: SimCluster) -> Iterator[client.ApiClient]:
    api = fast.api_client()
    yield api
    api.close()


def test_the_clock_stretches_a_workload_s_elapsed_time_and_maps_it_back() -> None:
    clock = SimClock(workload_speed=10)
    now = datetime(2027, 2, 1, 9, 0, 10, tzinfo=UTC)
    started = now - timedelta(seconds=10)
    played = clock.workload_start(started, now)
    assert now - played == timedelta(seconds=100)  # 10 s of clock are 100 s of the workload's own time
    assert clock.from_workload(played, now) == started
    assert clock.from_workload(played + timedelta(seconds=50), now) == started + timedelta(seconds=5)
    same = SimClock()
    assert same.workload_start(started, now) == started


def test_a_job_runs_its_duration_in_workload_time(fast_api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(fast_api)
    body = pod_manifest("job")
    body["metadata"]["annotations"] = {"sim.gpuportal.io/duration-seconds": "300"}  # 3 s of the clock
    v1.create_namespaced_pod("default", body)
    try:
        wait_for_phase(v1, "default", "job", "Succeeded", timeout=20)
        state = v1.read_namespaced_pod("job", "default").status.container_statuses[0].state.terminated
        ran = (state.finished_at - state.started_at).total_seconds()
        assert 2 <= ran <= 5, ran  # not 300: the clock is real time, the workload 100 times faster
    finally:
        v1.delete_namespaced_pod("job", "default", grace_period_seconds=0)


def test_gpu_and_jupyter_activity_play_fast_with_timestamps_on_the_clock(
    fast: SimCluster, fast_api: client.ApiClient
) -> None:
    v1 = client.CoreV1Api(fast_api)
    v1.create_namespaced_secret("default", {"metadata": {"name": "nb-token"}, "stringData": {"token": TOKEN}})
    body = pod_manifest("nb", limits={"nvidia.com/gpu": "1"})
    body["metadata"] |= {
        "labels": {"app": "nb"},
        # Works for 100 s of its own time (1 s of the clock), then sits idle.
        "annotations": {PROFILE_ANNOTATION: "idle-notebook", BUSY_ANNOTATION: "100"},
    }
    token = {"name": "JUPYTER_TOKEN", "valueFrom": {"secretKeyRef": {"name": "nb-token", "key": "token"}}}
    body["spec"]["containers"][0]["env"] = [token]
    v1.create_namespaced_pod("default", body)
    service = {"metadata": {"name": "nb"}, "spec": {"selector": {"app": "nb"}, "ports": [{"port": 8888}]}}
    v1.create_namespaced_service("default", service)
    try:
        wait_for_phase(v1, "default", "nb", "Running")
        started = v1.read_namespaced_pod("nb", "default").status.start_time
        time.sleep(3.0)  # 300 s of the workload: at the clock's own pace it would still be working

        def get(path: str) -> Any:
            query = [("token", TOKEN), ("no_track_activity", "1")]  # reading is no activity
            response = fast_api.call_api(
                f"/api/v1/namespaces/default/services/nb:8888/proxy{path}", "GET",
                query_params=query, _preload_content=False, auth_settings=["BearerToken"],
            )[0]  # fmt: skip
            return json.loads(response.data)

        now = datetime.now(UTC)
        [kernel] = get("/api/kernels")
        status = get("/api/status")
        assert kernel["execution_state"] == "idle"
        last = parse_time(kernel["last_activity"])
        # The kernel's last activity ended its 100 s of work: 1 s of the clock after the start, never in the
        # portal's future.
        assert last == started + timedelta(seconds=1) and last <= now
        assert parse_time(status["started"]) == started
        assert parse_time(status["last_activity"]) == last

        def gpu_activity() -> float | None:
            text = urllib.request.urlopen(f"{fast.plain_url}/metrics", timeout=5).read().decode()  # noqa: S310
            for line in text.splitlines():
                if line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") and 'pod="nb"' in line:
                    return float(line.rsplit(" ", 1)[1])
            return None

        assert wait_for(lambda: gpu_activity() is not None, what="the notebook's GPU series")
        activity = gpu_activity()
        assert activity is not None and activity < 0.05  # idle, as its profile is after its work
    finally:
        v1.delete_namespaced_service("nb", "default")
        v1.delete_namespaced_pod("nb", "default", grace_period_seconds=0)
        v1.delete_namespaced_secret("nb-token", "default")
