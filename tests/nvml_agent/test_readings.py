"""The agent's page for recorded NVML answers, read back through the portal's own dcgm-exporter reader: the
readings the portal expects, MIG instances apart with their profile and id, MIG activity missing (not 0)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduling.nvml_agent import exposition, nvml
from scheduling.nvml_agent.server import Agent
from scheduling.telemetry.dcgm import (
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    DeviceReading,
    device_readings,
    parse_exposition,
    pod_activity,
)
from tests.nvml_agent.fake_nvml import FakeNvml, host_files, load

AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
H100_0 = "GPU-5f0b3c2e-8d1a-4b6f-9e7c-2a1d0c9b8e7f"
H100_1 = "GPU-a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
A100 = "GPU-1d2c3b4a-5f6e-4d7c-8b9a-0f1e2d3c4b5a"


def agent_for(recording, tmp_path, hostname="gpu-node-1") -> tuple[Agent, FakeNvml]:
    fake = FakeNvml(recording)
    proc, pod_logs = host_files(recording, tmp_path)
    return Agent(fake, hostname=hostname, proc=proc, pod_logs=pod_logs, retry_seconds=0), fake


def readings(page: str) -> dict[tuple[str, str], DeviceReading]:
    found = device_readings(parse_exposition(page), AT)
    by_pod = {(r.namespace, r.pod): r for r in found}
    assert len(by_pod) == len(found), "one device per pod in these recordings"
    return by_pod


def test_two_whole_gpus_with_two_pods(tmp_path):
    agent, _ = agent_for(load("two-h100-two-pods"), tmp_path)
    page = agent.page()

    assert readings(page) == {
        ("team-a", "nb-alice"): DeviceReading(
            namespace="team-a",
            pod="nb-alice",
            hostname="gpu-node-1",
            gpu="0",
            uuid=H100_0,
            mig_instance="",
            mig_profile="",
            observed_at=AT,
            gr_engine_active=0.87,
            fb_used_mib=20480,
            fb_free_mib=81559 - 20480,
            gpu_util_percent=87,
        ),
        ("team-b", "train-bob"): DeviceReading(
            namespace="team-b",
            pod="train-bob",
            hostname="gpu-node-1",
            gpu="1",
            uuid=H100_1,
            mig_instance="",
            mig_profile="",
            observed_at=AT,
            gr_engine_active=0.03,
            fb_used_mib=75000,
            fb_free_mib=81559 - 75000,
            gpu_util_percent=3,
        ),
    }
    alice = pod_activity(device_readings(parse_exposition(page), AT))[("team-a", "nb-alice")]
    assert (alice.devices, alice.gr_engine_active, alice.fb_total_mib) == (1, 0.87, 81559)
    # dcgm-exporter's labels and order; one container folder names the container, two leave it empty
    assert (
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="' + H100_0 + '",pci_bus_id="00000000:18:00.0",device="nvidia0",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="550.90.07",'
        'container="notebook",namespace="team-a",pod="nb-alice"} 0.87'
    ) in page.splitlines()
    assert 'container="",namespace="team-b",pod="train-bob"' in page
    # the host service and the exited process add no series of their own: GPU 1 has one label set
    assert sum(1 for n, labels, _ in parse_exposition(page) if n == FB_USED and labels["gpu"] == "1") == 1
    assert "gpuportal_nvml_agent_up 1" in page.splitlines()


def test_mig_instances_are_read_apart_and_their_activity_is_missing(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="scheduling.nvml_agent")
    agent, _ = agent_for(load("a100-mig-1g-1g-3g"), tmp_path, hostname="gpu-node-2")
    page = agent.page()

    assert readings(page) == {
        ("team-c", "nb-carol"): DeviceReading(
            namespace="team-c",
            pod="nb-carol",
            hostname="gpu-node-2",
            gpu="0",
            uuid=A100,  # the parent's, as dcgm-exporter labels MIG series
            mig_instance="9",
            mig_profile="1g.10gb",
            observed_at=AT,
            gr_engine_active=None,  # missing, never 0: the idle rule will not reclaim on it
            fb_used_mib=6150,
            fb_free_mib=9728 - 6150,
            gpu_util_percent=None,
        )
    }
    carol = pod_activity(device_readings(parse_exposition(page), AT))[("team-c", "nb-carol")]
    assert carol.gr_engine_active is None
    assert carol.fb_total_mib == 9728

    samples = parse_exposition(page)
    instances = {(labels["GPU_I_ID"], labels["GPU_I_PROFILE"]) for n, labels, _ in samples if n == FB_USED}
    assert instances == {("2", "3g.40gb"), ("9", "1g.10gb"), ("10", "1g.10gb")}
    assert not [s for s in samples if s[0] in (GR_ENGINE_ACTIVE, GPU_UTIL)]
    assert all("GPU_I_ID" in labels for _, labels, _ in samples), "the MIG parent has no series"

    agent.cache_seconds = 0
    agent.page()
    said = [r.getMessage() for r in caplog.records if "MIG mode" in r.getMessage()]
    assert len(said) == 1, "said once, not on every scrape"
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in said[0] and "never as idle" in said[0]


def test_mig_profile_from_attributes_when_the_name_does_not_say(tmp_path):
    recording = load("a100-mig-1g-1g-3g")
    slots = recording["devices"][0]["mig_devices"]
    for slot in slots[:3]:
        slot["name"] = "NVIDIA A100-SXM4-80GB"
    slots[2]["attributes"].update(sharedDecoderCount=1, sharedJpegCount=1, sharedOfaCount=1)  # a +me instance
    agent, fake = agent_for(recording, tmp_path)

    samples = parse_exposition(agent.page())

    profiles = {labels["GPU_I_ID"]: labels["GPU_I_PROFILE"] for n, labels, _ in samples if n == FB_USED}
    assert profiles == {"2": "3g.40gb", "9": "1g.10gb", "10": "1g.10gb+me"}
    # the profile table is read once per GPU, not once per instance
    assert fake.calls.count("nvmlDeviceGetGpuInstanceProfileInfo") == 17


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("NVIDIA A100-SXM4-80GB MIG 1g.10gb", "1g.10gb"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", "1g.10gb+me"),
        ("NVIDIA H200 MIG 3g.71gb", "3g.71gb"),
        ("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb", "3g.20gb"),  # a compute instance: its GPU instance's profile
        ("MIG 7g.80gb", "7g.80gb"),
        ("NVIDIA A100-SXM4-80GB", ""),
    ],
)
def test_profile_from_name(name, profile):
    assert nvml.profile_from_name(name) == profile


def test_the_page_is_valid_prometheus_text(tmp_path):
    for name in ("two-h100-two-pods", "a100-mig-1g-1g-3g"):
        agent, _ = agent_for(load(name), tmp_path / name)
        families = {f.name: f for f in text_string_to_metric_families(agent.page())}
        assert families["gpuportal_nvml_agent_up"].samples[0].value == 1
        assert all(f.type == "gauge" for f in families.values())


def test_label_values_are_escaped():
    assert exposition.escape('a "b"\\c\nd') == 'a \\"b\\"\\\\c\\nd'
    node = nvml.NodeReading(
        driver_version="550",
        gpus=(
            nvml.Gpu(
                index=0,
                uuid="GPU-x",
                name='odd "name"\\',
                minor_number=None,
                pci_bus_id="",
                memory=nvml.Memory(total_mib=100, used_mib=10, free_mib=90),
                utilization_percent=None,
                processes=(),
                mig=None,
            ),
        ),
    )
    page = exposition.render(node, "node\nx", {})
    families = {f.name: f for f in text_string_to_metric_families(page)}
    labels = families["DCGM_FI_DEV_FB_USED"].samples[0].labels
    assert (labels["modelName"], labels["Hostname"], labels["device"]) == ('odd "name"\\', "node\nx", "nvidia0")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" not in page, "no utilisation, no activity series"


def test_readings_are_cached_for_a_few_seconds(tmp_path):
    now = [100.0]
    agent, fake = agent_for(load("two-h100-two-pods"), tmp_path)
    agent.clock = lambda: now[0]
    agent.page()
    now[0] += 4.9
    agent.page()
    assert fake.calls.count("nvmlDeviceGetCount") == 1
    now[0] += 0.2
    agent.page()
    assert fake.calls.count("nvmlDeviceGetCount") == 2
    assert fake.calls.count("nvmlInit") == 1
    agent.close()
    assert fake.calls[-1] == "nvmlShutdown"


def test_a_lost_gpu_is_left_out_and_the_others_still_count(tmp_path, caplog):
    recording = load("two-h100-two-pods")
    recording["devices"][1]["uuid"] = {"error": "GPU_IS_LOST"}
    agent, _ = agent_for(recording, tmp_path)
    assert set(readings(agent.page())) == {("team-a", "nb-alice")}
    assert any("GPU 1" in r.getMessage() and "lost" in r.getMessage() for r in caplog.records)
