"""Simulated GPU nodes against GPU-ON-KUBERNETES.md sections 1-3 and the 1.34 Node schema."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import kubernetes_validate
import pytest

from scheduling.simcluster import device_plugin, node_objects, node_render, nodes
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.nodes import ClusterFileError, NodeSpec

CREATED = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def demo():
    return nodes.load_cluster_file(nodes.default_cluster_file())


def render(cluster: nodes.ClusterSpec, name: str, **kw: Any) -> node_render.RenderedNode:
    spec = cluster.node(name)
    kw.setdefault("mig_config", spec.mig_config)
    kw.setdefault("plugin_config", spec.plugin_config)
    return node_render.render_node(spec, cluster, **kw)


def gpu_resources(resources: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in resources.items() if k.startswith("nvidia.com/")}


def assert_valid(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, "1.34.0", strict=True)


def test_demo_cluster_shape(demo):
    assert [n.name for n in demo.nodes] == [
        "gpu-h100-0",
        "gpu-h100-1",
        "gpu-a100-0",
        "gpu-h200-0",
        "gpu-l40s-0",
        "cpu-0",
        "cpu-1",
    ]
    allocatable = {n.name: gpu_resources(render(demo, n.name).allocatable) for n in demo.nodes}
    assert allocatable == {
        "gpu-h100-0": {"nvidia.com/gpu": "8"},
        "gpu-h100-1": {"nvidia.com/gpu": "8"},
        "gpu-a100-0": {
            "nvidia.com/mig-1g.10gb": "16",
            "nvidia.com/mig-2g.20gb": "8",
            "nvidia.com/mig-3g.40gb": "8",
        },
        "gpu-h200-0": {"nvidia.com/mig-1g.18gb": "56"},
        "gpu-l40s-0": {"nvidia.com/gpu": "16"},
        "cpu-0": {},
        "cpu-1": {},
    }


def test_every_demo_node_validates_against_the_strict_schema(demo):
    objs = node_objects.build_cluster_nodes(demo, created=CREATED)
    assert len(objs) == len(demo.nodes)
    for obj in objs:
        assert_valid(obj)


def test_gpu_nodes_are_tainted_and_cpu_nodes_are_not(demo):
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert render(demo, "gpu-h100-0").taints == (taint,)
    assert render(demo, "cpu-0").taints == ()
    # A GPU node without a taints key gets the default one.
    spec = nodes.parse_cluster(
        {"nodes": [{"name": "g", "cpu": 8, "memory": "64Gi", "gpu": {"model": "T4", "count": 1}}]}
    )
    assert spec.nodes[0].taints == (taint,)


def test_a100_all_balanced_labels_match_the_gfd_example(demo):
    """Section 2: A100-SXM4-80GB x8, mixed strategy, all-balanced."""
    r = render(demo, "gpu-a100-0")
    expected = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": "8",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-balanced",
        "nvidia.com/mig.config.state": "success",
        "nvidia.com/mig-1g.10gb.count": "16",
        "nvidia.com/mig-1g.10gb.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        "nvidia.com/mig-1g.10gb.multiprocessors": "14",
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-1g.10gb.slices.ci": "1",
        "nvidia.com/mig-1g.10gb.replicas": "1",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "none",
        "nvidia.com/mig-2g.20gb.count": "8",
        "nvidia.com/mig-3g.40gb.count": "8",
        "nvidia.com/mig-3g.40gb.multiprocessors": "42",
        "kubernetes.io/hostname": "gpu-a100-0",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    assert {k: r.labels.get(k) for k in expected} == expected
    assert int(r.labels["nvidia.com/mig-1g.10gb.memory"]) < 10 * 1024  # "less than 10 GiB"
    assert r.capacity["nvidia.com/mig-1g.10gb"] == "16"
    assert "nvidia.com/gpu" not in r.capacity
    assert r.labels["nvidia.com/cuda.driver-version.full"] == "570.172.08"
    assert r.labels["nvidia.com/cuda.runtime-version.full"] == "12.8"


def test_whole_gpu_h100_node_labels(demo):
    r = render(demo, "gpu-h100-0")
    assert r.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert r.labels["nvidia.com/gpu.memory"] == "81559"
    assert r.labels["nvidia.com/gpu.replicas"] == "1"
    assert r.labels["nvidia.com/gpu.sharing-strategy"] == "none"
    assert r.labels["nvidia.com/gpu.family"] == "hopper"
    assert r.labels["nvidia.com/mig.config"] == "all-disabled"
    assert not any(k.startswith("nvidia.com/mig-") for k in r.labels)
    assert "nvidia.com/device-plugin.config" not in r.labels
    assert all(d.mig is None for d in r.devices)


def test_time_sliced_l40s_node(demo):
    r = render(demo, "gpu-l40s-0")
    assert r.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert r.labels["nvidia.com/gpu.replicas"] == "4"
    assert r.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert r.labels["nvidia.com/gpu.family"] == "ada-lovelace"
    assert r.labels["nvidia.com/mig.capable"] == "false"
    assert r.labels["nvidia.com/device-plugin.config"] == "ts-4"
    assert "nvidia.com/mig.strategy" not in r.labels
    assert "nvidia.com/mig.config" not in r.labels
    assert r.allocatable["nvidia.com/gpu"] == "16"
    assert r.capacity["nvidia.com/gpu"] == "16"


def test_time_sliced_h100_matches_the_facts_example(demo):
    """Section 2: H100 80GB HBM3 x8, time-slicing replicas 4 -> allocatable 32."""
    r = render(demo, "gpu-h100-0", plugin_config="ts-4")
    assert r.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert r.labels["nvidia.com/gpu.count"] == "8"
    assert r.labels["nvidia.com/gpu.replicas"] == "4"
    assert r.labels["nvidia.com/device-plugin.config"] == "ts-4"
    assert r.allocatable["nvidia.com/gpu"] == "32"


def test_rename_by_default_uses_the_shared_resource(demo):
    r = render(demo, "gpu-l40s-0", plugin_config="ts-4-renamed")
    assert r.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    assert gpu_resources(r.allocatable) == {"nvidia.com/gpu.shared": "16"}


def test_unknown_or_removed_plugin_config_falls_back_to_the_default(demo):
    for value in (None, "no-such-config"):
        r = render(demo, "gpu-l40s-0", plugin_config=value)
        assert r.allocatable["nvidia.com/gpu"] == "4"
        assert r.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S"
    assert (
        render(demo, "gpu-l40s-0", plugin_config="no-such-config").labels["nvidia.com/device-plugin.config"]
        == "no-such-config"
    )


def test_all_1g_10gb_on_an_a100_node_gives_56(demo):
    r = render(demo, "gpu-a100-0", mig_config="all-1g.10gb")
    assert gpu_resources(r.allocatable) == {"nvidia.com/mig-1g.10gb": "56"}
    assert r.labels["nvidia.com/mig-1g.10gb.count"] == "56"
    assert all(len(d.mig or ()) == 7 for d in r.devices)


def test_h200_all_1g_18gb(demo):
    r = render(demo, "gpu-h200-0")
    assert r.labels["nvidia.com/gpu.product"] == "NVIDIA-H200"
    assert r.labels["nvidia.com/mig-1g.18gb.multiprocessors"] == "16"
    assert r.labels["nvidia.com/mig-1g.18gb.count"] == "56"


def test_me_profile_resource_and_labels(demo):
    r = render(demo, "gpu-a100-0", mig_config="all-1g.10gb.me")
    assert gpu_resources(r.allocatable) == {"nvidia.com/mig-1g.10gb.me": "8"}
    assert r.labels["nvidia.com/mig-1g.10gb.me.count"] == "8"
    assert r.labels["nvidia.com/mig-1g.10gb.me.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me"


def test_all_enabled_and_disabled_on_a_mig_node(demo):
    on = render(demo, "gpu-a100-0", mig_config="all-enabled")
    assert gpu_resources(on.allocatable) == {}
    assert on.labels["nvidia.com/gpu.replicas"] == "0"
    off = render(demo, "gpu-a100-0", mig_config="all-disabled")
    assert gpu_resources(off.allocatable) == {"nvidia.com/gpu": "8"}
    assert off.labels["nvidia.com/gpu.replicas"] == "1"


def test_custom_mig_config_from_the_cluster_file(demo):
    r = render(demo, "gpu-h100-0", mig_config="half-3g")
    assert gpu_resources(r.allocatable) == {"nvidia.com/gpu": "4", "nvidia.com/mig-3g.40gb": "8"}
    assert [d.mig is None for d in r.devices] == [True] * 4 + [False] * 4
    assert r.labels["nvidia.com/gpu.replicas"] == "1"  # some GPUs are still whole
    assert_valid(node_objects.build_node_object(demo.node("gpu-h100-0"), r, created=CREATED))


def test_mig_change_keeps_vanished_resources_at_zero(demo):
    before = render(demo, "gpu-a100-0")
    after = render(
        demo, "gpu-a100-0", mig_config="all-1g.10gb", previous_resources=node_render.extended_resources(before)
    )
    assert gpu_resources(after.capacity) == {
        "nvidia.com/mig-1g.10gb": "56",
        "nvidia.com/mig-2g.20gb": "0",
        "nvidia.com/mig-3g.40gb": "0",
    }


def test_pending_mig_change_labels(demo):
    r = render(demo, "gpu-a100-0", mig_config_label="all-1g.10gb", mig_config_state="pending")
    assert r.labels["nvidia.com/mig.config"] == "all-1g.10gb"
    assert r.labels["nvidia.com/mig.config.state"] == "pending"
    assert r.mig_config == "all-balanced"
    assert r.allocatable["nvidia.com/mig-3g.40gb"] == "8"
    assert set(node_render.paused_operand_labels().values()) == {"paused-for-mig-change"}
    assert "nvidia.com/gpu.deploy.device-plugin" in node_render.paused_operand_labels()


@pytest.mark.parametrize(
    ("node", "config", "error"),
    [
        ("gpu-a100-0", "no-such-config", "has no entry"),
        ("gpu-a100-0", "all-1g.5gb", "has no entry"),
        ("gpu-l40s-0", "all-balanced", "does not support MIG"),
        ("cpu-0", "all-1g.10gb", "no GPUs"),
    ],
)
def test_mig_config_errors(demo, node, config, error):
    msg = nodes.mig_config_error(demo.node(node), demo, config)
    assert msg is not None
    assert error in msg


@pytest.mark.parametrize(
    ("node", "config"),
    [
        ("gpu-a100-0", "all-balanced"),
        ("gpu-a100-0", "all-7g.80gb"),
        ("gpu-h100-0", "all-1g.10gb"),
        ("gpu-h200-0", "all-disabled"),
        ("gpu-l40s-0", "all-disabled"),
        ("gpu-h100-0", "half-3g"),
    ],
)
def test_mig_configs_that_apply(demo, node, config):
    assert nodes.mig_config_error(demo.node(node), demo, config) is None


def test_lost_gpus_leave_allocatable_but_not_capacity(demo):
    r = render(demo, "gpu-h100-0", lost_gpus=frozenset({0, 3}))
    assert r.capacity["nvidia.com/gpu"] == "8"
    assert r.allocatable["nvidia.com/gpu"] == "6"
    mig = render(demo, "gpu-a100-0", lost_gpus=frozenset({1}))
    assert mig.allocatable["nvidia.com/mig-1g.10gb"] == "14"
    assert mig.allocatable["nvidia.com/mig-3g.40gb"] == "7"
    assert mig.capacity["nvidia.com/mig-3g.40gb"] == "8"
    ts = render(demo, "gpu-l40s-0", lost_gpus=frozenset({2}))
    assert ts.allocatable["nvidia.com/gpu"] == "12"
    assert node_render.lose_gpu(render(demo, "gpu-a100-0"), 1).allocatable == mig.allocatable


def test_uuids_are_deterministic_and_unique(demo):
    a = render(demo, "gpu-a100-0")
    b = render(demo, "gpu-a100-0")
    assert a.devices == b.devices
    uuids = [d.uuid for d in a.devices] + [i.uuid for d in a.devices for i in d.mig or ()]
    assert len(set(uuids)) == len(uuids)
    assert all(u.startswith("GPU-") for u in uuids[:8])
    assert all(u.startswith("MIG-") for u in uuids[8:])
    for d in a.devices:
        ids = [i.gi_id for i in d.mig or ()]
        assert len(set(ids)) == len(ids)
    other = replace(demo, seed=demo.seed + 1)
    assert render(other, "gpu-a100-0").devices[0].uuid != a.devices[0].uuid


@pytest.mark.parametrize(
    ("node", "kw"),
    [
        ("gpu-a100-0", {"mig_config": "all-1g.10gb"}),
        ("gpu-a100-0", {"mig_config": "all-1g.10gb.me"}),
        ("gpu-a100-0", {"mig_config": "all-enabled"}),
        ("gpu-h200-0", {"mig_config": "all-balanced"}),
        ("gpu-h100-0", {"plugin_config": "ts-4"}),
        ("gpu-l40s-0", {"plugin_config": "ts-4-renamed"}),
        ("gpu-h100-1", {"lost_gpus": frozenset({5})}),
        ("gpu-a100-0", {"mig_config_label": "all-7g.80gb", "mig_config_state": "pending"}),
    ],
)
@pytest.mark.parametrize(("ready", "unschedulable"), [(True, False), (False, True)])
def test_nodes_validate_after_changes(demo, node, kw, ready, unschedulable):
    spec = demo.node(node)
    obj = node_objects.build_node_object(
        spec,
        render(demo, node, **kw),
        created=CREATED,
        ready=ready,
        unschedulable=unschedulable,
        heartbeat="2026-01-01T01:00:00Z",
    )
    assert_valid(obj)
    assert obj["spec"].get("unschedulable", False) is unschedulable
    cond = {c["type"]: c for c in obj["status"]["conditions"]}
    assert cond["Ready"]["status"] == ("True" if ready else "False")
    assert {"MemoryPressure", "DiskPressure", "PIDPressure"} <= cond.keys()
    taint_keys = {t["key"] for t in obj["spec"]["taints"]}
    assert ("node.kubernetes.io/unschedulable" in taint_keys) is unschedulable
    assert ("node.kubernetes.io/not-ready" in taint_keys) is (not ready)


def test_node_object_shape(demo):
    spec = demo.node("gpu-h100-0")
    obj = node_objects.build_node_object(spec, render(demo, "gpu-h100-0"), created=CREATED)
    info = obj["status"]["nodeInfo"]
    assert info["kubeletVersion"].startswith("v1.34.")
    assert info["containerRuntimeVersion"].startswith("containerd://")
    assert info["architecture"] == "amd64"
    assert obj["status"]["addresses"][0]["type"] == "InternalIP"
    assert obj["status"]["addresses"][0]["address"].startswith("10.0.")
    assert obj["status"]["capacity"]["cpu"] == "224"
    assert obj["status"]["capacity"]["memory"] == f"{2 * 1024**3}Ki"
    assert obj["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "dgx-h100"
    assert node_objects.build_node_object(spec, render(demo, "gpu-h100-0"), created=CREATED) == obj


def test_allocatable_is_below_capacity(demo):
    r = render(demo, "gpu-h100-0")
    assert r.allocatable["cpu"].endswith("m")
    assert int(r.allocatable["cpu"][:-1]) < 224 * 1000
    assert int(r.allocatable["memory"][:-2]) < int(r.capacity["memory"][:-2])


# --- allocation -----------------------------------------------------------------------------------


def test_allocate_whole_gpus_lowest_free_first(demo):
    r = render(demo, "gpu-h100-0")
    got = device_plugin.allocate(r, {"nvidia.com/gpu": 2, "cpu": 8}, set())
    assert got == [DeviceRef(0), DeviceRef(1)]
    got = device_plugin.allocate(r, {"nvidia.com/gpu": 2}, {DeviceRef(0), DeviceRef(2)})
    assert got == [DeviceRef(1), DeviceRef(3)]
    assert device_plugin.allocate(r, {"nvidia.com/gpu": 9}, set()) is None
    assert device_plugin.allocate(r, {"nvidia.com/mig-1g.10gb": 1}, set()) is None
    assert device_plugin.allocate(r, {"cpu": 4}, set()) == []
    assert device_plugin.visible_devices(r, [DeviceRef(0), DeviceRef(1)]) == f"{r.devices[0].uuid},{r.devices[1].uuid}"
    assert device_plugin.visible_devices(r, []) == "void"


def test_allocate_skips_lost_gpus(demo):
    r = render(demo, "gpu-h100-0", lost_gpus=frozenset({0}))
    assert device_plugin.allocate(r, {"nvidia.com/gpu": 1}, set()) == [DeviceRef(1)]


def test_allocate_mig_instances(demo):
    r = render(demo, "gpu-a100-0")
    first = device_plugin.allocate(r, {"nvidia.com/mig-3g.40gb": 1}, set())
    assert first is not None
    inst = device_plugin.mig_instance(r, first[0])
    assert inst is not None
    assert (first[0].gpu_index, inst.profile) == (0, "3g.40gb")
    used = set(first)
    for _ in range(7):
        nxt = device_plugin.allocate(r, {"nvidia.com/mig-3g.40gb": 1}, used)
        assert nxt is not None
        used |= set(nxt)
    assert device_plugin.allocate(r, {"nvidia.com/mig-3g.40gb": 1}, used) is None
    two = device_plugin.allocate(r, {"nvidia.com/mig-1g.10gb": 2}, set())
    assert two is not None
    assert len(set(two)) == 2
    assert device_plugin.device_id(r, two[0]).startswith("MIG-")


def test_allocate_time_sliced_replicas_spread_over_gpus(demo):
    r = render(demo, "gpu-l40s-0")
    used: set[DeviceRef] = set()
    order = []
    for _ in range(16):
        got = device_plugin.allocate(r, {"nvidia.com/gpu": 1}, used)
        assert got is not None
        used |= set(got)
        order.append(got[0].gpu_index)
    assert order[:4] == [0, 1, 2, 3]
    assert sorted(order) == sorted([0, 1, 2, 3] * 4)
    assert device_plugin.allocate(r, {"nvidia.com/gpu": 1}, used) is None
    ref = next(iter(used))
    assert device_plugin.device_id(r, ref) == f"{r.devices[ref.gpu_index].uuid}::{ref.replica}"


def test_shared_request_greater_than_one_fails_admission(demo):
    r = render(demo, "gpu-l40s-0")
    msg = device_plugin.admission_error(r, {"nvidia.com/gpu": 2})
    assert msg is not None
    assert "maximum request size for shared resources is 1" in msg
    assert device_plugin.admission_error(r, {"nvidia.com/gpu": 1}) is None
    assert device_plugin.admission_error(render(demo, "gpu-h100-0"), {"nvidia.com/gpu": 4}) is None


# --- cluster file ---------------------------------------------------------------------------------


def test_plugin_config_forms():
    c = nodes.parse_cluster(
        {
            "devicePlugin": {
                "configs": {
                    "short": {"replicas": 2, "renameByDefault": True},
                    "mps": {
                        "version": "v1",
                        "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}},
                    },
                    "mig-ts": {
                        "version": "v1",
                        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}},
                    },
                }
            },
            "nodes": [],
        }
    )
    assert c.plugin_configs["short"] == nodes.PluginConfig(replicas=2, rename_by_default=True)
    mps = c.plugin_configs["mps"]
    assert (mps.strategy, mps.replicas, mps.fail_requests_greater_than_one) == ("mps", 3, True)
    assert c.plugin_configs["mig-ts"].mig_replicas == {"1g.10gb": 2}


def test_time_sliced_mig_profile():
    c = nodes.parse_cluster(
        {
            "devicePlugin": {
                "configs": {
                    "mig-ts": {
                        "version": "v1",
                        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}},
                    }
                }
            },
            "nodes": [
                {
                    "name": "a",
                    "cpu": 64,
                    "memory": "512Gi",
                    "gpu": {"model": "A100-SXM4-80GB", "count": 1},
                    "migConfig": "all-balanced",
                    "pluginConfig": "mig-ts",
                }
            ],
        }
    )
    r = node_render.render_node(c.nodes[0], c, mig_config="all-balanced", plugin_config="mig-ts")
    assert r.allocatable["nvidia.com/mig-1g.10gb"] == "4"
    assert r.labels["nvidia.com/mig-1g.10gb.replicas"] == "2"
    assert r.labels["nvidia.com/mig-1g.10gb.sharing-strategy"] == "time-slicing"
    assert r.labels["nvidia.com/mig-1g.10gb.product"].endswith("-SHARED")
    assert r.labels["nvidia.com/gpu.replicas"] == "0"


@pytest.mark.parametrize(
    "doc",
    [
        {"nodes": [{"name": "a", "cpu": 1}]},  # no memory
        {"nodes": [{"name": "a", "cpu": 1, "memory": "1Gi", "gpu": {"model": "B9000", "count": 1}}]},
        {"nodes": [{"name": "a", "cpu": 1, "memory": "1Gi"}, {"name": "a", "cpu": 1, "memory": "1Gi"}]},
        {
            "nodes": [
                {
                    "name": "a",
                    "cpu": 1,
                    "memory": "1Gi",
                    "gpu": {"model": "L40S", "count": 1},
                    "migConfig": "all-balanced",
                }
            ]
        },
        {"migConfigs": {"x": [{"devices": "all"}]}, "nodes": []},
        {"devicePlugin": {"configs": {"a": {"strategy": "magic"}}}, "nodes": []},
        {"nodes": [{"name": "a", "cpu": 1, "memory": "1Gi", "pluginConfig": "nope"}]},
        {
            "migConfigs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]},
            "nodes": [
                {
                    "name": "a",
                    "cpu": 1,
                    "memory": "1Gi",
                    "gpu": {"model": "A100-SXM4-80GB", "count": 1},
                    "migConfig": "x",
                }
            ],
        },
    ],
)
def test_bad_cluster_files(doc):
    with pytest.raises(ClusterFileError):
        nodes.parse_cluster(doc)


def test_cpu_only_node_spec_defaults():
    spec = NodeSpec(name="c", cpu=4, memory="16Gi")
    c = nodes.ClusterSpec(nodes=(spec,))
    r = node_render.render_node(spec, c, mig_config=None, plugin_config=None)
    assert r.devices == ()
    assert gpu_resources(r.capacity) == {}
    assert not any(k.startswith("nvidia.com/") for k in r.labels)
    assert_valid(node_objects.build_node_object(spec, r, created=CREATED))


@pytest.mark.parametrize(
    ("q", "n"), [("2Ti", 2 * 1024**4), ("512G", 512 * 10**9), ("1024", 1024), ("1.5Gi", 3 * 2**29)]
)
def test_parse_bytes(q, n):
    assert node_render.parse_bytes(q) == n
