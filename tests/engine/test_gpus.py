"""GPU catalogue and MIG geometry against GPU-ON-KUBERNETES.md sections 1-3."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine import gpus
from scheduling.engine.gpus import InvalidMigLayout, MigNotSupported, UnknownGpuModel, UnknownMigConfig

A100_80 = "A100-SXM4-80GB"
MIG_MODELS = [k for k, m in gpus.MODELS.items() if m.mig_capable]

# Section 3.2 valid full layouts, written with explicit starts, on A100-80GB profile names.
VALID_LAYOUTS = {
    "7g": [("7g.80gb", 0)],
    "4g+3g": [("4g.40gb", 0), ("3g.40gb", 4)],
    "3g+3g": [("3g.40gb", 0), ("3g.40gb", 4)],
    "4g+2g+1g": [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)],
    "4g+1gx3": [("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 5), ("1g.10gb", 6)],
    "3g+2gx2": [("2g.20gb", 0), ("2g.20gb", 2), ("3g.40gb", 4)],
    "all-balanced": [("2g.20gb", 0), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4)],
    "3g+1gx4": [("1g.10gb", 0), ("1g.10gb", 1), ("1g.10gb", 2), ("1g.10gb", 3), ("3g.40gb", 4)],
    "2gx3+1g": [("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)],
    "1gx7": [("1g.10gb", s) for s in range(7)],
}

# Section 3.2 invalid layouts, as counts: no placement exists.
INVALID_COUNTS = {
    "3g+3g+1g": {"3g.40gb": 2, "1g.10gb": 1},
    "4g+4g": {"4g.40gb": 2},
    "2gx4": {"2g.20gb": 4},
    "two +me": {"1g.10gb+me": 2},
}


@pytest.mark.parametrize("layout", VALID_LAYOUTS.values(), ids=VALID_LAYOUTS.keys())
def test_it_accepts_every_valid_full_layout(layout):
    gpus.validate_layout(A100_80, layout)


@pytest.mark.parametrize("layout", VALID_LAYOUTS.values(), ids=VALID_LAYOUTS.keys())
def test_it_packs_every_valid_full_layout_from_counts(layout):
    packed = gpus.pack_layout(A100_80, gpus.layout_counts(layout))
    gpus.validate_layout(A100_80, packed)
    assert gpus.layout_counts(packed) == gpus.layout_counts(layout)


@pytest.mark.parametrize("counts", INVALID_COUNTS.values(), ids=INVALID_COUNTS.keys())
def test_it_refuses_to_pack_invalid_layouts(counts):
    with pytest.raises(InvalidMigLayout):
        gpus.pack_layout(A100_80, counts)


@pytest.mark.parametrize(
    "layout",
    [
        [("3g.40gb", 0), ("3g.40gb", 4), ("1g.10gb", 3)],  # 3g+3g+1g: 3g takes 4 memory slices
        [("4g.40gb", 0), ("4g.40gb", 0)],
        [("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("2g.20gb", 6)],  # 2g never starts at 6
        [("1g.10gb+me", 0), ("1g.10gb+me", 1)],
        [("1g.10gb", 7)],  # 1g never at slice 7
        [("3g.40gb", 2)],
        [("4g.40gb", 4)],
        [("1g.20gb", 1)],
        [("2g.20gb", 0), ("1g.10gb", 1)],  # overlap
        [("3g.40gb", 0), ("2g.20gb", 2)],  # overlap: 3g@0 covers 0-3
        [("5g.50gb", 0)],  # no such profile
        [("1g.5gb", 0)],  # an A100-40GB profile
    ],
)
def test_it_rejects_invalid_placements(layout):
    with pytest.raises(InvalidMigLayout):
        gpus.validate_layout(A100_80, layout)


def test_a_3g_at_slice_0_leaves_only_slices_4_to_6():
    assert gpus.free_placements(A100_80, [("3g.40gb", 0)], "1g.10gb") == [4, 5, 6]
    assert gpus.free_placements(A100_80, [("3g.40gb", 0)], "2g.20gb") == [4]
    assert gpus.free_placements(A100_80, [("3g.40gb", 4)], "2g.20gb") == [0, 2]


def test_it_keeps_only_one_me_instance_but_allows_other_1g():
    gpus.validate_layout(A100_80, [("1g.10gb+me", 0), *[("1g.10gb", s) for s in range(1, 7)]])


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("A100-SXM4-40GB", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        ("A100-SXM4-80GB", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        ("H100-80GB-HBM3", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        ("H100-NVL", {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}),
        ("H200-141GB", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
    ],
)
def test_all_balanced_composition_per_model(model, expected):
    layout = gpus.named_layout(model, "all-balanced")
    assert layout is not None
    assert gpus.layout_counts(layout) == expected


@pytest.mark.parametrize(
    ("model", "config", "profile", "count"),
    [
        ("A100-SXM4-80GB", "all-1g.10gb", "1g.10gb", 7),
        ("H100-80GB-HBM3", "all-1g.10gb", "1g.10gb", 7),
        ("A100-SXM4-40GB", "all-1g.10gb", "1g.10gb", 4),  # the 1g 2-mem profile on 40 GB parts
        ("A100-SXM4-40GB", "all-1g.5gb", "1g.5gb", 7),
        ("H200-141GB", "all-1g.18gb", "1g.18gb", 7),
        ("A100-SXM4-80GB", "all-1g.10gb.me", "1g.10gb+me", 1),
        ("A100-SXM4-80GB", "all-1g.20gb", "1g.20gb", 4),
        ("A100-SXM4-80GB", "all-2g.20gb", "2g.20gb", 3),
        ("A100-SXM4-80GB", "all-3g.40gb", "3g.40gb", 2),
        ("A100-SXM4-80GB", "all-4g.40gb", "4g.40gb", 1),
        ("H200-141GB", "all-7g.141gb", "7g.141gb", 1),
    ],
)
def test_all_profile_configs(model, config, profile, count):
    assert gpus.layout_counts(gpus.named_layout(model, config) or []) == {profile: count}


def test_disabled_and_enabled_configs():
    assert gpus.named_layout(A100_80, "all-disabled") is None
    assert gpus.named_layout(A100_80, "all-enabled") == []
    assert gpus.named_layout("L40S", "all-disabled") is None


def test_unknown_configs_and_non_mig_parts():
    with pytest.raises(UnknownMigConfig):
        gpus.named_layout(A100_80, "all-1g.5gb")  # only A100-40GB has 1g.5gb
    with pytest.raises(UnknownMigConfig):
        gpus.named_layout(A100_80, "custom-thing")
    with pytest.raises(MigNotSupported):
        gpus.named_layout("L40S", "all-balanced")
    with pytest.raises(MigNotSupported):
        gpus.validate_layout("T4", [])


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("A100-SXM4-40GB", "A100-SXM4-40GB"),  # old-driver product, no NVIDIA prefix (section 2)
        ("NVIDIA-H100-80GB-HBM3-SHARED", "H100-80GB-HBM3"),
        ("NVIDIA-H200", "H200-141GB"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla-T4", "T4"),
    ],
)
def test_get_model_resolves_keys_products_and_nvml_names(name, key):
    assert gpus.get_model(name).key == key


def test_get_model_rejects_unknown():
    with pytest.raises(UnknownGpuModel):
        gpus.get_model("NVIDIA-B9000")


def test_catalogue_facts():
    h100 = gpus.get_model("H100-80GB-HBM3")
    assert (h100.product, h100.memory_mib, h100.family) == ("NVIDIA-H100-80GB-HBM3", 81559, "hopper")
    assert (h100.compute_major, h100.compute_minor) == (9, 0)
    a100 = gpus.get_model(A100_80)
    assert (a100.memory_mib, a100.family, a100.compute_major, a100.pci_filter_id) == (
        81920,
        "ampere",
        8,
        "0x20B210DE",
    )
    assert gpus.get_model("L40S").family == "ada-lovelace"
    assert not gpus.get_model("L40S").mig_capable
    assert gpus.get_model("H200-141GB").product == "NVIDIA-H200"


@pytest.mark.parametrize("model", MIG_MODELS)
def test_profile_table_shape(model):
    m = gpus.get_model(model)
    per_slice = 14 if m.family == "ampere" else 16
    names = [p.name for p in m.mig_profiles]
    assert len(names) == len(set(names)) == 7
    for p in m.mig_profiles:
        assert p.multiprocessors == p.compute_slices * per_slice
        # "The gb in a name is rounded up" (section 3.1): the instance is below the GiB the name says.
        gb = int(p.name.split(".")[1].split("gb")[0])
        assert p.memory_mib < gb * 1024
        assert p.memory_mib < m.memory_mib
    me = [p for p in m.mig_profiles if p.name.endswith("+me")]
    assert len(me) == 1
    assert me[0].max_instances == 1


def test_resource_names():
    assert gpus.resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert gpus.resource_name("1g.10gb+me") == "nvidia.com/mig-1g.10gb.me"
    assert gpus.profile_for_resource(A100_80, "nvidia.com/mig-1g.10gb.me") == gpus.get_model(A100_80).profile(
        "1g.10gb+me"
    )
    assert gpus.profile_for_resource(A100_80, "nvidia.com/gpu") is None


def test_gpu_equivalents():
    assert gpus.gpu_equivalents(A100_80, None) == 1
    assert gpus.gpu_equivalents(A100_80, "7g.80gb") == 1
    assert gpus.gpu_equivalents(A100_80, "1g.10gb") == pytest.approx(1 / 7)
    assert gpus.gpu_equivalents(A100_80, "1g.20gb") == pytest.approx(2 / 8)
    assert gpus.gpu_equivalents(A100_80, "3g.40gb") == pytest.approx(4 / 8)
    assert gpus.gpu_equivalents(A100_80, "4g.40gb") == pytest.approx(4 / 7)


@st.composite
def _counts(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
    model = draw(st.sampled_from(MIG_MODELS))
    profiles = gpus.mig_profiles(model)
    counts = {p.name: draw(st.integers(0, p.max_instances)) for p in profiles}
    return model, {k: v for k, v in counts.items() if v}


@settings(max_examples=300, deadline=None)
@given(_counts())
def test_pack_layout_is_valid_or_raises(case):
    model, counts = case
    try:
        layout = gpus.pack_layout(model, counts)
    except InvalidMigLayout:
        return
    gpus.validate_layout(model, layout)
    assert gpus.layout_counts(layout) == counts


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(MIG_MODELS), st.data())
def test_named_layouts_always_validate(model, data):
    name = data.draw(st.sampled_from(gpus.named_config_names(model)))
    layout = gpus.named_layout(model, name)
    if layout is not None:
        gpus.validate_layout(model, layout)


def _brute_force_fits(model: str, counts: dict[str, int]) -> bool:
    """Independent check: try every assignment of starts."""
    m = gpus.get_model(model)
    items = [(name, m.profile(name).starts) for name, n in counts.items() for _ in range(n)]
    for starts in itertools.product(*(s for _, s in items)):
        try:
            gpus.validate_layout(model, [(n, s) for (n, _), s in zip(items, starts, strict=True)])
        except InvalidMigLayout:
            continue
        return True
    return False


@settings(max_examples=150, deadline=None)
@given(_counts())
def test_pack_layout_finds_a_placement_whenever_one_exists(case):
    model, counts = case
    if sum(counts.values()) > 5:  # keep the brute force small
        return
    try:
        gpus.pack_layout(model, counts)
        packed = True
    except InvalidMigLayout:
        packed = False
    assert packed == _brute_force_fits(model, counts)
