"""Reading dcgm-exporter series as what each pod's GPUs do: the label variants real clusters produce, MIG
instances and time-sliced GPUs, against the simulated exporter's output and hand-written series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduling.simcluster import device_plugin, node_render, nodes, telemetry
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.telemetry import PodRef
from scheduling.telemetry.dcgm import METRICS, device_readings, parse_exposition, pod_activity, workload_of

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def demo() -> nodes.ClusterSpec:
    return nodes.load_cluster_file(nodes.default_cluster_file())


def exporter_text(
    cluster: nodes.ClusterSpec,
    node: str,
    holders: dict[DeviceRef, PodRef],
    hostname_label: Literal["Hostname", "hostname"] = "Hostname",
) -> str:
    spec = cluster.node(node)
    rendered = node_render.render_node(spec, cluster, mig_config=spec.mig_config, plugin_config=spec.plugin_config)
    uses = telemetry.device_uses(node, rendered.devices, holders)
    return telemetry.render_metrics(
        uses, at=T0 + timedelta(hours=2), seed=cluster.seed, driver_version="570", hostname_label=hostname_label
    )


def pod(name: str, profile: telemetry.WorkloadProfile) -> PodRef:
    return PodRef(name=name, namespace="team-a", container="main", uid=f"uid-{name}", profile=profile, started_at=T0)


def test_each_mig_instance_is_its_own_pods_activity(demo: nodes.ClusterSpec) -> None:
    spec = demo.node("gpu-a100-0")
    rendered = node_render.render_node(spec, demo, mig_config=spec.mig_config, plugin_config=spec.plugin_config)
    busy = device_plugin.allocate(rendered, {"nvidia.com/mig-1g.10gb": 1}, set())
    idle = device_plugin.allocate(rendered, {"nvidia.com/mig-1g.10gb": 1}, set(busy or []))
    assert busy and idle
    text = exporter_text(demo, "gpu-a100-0", {busy[0]: pod("trainer", "steady-training"), idle[0]: pod("nb", "none")})
    readings = device_readings(parse_exposition(text), T0)
    assert {(r.pod, r.mig_profile) for r in readings} == {("trainer", "1g.10gb"), ("nb", "1g.10gb")}
    assert all(r.gpu_util_percent is None for r in readings)  # not supported for MIG
    activity = pod_activity(readings)
    assert (activity["team-a", "trainer"].gr_engine_active or 0) > 0.8
    assert activity["team-a", "nb"].gr_engine_active == 0
    assert activity["team-a", "nb"].fb_total_mib == pytest.approx(9856, rel=0.1)  # a 1g.10gb instance, MiB


def test_a_whole_gpu_and_the_lowercase_hostname(demo: nodes.ClusterSpec) -> None:
    text = exporter_text(demo, "gpu-h100-0", {DeviceRef(0): pod("nb", "steady-training")}, hostname_label="hostname")
    (reading,) = device_readings(parse_exposition(text), T0)
    assert (reading.hostname, reading.gpu, reading.mig_instance) == ("gpu-h100-0", "0", "")
    assert reading.gpu_util_percent is not None and reading.gr_engine_active is not None
    assert reading.fb_used_mib is not None and reading.fb_free_mib is not None  # the unheld GPUs are nobody's


def test_a_time_sliced_gpu_is_read_for_the_pod_its_series_name(demo: nodes.ClusterSpec) -> None:
    holders = {DeviceRef(0, None, 0): pod("a", "steady-training"), DeviceRef(0, None, 1): pod("b", "none")}
    activity = pod_activity(device_readings(parse_exposition(exporter_text(demo, "gpu-l40s-0", holders)), T0))
    assert set(activity) == {("team-a", "a")}  # without virtual GPUs, one sharing pod gets the labels


def relabelled(name: str, gpu: int, value: float, *, held: bool = True) -> str:
    """A series as Prometheus stores it behind a ServiceMonitor (honorLabels: false)."""
    labels = f'gpu="{gpu}",UUID="GPU-{gpu}",Hostname="n1",namespace="gpu-operator",pod="nvidia-dcgm-exporter-x"'
    if held:
        labels += ',exported_namespace="team-b",exported_pod="train-0"'
    return f"{name}{{{labels}}} {value}\n"


SERVICE_MONITOR = (
    "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
    + relabelled("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1, 0.5)
    + relabelled("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2, 0.3)
    + relabelled("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 3, 0.9, held=False)
    + "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
    + relabelled("DCGM_FI_DEV_FB_USED", 1, 1000)
    + relabelled("DCGM_FI_DEV_FB_USED", 2, 500)
    + "# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
    + relabelled("DCGM_FI_DEV_FB_FREE", 1, 0)
    + "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
    + relabelled("DCGM_FI_DEV_SM_CLOCK", 1, 1980)
)


def test_exported_labels_name_the_workload_not_the_exporter() -> None:
    activity = pod_activity(device_readings(parse_exposition(SERVICE_MONITOR), T0))
    # GPU 3 is held by no pod: Prometheus gave its series the exporter's own namespace and pod, which match no
    # workspace; what matters is that they are not mixed into the workload's figures.
    assert set(activity) == {("team-b", "train-0"), ("gpu-operator", "nvidia-dcgm-exporter-x")}
    train = activity["team-b", "train-0"]
    assert train.devices == 2
    assert train.gr_engine_active == pytest.approx(0.4)
    assert train.fb_used_mib == 1500
    assert train.fb_total_mib == 1000  # only GPU 1 reported its free memory (0 MiB free counts)


@pytest.mark.parametrize(
    ("labels", "workload"),
    [
        ({"namespace": "a", "pod": "p"}, ("a", "p")),
        ({"pod_namespace": "a", "pod_name": "p"}, ("a", "p")),  # --use-old-namespace
        ({"namespace": "mon", "pod": "exporter", "exported_namespace": "a", "exported_pod": "p"}, ("a", "p")),
        ({"namespace": "mon", "pod": "exporter", "exported_namespace": "a"}, None),  # half a workload: nobody's
        ({"namespace": "a"}, None),
        ({}, None),
    ],
)
def test_workload_of(labels: dict[str, str], workload: tuple[str, str] | None) -> None:
    assert workload_of(labels) == workload


def test_missing_values_and_older_gpus() -> None:
    text = (
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",namespace="a",pod="p"} NaN\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",namespace="a",pod="p"} 37\n'  # no profiling metrics before Volta
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",GPU_I_ID="3",namespace="a",pod="q"} 80\n'  # never trusted on MIG
    )
    activity = pod_activity(device_readings(parse_exposition(text), T0))
    assert activity["a", "p"].gr_engine_active == pytest.approx(0.37)
    assert "q" not in {pod for _, pod in activity}


def test_text_that_is_not_the_exposition_format_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_exposition("<html>502 Bad Gateway</html>\n")


def test_the_fast_parser_reads_what_prometheus_clients_parser_reads(demo: nodes.ClusterSpec) -> None:
    holders = {DeviceRef(0): pod("nb", "steady-training"), DeviceRef(1): pod('we"ird\\name', "none")}
    text = (
        exporter_text(demo, "gpu-h100-0", holders) + 'DCGM_FI_DEV_FB_USED{pod="p",namespace="a\\nb"} 1 1700000000000\n'
    )
    wanted = set(METRICS)
    expected = [
        (s.name, s.labels, s.value) for f in text_string_to_metric_families(text) if f.name in wanted for s in f.samples
    ]
    assert parse_exposition(text) == expected
    assert any(labels.get("pod") == 'we"ird\\name' for _, labels, _ in expected)


VIRTUAL_GPUS = """\
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="a",pod="idle"} 0.7
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="a",pod="idle"} 1
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="a",pod="idle"} 900
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="a",pod="idle"} 30000
DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="b",pod="busy"} 0.7
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="b",pod="busy"} 69
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="b",pod="busy"} 14000
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-s",modelName="NVIDIA L40S",Hostname="n",namespace="b",pod="busy"} 30000
"""


def test_pods_sharing_a_gpu_get_their_own_process_figures_not_the_devices() -> None:
    """--kubernetes-virtual-gpus: both pods report the device; each one's activity is its own GPU_UTIL."""
    activity = pod_activity(device_readings(parse_exposition(VIRTUAL_GPUS), T0))
    idle, busy = activity["a", "idle"], activity["b", "busy"]
    assert idle.gr_engine_active == pytest.approx(0.01) and busy.gr_engine_active == pytest.approx(0.69)
    assert (idle.fb_used_mib, busy.fb_used_mib) == (900, 14000)
    assert idle.fb_total_mib is None  # the free figure is the device's: no own total


def test_a_shared_gpu_without_per_process_figures_gives_no_activity() -> None:
    text = "\n".join(line for line in VIRTUAL_GPUS.splitlines() if "GPU_UTIL" not in line)
    activity = pod_activity(device_readings(parse_exposition(text), T0))
    assert activity["a", "idle"].gr_engine_active is None  # the device's 0.7 is not its own
