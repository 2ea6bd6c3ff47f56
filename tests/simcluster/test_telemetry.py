"""dcgm-exporter output and workload profiles against GPU-ON-KUBERNETES.md section 6."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from scheduling.simcluster import device_plugin, node_render, nodes, telemetry
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.telemetry import PodRef

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
DRIVER = "570.172.08"


@pytest.fixture(scope="module")
def demo() -> nodes.ClusterSpec:
    return nodes.load_cluster_file(nodes.default_cluster_file())


def rendered(cluster: nodes.ClusterSpec, name: str) -> node_render.RenderedNode:
    spec = cluster.node(name)
    return node_render.render_node(spec, cluster, mig_config=spec.mig_config, plugin_config=spec.plugin_config)


def pod(name: str, profile: telemetry.WorkloadProfile, started: datetime = T0) -> PodRef:
    return PodRef(
        name=name,
        namespace="team-a",
        container="main",
        uid=f"uid-{name}",
        profile=profile,
        started_at=started,
    )


def scrape(text: str) -> dict[str, list[Sample]]:
    families = list(text_string_to_metric_families(text))
    assert all(f.type == "gauge" for f in families)
    assert all(f.documentation for f in families)
    return {f.name: f.samples for f in families}


def metrics_for(cluster: nodes.ClusterSpec, node: str, holders: dict[DeviceRef, PodRef], at: datetime) -> str:
    r = rendered(cluster, node)
    uses = telemetry.device_uses(node, r.devices, holders)
    return telemetry.render_metrics(uses, at=at, seed=cluster.seed, driver_version=DRIVER)


def test_mig_node_series(demo):
    r = rendered(demo, "gpu-a100-0")
    ref = device_plugin.allocate(r, {"nvidia.com/mig-1g.10gb": 1}, set())
    assert ref is not None
    text = metrics_for(demo, "gpu-a100-0", {ref[0]: pod("nb", "steady-training")}, T0 + timedelta(minutes=30))
    m = scrape(text)
    assert "DCGM_FI_DEV_GPU_UTIL" not in m  # never for MIG (section 6)
    gr = m["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert len(gr) == 32  # 16 x 1g + 8 x 2g + 8 x 3g
    assert all("GPU_I_PROFILE" in s.labels and "GPU_I_ID" in s.labels for s in gr)
    held = [s for s in gr if "pod" in s.labels]
    assert len(held) == 1
    assert held[0].labels["pod"] == "nb"
    assert held[0].labels["namespace"] == "team-a"
    assert held[0].labels["container"] == "main"
    assert held[0].labels["GPU_I_PROFILE"] == "1g.10gb"
    assert held[0].labels["modelName"] == "NVIDIA A100-SXM4-80GB"
    assert held[0].labels["UUID"] == r.devices[0].uuid  # the parent GPU's UUID
    assert held[0].labels["device"] == "nvidia0"
    assert held[0].value > 0.8
    assert all(s.value < 0.01 for s in gr if "pod" not in s.labels)
    power = m["DCGM_FI_DEV_POWER_USAGE"]
    assert len(power) == 8
    assert not any("GPU_I_PROFILE" in s.labels or "pod" in s.labels for s in power)
    busy_gpu = next(s for s in power if s.labels["gpu"] == "0")
    idle_gpu = next(s for s in power if s.labels["gpu"] == "1")
    assert busy_gpu.value > idle_gpu.value
    # FB is per instance: used + free covers the instance's memory.
    fb_used = {(s.labels["gpu"], s.labels["GPU_I_ID"]): s.value for s in m["DCGM_FI_DEV_FB_USED"]}
    fb_free = {(s.labels["gpu"], s.labels["GPU_I_ID"]): s.value for s in m["DCGM_FI_DEV_FB_FREE"]}
    inst = device_plugin.mig_instance(r, ref[0])
    assert inst is not None
    key = ("0", str(inst.gi_id))
    assert fb_used[key] + fb_free[key] == inst.memory_mib
    assert fb_used[key] > 0.8 * inst.memory_mib


def test_whole_gpu_node_series(demo):
    r = rendered(demo, "gpu-h100-0")
    refs = device_plugin.allocate(r, {"nvidia.com/gpu": 2}, set())
    assert refs is not None
    holders = dict.fromkeys(refs, pod("train", "steady-training"))
    m = scrape(metrics_for(demo, "gpu-h100-0", holders, T0 + timedelta(hours=1)))
    util = {s.labels["gpu"]: s for s in m["DCGM_FI_DEV_GPU_UTIL"]}
    assert len(util) == 8
    assert util["0"].value >= 80
    assert util["0"].labels["pod"] == "train"
    assert util["5"].value == 0
    assert "pod" not in util["5"].labels
    assert not any("GPU_I_PROFILE" in s.labels for fam in m.values() for s in fam)
    power = {s.labels["gpu"]: s for s in m["DCGM_FI_DEV_POWER_USAGE"]}
    assert power["1"].labels["pod"] == "train"
    assert power["1"].value > 500
    for s in m["DCGM_FI_DEV_FB_USED"]:
        g = s.labels["gpu"]
        free = next(x.value for x in m["DCGM_FI_DEV_FB_FREE"] if x.labels["gpu"] == g)
        reserved = next(x.value for x in m["DCGM_FI_DEV_FB_RESERVED"] if x.labels["gpu"] == g)
        assert s.value + free + reserved == 81559
    first = util["0"].labels
    assert first["Hostname"] == "gpu-h100-0"
    assert first["DCGM_FI_DRIVER_VERSION"] == DRIVER
    assert first["modelName"] == "NVIDIA H100 80GB HBM3"
    assert first["pci_bus_id"].startswith("00000000:")


def test_time_sliced_gpu_labels_one_pod_and_adds_load(demo):
    r = rendered(demo, "gpu-l40s-0")
    a = pod("a", "steady-training")
    b = pod("b", "steady-training")
    holders = {DeviceRef(0, None, 0): a, DeviceRef(0, None, 1): b}
    m = scrape(metrics_for(demo, "gpu-l40s-0", holders, T0 + timedelta(minutes=5)))
    gpu0 = [s for s in m["DCGM_FI_DEV_GPU_UTIL"] if s.labels["gpu"] == "0"]
    assert len(gpu0) == 1
    assert gpu0[0].labels["pod"] == "a"
    assert gpu0[0].value == 100  # two steady trainers saturate the GPU
    used = next(s.value for s in m["DCGM_FI_DEV_FB_USED"] if s.labels["gpu"] == "0")
    assert 0.8 * 46068 < used <= 0.97 * 46068 + 1  # summed over both pods, capped below the total
    assert r.devices[0].replicas == 4


def test_virtual_gpus_give_every_sharing_pod_its_own_process_figures(demo):
    r = rendered(demo, "gpu-l40s-0")
    busy, idle = pod("busy", "steady-training"), pod("idle", "none")
    uses = telemetry.device_uses("gpu-l40s-0", r.devices, {DeviceRef(0, None, 0): busy, DeviceRef(0, None, 1): idle})
    at = T0 + timedelta(minutes=5)
    m = scrape(telemetry.render_metrics(uses, at=at, seed=demo.seed, driver_version=DRIVER, virtual_gpus=True))
    util = {s.labels["pod"]: s.value for s in m["DCGM_FI_DEV_GPU_UTIL"] if s.labels["gpu"] == "0"}
    assert util["idle"] == 0 and util["busy"] > 85  # each pod's own process
    engine = {s.labels["pod"]: s.value for s in m["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] if s.labels["gpu"] == "0"}
    assert engine["idle"] == engine["busy"] > 0.85  # the device's, for both
    used = {s.labels["pod"]: s.value for s in m["DCGM_FI_DEV_FB_USED"] if s.labels["gpu"] == "0"}
    assert used["idle"] == 0 and used["busy"] > 0.8 * 46068


def test_the_demo_cluster_runs_its_exporter_with_virtual_gpus(demo):
    assert demo.dcgm_virtual_gpus is True


def test_output_is_deterministic_and_changes_over_time(demo):
    holders = {DeviceRef(0): pod("nb", "bursty-notebook")}
    at = T0 + timedelta(minutes=3)
    assert metrics_for(demo, "gpu-h100-0", holders, at) == metrics_for(demo, "gpu-h100-0", holders, at)
    assert metrics_for(demo, "gpu-h100-0", holders, at) != metrics_for(
        demo, "gpu-h100-0", holders, at + timedelta(minutes=1)
    )


def test_help_and_type_lines(demo):
    text = metrics_for(demo, "gpu-h100-0", {}, T0)
    assert "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" in text
    assert "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge" in text
    assert text.endswith("\n")
    assert telemetry.render_metrics([], at=T0, seed=1, driver_version=DRIVER) == ""


def test_lowercase_hostname_label(demo):
    r = rendered(demo, "gpu-h100-0")
    uses = telemetry.device_uses("gpu-h100-0", r.devices, {})
    text = telemetry.render_metrics(uses, at=T0, seed=1, driver_version=DRIVER, hostname_label="hostname")
    samples = scrape(text)["DCGM_FI_DEV_GPU_TEMP"]
    assert all(s.labels["hostname"] == "gpu-h100-0" and "Hostname" not in s.labels for s in samples)


def test_label_values_are_escaped():
    d = node_render.GpuDevice(0, "GPU-x", "T4", "00000000:1B:00.0", None)
    p = PodRef('we"ird\\name', "ns", "c", "u", "none", T0)
    text = telemetry.render_metrics([telemetry.DeviceUse("n", d, None, p)], at=T0, seed=0, driver_version=DRIVER)
    assert scrape(text)["DCGM_FI_DEV_GPU_UTIL"][0].labels["pod"] == 'we"ird\\name'


def test_mig_parent_without_instances_reports_power_only(demo):
    spec = demo.node("gpu-a100-0")
    r = node_render.render_node(spec, demo, mig_config="all-enabled", plugin_config=None)
    uses = telemetry.device_uses("gpu-a100-0", r.devices, {})
    m = scrape(telemetry.render_metrics(uses, at=T0, seed=0, driver_version=DRIVER))
    assert set(m) == {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"}


# --- profiles -------------------------------------------------------------------------------------


def test_profile_for_pod():
    ann = {telemetry.PROFILE_ANNOTATION: "idle-notebook"}
    assert telemetry.profile_for_pod(ann) == "idle-notebook"
    assert telemetry.profile_for_pod({telemetry.PROFILE_ANNOTATION: "bogus"}) == "bursty-notebook"
    assert telemetry.profile_for_pod(None, {"batch.kubernetes.io/job-name": "j"}) == "steady-training"
    assert telemetry.profile_for_pod({}, {}) == "bursty-notebook"


def act(profile: telemetry.WorkloadProfile, minutes: float, uid: str = "u1") -> telemetry.Activity:
    return telemetry.activity(profile, seed=1, pod_uid=uid, started_at=T0, at=T0 + timedelta(minutes=minutes))


def test_idle_notebook_works_then_idles():
    assert act("idle-notebook", 1).busy
    assert act("idle-notebook", 1).gr_engine_active > 0.2
    for minutes in (20, 60, 600):
        a = act("idle-notebook", minutes)
        assert not a.busy
        assert a.gr_engine_active < 0.05  # passes the section 6 idle test
        assert a.fb_fraction > 0.1  # still holds memory


def test_steady_training_and_none():
    for minutes in (0, 30, 900):
        assert act("steady-training", minutes).gr_engine_active > 0.85
        assert act("none", minutes) == telemetry.IDLE
    assert act("steady-training", -1) == telemetry.IDLE


def test_bursty_notebook_has_both_phases():
    samples = [act("bursty-notebook", m / 2) for m in range(8 * 60 * 2)]
    busy = [a for a in samples if a.busy]
    assert 0.05 < len(busy) / len(samples) < 0.6
    assert min(a.gr_engine_active for a in busy) >= 0.4
    assert max(a.gr_engine_active for a in samples if not a.busy) < 0.05


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(telemetry.PROFILES),
    st.floats(min_value=0, max_value=3 * 24 * 3600),
    st.text(min_size=1, max_size=8),
)
def test_last_busy_at_is_consistent_with_activity(profile, seconds, uid):
    now = T0 + timedelta(seconds=seconds)
    last = telemetry.last_busy_at(profile, seed=3, pod_uid=uid, started_at=T0, now=now)
    a = telemetry.activity(profile, seed=3, pod_uid=uid, started_at=T0, at=now)
    if profile in ("none", "gpu-background"):  # its kernel is never busy
        assert last is None and not a.busy
        return
    assert last is not None
    assert T0 <= last <= now
    assert (last == now) == a.busy


def test_cpu_preprocessing_keeps_the_kernel_busy_and_the_gpu_idle():
    for minutes in (1, 45, 300):
        a = act("cpu-preprocessing", minutes)
        assert a.busy and a.gr_engine_active < 0.01 and 0.05 <= a.fb_fraction <= 0.1


def test_gpu_background_works_the_gpu_with_an_idle_kernel():
    for minutes in (1, 45, 300):
        a = act("gpu-background", minutes)
        assert not a.busy and a.gr_engine_active >= 0.6


def test_busy_seconds_sets_when_an_idle_notebook_goes_quiet():
    at = T0 + timedelta(seconds=61)
    quick = telemetry.activity("idle-notebook", seed=1, pod_uid="u1", started_at=T0, at=at, busy_seconds=60)
    default = telemetry.activity("idle-notebook", seed=1, pod_uid="u1", started_at=T0, at=at)
    assert not quick.busy and quick.gr_engine_active < 0.01
    assert default.busy  # works for at least five minutes without the annotation
    last = telemetry.last_busy_at("idle-notebook", seed=1, pod_uid="u1", started_at=T0, now=at, busy_seconds=60)
    assert last == T0 + timedelta(seconds=60)


@pytest.mark.parametrize(
    ("value", "expected"), [("90", 90.0), ("0", 0.0), ("1.5", 1.5), ("", None), ("-3", None), ("soon", None)]
)
def test_busy_seconds_annotation(value, expected):
    assert telemetry.busy_seconds_for_pod({telemetry.BUSY_ANNOTATION: value}) == expected
    assert telemetry.busy_seconds_for_pod(None) is None


@pytest.mark.parametrize("profile", telemetry.PROFILES)
def test_busy_spans_and_mean_activity_agree_with_the_sampled_activity(profile):
    """What the lab-month benchmark integrates instead of sampling is what the exporter would report."""
    start = datetime(2027, 2, 1, 9, tzinfo=UTC)
    hours = 6 * 3600
    spans = telemetry.busy_spans(profile, seed=3, pod_uid="p-1", until=hours)
    busy_mean, quiet_mean = telemetry.MEAN_ACTIVITY[profile]
    inside: list[float] = []
    outside: list[float] = []
    for t in range(15, hours, telemetry.SAMPLE_SECONDS):
        a = telemetry.activity(profile, seed=3, pod_uid="p-1", started_at=start, at=start + timedelta(seconds=t))
        (inside if any(x <= t < y for x, y in spans) else outside).append(a.gr_engine_active)
    assert all(v >= 0.05 for v in inside) and all(v < 0.05 for v in outside)
    if inside:
        assert abs(sum(inside) / len(inside) - busy_mean) < 0.05
    if outside:
        assert abs(sum(outside) / len(outside) - quiet_mean) < 0.005
