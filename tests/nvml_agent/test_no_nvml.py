"""Nodes where NVML cannot be read: the agent keeps serving ``gpuportal_nvml_agent_up 0`` (no series the
portal reads), says why once, and picks NVML up when it answers later."""

from __future__ import annotations

import logging

import pynvml
import pytest

from scheduling.nvml_agent.server import Agent
from scheduling.telemetry.dcgm import parse_exposition
from tests.nvml_agent.fake_nvml import FakeNvml, load


def down_page(agent: Agent) -> None:
    page = agent.page()
    assert page.splitlines()[-1] == "gpuportal_nvml_agent_up 0"
    assert parse_exposition(page) == []
    assert not agent.up


@pytest.mark.parametrize(
    ("recording", "said"),
    [
        ("no-driver", "NVIDIA driver not loaded on this node"),
        ("library-not-found", "NVML library not found (libnvidia-ml.so.1)"),
    ],
)
def test_no_driver_serves_up_0_and_says_why_once(recording, said, caplog):
    caplog.set_level(logging.INFO, logger="scheduling.nvml_agent")
    fake = FakeNvml(load(recording))
    agent = Agent(fake, hostname="cpu-node", cache_seconds=0, retry_seconds=0)

    down_page(agent)
    down_page(agent)

    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, "a lasting cause is said once"
    assert said in errors[0].getMessage()
    assert "gpuportal_nvml_agent_up 0 and trying again" in errors[0].getMessage()
    assert fake.calls.count("nvmlInit") == 2, "tried again on the next scrape"


def test_messages_name_each_cause(caplog):
    for code, said in [
        ("NO_PERMISSION", "no permission to use NVML"),
        ("DRIVER_NOT_LOADED", "driver not loaded"),
        ("LIBRARY_NOT_FOUND", "library not found"),
        ("UNKNOWN", "NVML initialisation failed: Unknown Error"),
    ]:
        caplog.clear()
        down_page(Agent(FakeNvml({"init": {"error": code}}), hostname="n"))
        assert [said in r.getMessage() for r in caplog.records] == [True]


def test_the_driver_loading_later_is_picked_up(caplog):
    caplog.set_level(logging.INFO, logger="scheduling.nvml_agent")
    recording = load("two-h100-two-pods")
    fake = FakeNvml(recording)
    fake.init_error = {"error": "DRIVER_NOT_LOADED"}
    now = [0.0]
    agent = Agent(fake, hostname="n", cache_seconds=0, retry_seconds=10, clock=lambda: now[0])
    down_page(agent)

    fake.init_error = None  # the GPU Operator's driver container finished
    now[0] = 5.0
    down_page(agent)  # not retried yet
    now[0] = 10.0
    page = agent.page()

    assert agent.up
    assert "gpuportal_nvml_agent_up 1" in page.splitlines()
    assert "DCGM_FI_DEV_FB_USED{" in page
    assert any("NVML answers again" in r.getMessage() for r in caplog.records)


def test_the_driver_going_away_turns_the_page_down(tmp_path, caplog):
    fake = FakeNvml(load("two-h100-two-pods"))
    agent = Agent(fake, hostname="n", cache_seconds=0, retry_seconds=0, proc=tmp_path, pod_logs=tmp_path)
    assert agent.page().splitlines()[-1] == "gpuportal_nvml_agent_up 1"

    fake.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED))  # type: ignore[method-assign]
    down_page(agent)
    assert "NVML stopped answering (Uninitialized)" in caplog.text
    assert fake.calls[-1] == "nvmlShutdown"
