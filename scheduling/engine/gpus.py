"""GPU facts: the model catalogue, MIG profile geometry and named mig-parted layouts.

Pure, standard library only. Every value cites its section of ``shared/design/GPU-ON-KUBERNETES.md``
("the facts doc"); values the facts doc does not give (whole-GPU MiB of some parts, MIG instance MiB,
PCI device ids of non-MIG parts) are the figures ``nvidia-smi`` prints on real parts, as recalled, and are
marked "approximate" where the simulation only needs them to be plausible.

Geometry (facts doc 3.1/3.2): a MIG-capable GPU has 7 compute slices and 8 memory slices. A placement
is ``(profile_name, start)`` with ``start`` a memory-slice index 0-7; an instance occupies memory slices
``start .. start + memory_slices - 1``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache

COMPUTE_SLICES = 7
MEMORY_SLICES = 8

Placement = tuple[str, int]
"""``(profile_name, start memory slice)``, e.g. ``("3g.40gb", 4)``."""


class MigError(ValueError):
    """Base class for MIG configuration errors."""


class InvalidMigLayout(MigError):
    """A set of placements the hardware would refuse (overlap, bad start, too many instances)."""


class UnknownMigConfig(MigError):
    """A mig-parted config name that has no entry for this GPU model."""


class MigNotSupported(MigError):
    """MIG was asked of a GPU that cannot do it (facts doc 2: ``nvidia.com/mig.capable=false``)."""


class UnknownGpuModel(KeyError):
    """No catalogue entry matches the given key, product label or NVML name."""


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile of one GPU model (facts doc 3.1, 3.2).

    ``multiprocessors`` is ``compute_slices * sms_per_slice`` (14 on A100, 16 on Hopper, facts doc 3.1);
    real 7g instances on Hopper expose a few more SMs, which nothing here depends on.
    """

    name: str
    compute_slices: int
    memory_slices: int
    starts: tuple[int, ...]
    max_instances: int
    memory_mib: int
    multiprocessors: int
    gi_profile_id: int
    media_extensions: bool
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int

    @property
    def resource_name(self) -> str:
        return resource_name(self.name)

    @property
    def config_suffix(self) -> str:
        """The profile as written in mig-parted config names: ``+`` becomes ``.`` (facts doc 3.4)."""
        return self.name.replace("+", ".")


@dataclass(frozen=True)
class GpuModel:
    """One GPU part as GFD, NVML and the device plugin describe it (facts doc 2, 3.1)."""

    key: str
    nvml_name: str
    memory_mib: int
    family: str
    architecture: str  # the DRA driver's spelling (facts doc 4.3), e.g. "Ada Lovelace"
    compute_major: int
    compute_minor: int
    total_sms: int
    pci_device_id: int
    sms_per_slice: int = 0
    mig_profiles: tuple[MigProfile, ...] = ()

    @property
    def product(self) -> str:
        """GFD ``nvidia.com/gpu.product``: the NVML name with spaces turned into ``-`` (facts doc 2)."""
        return self.nvml_name.replace(" ", "-")

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def pci_filter_id(self) -> str:
        """mig-parted ``device-filter`` form: device id then the NVIDIA vendor id (facts doc 3.3)."""
        return f"0x{self.pci_device_id:04X}10DE"

    def profile(self, name: str) -> MigProfile:
        for p in self.mig_profiles:
            if p.name == name:
                return p
        raise InvalidMigLayout(f"{self.key} has no MIG profile {name!r}")


# --- MIG geometry -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Shape:
    """A profile's geometry, the same on every MIG-capable part (facts doc 3.1/3.2)."""

    compute: int
    memory: int
    starts: tuple[int, ...]
    max_instances: int
    gi_profile_id: int  # NVML GPU-instance profile id, as `nvidia-smi mig -lgip` prints it
    me: bool
    # engines: copy, decoder, encoder, jpeg, ofa (A100/H100 `nvidia-smi mig -lgip`; approximate)
    engines: tuple[int, int, int, int, int]


_SHAPES: tuple[_Shape, ...] = (
    _Shape(1, 1, (0, 1, 2, 3, 4, 5, 6), 7, 19, False, (1, 0, 0, 0, 0)),  # 1g: never at slice 7
    _Shape(1, 1, (0, 1, 2, 3, 4, 5, 6), 1, 20, True, (1, 1, 0, 1, 1)),  # 1g+me: one instance only
    _Shape(1, 2, (0, 2, 4, 6), 4, 15, False, (1, 1, 0, 0, 0)),  # 1g 2-mem
    _Shape(2, 2, (0, 2, 4), 3, 14, False, (2, 1, 0, 0, 0)),
    _Shape(3, 4, (0, 4), 2, 9, False, (3, 2, 0, 0, 0)),  # 3g takes 4 memory slices
    _Shape(4, 4, (0,), 1, 5, False, (4, 2, 0, 0, 0)),
    _Shape(7, 8, (0,), 1, 0, False, (7, 5, 0, 1, 1)),
)


def _profiles(gb: Mapping[int, int], mib: Mapping[int, int], sms_per_slice: int) -> tuple[MigProfile, ...]:
    """Build a model's profile table from its per-memory-size name suffix and MiB.

    ``gb`` maps memory slices -> the GB figure in the profile name (facts doc 3.1 table);
    ``mib`` maps memory slices -> the instance memory NVML reports (approximate, always below the name).
    """
    out = []
    for s in _SHAPES:
        name = f"{s.compute}g.{gb[s.memory]}gb" + ("+me" if s.me else "")
        ce, dec, enc, jpg, ofa = s.engines
        out.append(
            MigProfile(
                name=name,
                compute_slices=s.compute,
                memory_slices=s.memory,
                starts=s.starts,
                max_instances=s.max_instances,
                memory_mib=mib[s.memory],
                multiprocessors=s.compute * sms_per_slice,
                gi_profile_id=s.gi_profile_id,
                media_extensions=s.me,
                copy_engines=ce,
                decoders=dec,
                encoders=enc,
                jpeg_engines=jpg,
                ofa_engines=ofa,
            )
        )
    return tuple(out)


def _mig_model(
    key: str,
    nvml_name: str,
    memory_mib: int,
    family: str,
    architecture: str,
    cc: tuple[int, int],
    total_sms: int,
    pci: int,
    sms_per_slice: int,
    gb: Mapping[int, int],
    mib: Mapping[int, int],
) -> GpuModel:
    return GpuModel(
        key=key,
        nvml_name=nvml_name,
        memory_mib=memory_mib,
        family=family,
        architecture=architecture,
        compute_major=cc[0],
        compute_minor=cc[1],
        total_sms=total_sms,
        pci_device_id=pci,
        sms_per_slice=sms_per_slice,
        mig_profiles=_profiles(gb, mib, sms_per_slice),
    )


# Profile-name GB per memory-slice count (facts doc 3.1 table) and NVML MiB (approximate).
_GB_A100_40 = {1: 5, 2: 10, 4: 20, 8: 40}
_GB_80 = {1: 10, 2: 20, 4: 40, 8: 80}
_GB_H100_NVL = {1: 12, 2: 24, 4: 47, 8: 94}
_GB_H100_96 = {1: 12, 2: 24, 4: 48, 8: 96}
_GB_H200 = {1: 18, 2: 35, 4: 71, 8: 141}

_MIB_A100_40 = {1: 4864, 2: 9856, 4: 20096, 8: 40448}
_MIB_A100_80 = {1: 9728, 2: 19968, 4: 40192, 8: 80640}
_MIB_H100_80 = {1: 9984, 2: 20096, 4: 40448, 8: 81152}
_MIB_H100_NVL = {1: 11008, 2: 22144, 4: 44544, 8: 89216}  # 1g.12gb = 10.75 GiB (facts doc 3.1)
_MIB_H100_96 = {1: 11264, 2: 22528, 4: 45312, 8: 90880}
_MIB_H200 = {1: 17152, 2: 33280, 4: 67584, 8: 134144}

_AMP, _HOP, _ADA = "ampere", "hopper", "ada-lovelace"

MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        # A100-40GB profile row (facts doc 3.1: PCI 20B0/20B1/20F1/20F6).
        _mig_model("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", 40960, _AMP, "Ampere", (8, 0), 108, 0x20B0,
                   14, _GB_A100_40, _MIB_A100_40),
        _mig_model("A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB", 40960, _AMP, "Ampere", (8, 0), 108, 0x20F1,
                   14, _GB_A100_40, _MIB_A100_40),
        # A100-80GB / H100-80GB row (facts doc 3.1: PCI 20B2/20B5, 2330/2331).
        _mig_model("A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", 81920, _AMP, "Ampere", (8, 0), 108, 0x20B2,
                   14, _GB_80, _MIB_A100_80),
        _mig_model("A100-80GB-PCIe", "NVIDIA A100 80GB PCIe", 81920, _AMP, "Ampere", (8, 0), 108, 0x20B5,
                   14, _GB_80, _MIB_A100_80),
        # 81559 MiB comes from a real GFD dump (facts doc 2).
        _mig_model("H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", 81559, _HOP, "Hopper", (9, 0), 132, 0x2330,
                   16, _GB_80, _MIB_H100_80),
        _mig_model("H100-PCIe", "NVIDIA H100 PCIe", 81559, _HOP, "Hopper", (9, 0), 114, 0x2331,
                   16, _GB_80, _MIB_H100_80),
        _mig_model("H100-NVL", "NVIDIA H100 NVL", 95830, _HOP, "Hopper", (9, 0), 132, 0x2321,
                   16, _GB_H100_NVL, _MIB_H100_NVL),
        # H100-96GB / GH200 row (facts doc 3.1: PCI 2342/233D); NVML name and MiB approximate.
        _mig_model("H100-96GB", "NVIDIA GH200 480GB", 97871, _HOP, "Hopper", (9, 0), 132, 0x2342,
                   16, _GB_H100_96, _MIB_H100_96),
        # H200-141GB SXM/NVL row (facts doc 3.1: PCI 2335/233B).
        _mig_model("H200-141GB", "NVIDIA H200", 143771, _HOP, "Hopper", (9, 0), 132, 0x2335,
                   16, _GB_H200, _MIB_H200),
        _mig_model("H200-NVL", "NVIDIA H200 NVL", 143771, _HOP, "Hopper", (9, 0), 132, 0x233B,
                   16, _GB_H200, _MIB_H200),
        # Parts without MIG (facts doc 2: family from compute capability; 8.9 is ada-lovelace).
        GpuModel("L40S", "NVIDIA L40S", 46068, _ADA, "Ada Lovelace", 8, 9, 142, 0x26B9),
        GpuModel("L4", "NVIDIA L4", 23034, _ADA, "Ada Lovelace", 8, 9, 58, 0x27B8),
        GpuModel("A10", "NVIDIA A10", 23028, _AMP, "Ampere", 8, 6, 72, 0x2236),
        GpuModel("T4", "Tesla T4", 15360, "turing", "Turing", 7, 5, 40, 0x1EB8),
    )
}  # fmt: skip


def _norm(s: str) -> str:
    return s.strip().replace(" ", "-").lower()


@cache
def _lookup() -> dict[str, GpuModel]:
    # Products from old drivers lack the NVIDIA prefix (facts doc 2), so both spellings resolve.
    table: dict[str, GpuModel] = {}
    for m in MODELS.values():
        for alias in (m.key, m.product, m.nvml_name, m.product.removeprefix("NVIDIA-")):
            table.setdefault(_norm(alias), m)
    return table


def get_model(key_or_product: str | GpuModel) -> GpuModel:
    """Resolve a catalogue key (``A100-SXM4-80GB``), GFD product (``NVIDIA-A100-SXM4-80GB``, also with a
    ``-SHARED`` suffix) or NVML name (``NVIDIA A100-SXM4-80GB``) to its model."""
    if isinstance(key_or_product, GpuModel):
        return key_or_product
    norm = _norm(key_or_product).removesuffix("-shared")
    try:
        return _lookup()[norm]
    except KeyError:
        raise UnknownGpuModel(key_or_product) from None


def mig_profiles(model: str | GpuModel) -> tuple[MigProfile, ...]:
    """The model's MIG profiles, smallest first; empty for parts without MIG."""
    return get_model(model).mig_profiles


def resource_name(profile: str) -> str:
    """Device-plugin resource for a MIG profile (facts doc 1.1).

    ``1g.10gb+me`` -> ``nvidia.com/mig-1g.10gb.me``.
    """
    return "nvidia.com/" + ("mig-" + profile).replace("+", ".")


def profile_for_resource(model: str | GpuModel, resource: str) -> MigProfile | None:
    """Inverse of :func:`resource_name` for one model; ``None`` if the resource is none of its profiles."""
    for p in get_model(model).mig_profiles:
        if p.resource_name == resource:
            return p
    return None


# --- layouts ----------------------------------------------------------------------------------------


def _require_mig(model: GpuModel) -> None:
    if not model.mig_capable:
        raise MigNotSupported(f"{model.key} does not support MIG")


def validate_layout(model: str | GpuModel, placements: Iterable[Placement]) -> None:
    """Raise :class:`InvalidMigLayout` unless the hardware would accept every placement (facts doc 3.2).

    Checks: known profile, allowed start, per-profile instance cap (``+me``: only one), no shared memory
    slice, and at most 7 compute slices in total.
    """
    m = get_model(model)
    _require_mig(m)
    used: dict[int, Placement] = {}
    counts: Counter[str] = Counter()
    compute = 0
    for name, start in placements:
        p = m.profile(name)
        if start not in p.starts:
            raise InvalidMigLayout(f"{name} cannot start at memory slice {start} (allowed: {list(p.starts)})")
        counts[name] += 1
        if counts[name] > p.max_instances:
            raise InvalidMigLayout(f"at most {p.max_instances} x {name} per GPU")
        for s in range(start, start + p.memory_slices):
            if s in used:
                other = used[s]
                raise InvalidMigLayout(f"{name}@{start} overlaps {other[0]}@{other[1]} at memory slice {s}")
            used[s] = (name, start)
        compute += p.compute_slices
    if compute > COMPUTE_SLICES:
        raise InvalidMigLayout(f"layout needs {compute} compute slices, the GPU has {COMPUTE_SLICES}")


def _order_key(p: MigProfile) -> tuple[int, int, str]:
    # Biggest first (facts doc 3.2: "create the biggest instances first").
    return (-p.memory_slices, -p.compute_slices, p.name)


def pack_layout(model: str | GpuModel, counts: Mapping[str, int]) -> list[Placement]:
    """Place ``counts`` (profile -> instances) on one GPU, biggest first, backtracking over starts.

    Backtracking avoids the trap in facts doc 3.2 (a 3g at slice 0 leaves only 4-6 for the rest), as
    mig-parted does. Deterministic; the result is sorted by start. Raises :class:`InvalidMigLayout` when
    no placement exists (e.g. 3g+3g+1g).
    """
    m = get_model(model)
    _require_mig(m)
    items: list[MigProfile] = []
    for name, n in counts.items():
        if n < 0:
            raise InvalidMigLayout(f"negative count for {name}")
        p = m.profile(name)
        if n > p.max_instances:
            raise InvalidMigLayout(f"at most {p.max_instances} x {name} per GPU")
        items.extend([p] * n)
    items.sort(key=_order_key)
    if sum(p.compute_slices for p in items) > COMPUTE_SLICES:
        raise InvalidMigLayout(f"{dict(counts)} needs more than {COMPUTE_SLICES} compute slices")

    chosen: list[Placement] = []
    free = [True] * MEMORY_SLICES

    def place(i: int, min_start: int) -> bool:
        if i == len(items):
            return True
        p = items[i]
        for start in p.starts:
            if start < min_start or not all(free[start : start + p.memory_slices]):
                continue
            free[start : start + p.memory_slices] = [False] * p.memory_slices
            chosen.append((p.name, start))
            # Identical profiles are interchangeable: keep their starts ascending to skip permutations.
            nxt = start + 1 if i + 1 < len(items) and items[i + 1] == p else 0
            if place(i + 1, nxt):
                return True
            chosen.pop()
            free[start : start + p.memory_slices] = [True] * p.memory_slices
        return False

    if not place(0, 0):
        raise InvalidMigLayout(f"no placement of {dict(counts)} fits one {m.key}")
    return sorted(chosen, key=lambda pl: (pl[1], pl[0]))


def _balanced(m: GpuModel) -> dict[str, int]:
    """``all-balanced``: 2 x 1g + 1 x 2g + 1 x 3g (facts doc 3.4 lists it per model with this shape)."""
    by_shape = {(p.compute_slices, p.memory_slices, p.media_extensions): p.name for p in m.mig_profiles}
    return {by_shape[(1, 1, False)]: 2, by_shape[(2, 2, False)]: 1, by_shape[(3, 4, False)]: 1}


def named_config_names(model: str | GpuModel) -> tuple[str, ...]:
    """Every config name of the GPU Operator's ``default-mig-parted-config`` that covers this model."""
    m = get_model(model)
    if not m.mig_capable:
        return ("all-disabled",)
    return (
        "all-disabled",
        "all-enabled",
        "all-balanced",
        *(f"all-{p.config_suffix}" for p in m.mig_profiles),
    )


def named_layout(model: str | GpuModel, config_name: str) -> list[Placement] | None:
    """Per-GPU layout of a named mig-parted config (facts doc 3.4).

    ``None`` means MIG off (``all-disabled``), ``[]`` MIG on with no instances (``all-enabled``),
    ``all-balanced`` the per-model 2x1g+2g+3g mix, ``all-<profile>`` (``+`` written ``.``) as many
    instances of that profile as fit: 7 x 1g, 1 x 1g+me, 4 x 1g 2-mem (so ``all-1g.10gb`` is 7 on 80 GB
    parts and 4 on A100-40GB), 3 x 2g, 2 x 3g, 1 x 4g, 1 x 7g.

    Raises :class:`UnknownMigConfig` for a name with no entry for this model and
    :class:`MigNotSupported` for anything but ``all-disabled`` on a part without MIG.
    """
    m = get_model(model)
    if config_name == "all-disabled":
        return None
    if config_name not in named_config_names(m):
        if not m.mig_capable:
            raise MigNotSupported(f"{m.key} does not support MIG (config {config_name!r})")
        raise UnknownMigConfig(f"mig config {config_name!r} has no entry for {m.key}")
    if config_name == "all-enabled":
        return []
    if config_name == "all-balanced":
        return pack_layout(m, _balanced(m))
    suffix = config_name.removeprefix("all-")
    p = next(p for p in m.mig_profiles if p.config_suffix == suffix)
    return pack_layout(m, {p.name: p.max_instances})


def layout_counts(placements: Iterable[Placement]) -> dict[str, int]:
    """Instances per profile of a layout."""
    return dict(Counter(name for name, _ in placements))


def gpu_equivalents(model: str | GpuModel, profile: str | None) -> float:
    """Share of one GPU a MIG instance takes; ``None`` (a whole GPU) is 1.

    ``max(compute_slices / 7, memory_slices / 8)``: an instance is worth the scarcer of the two resources
    it locks up (facts doc 3.1 fractions). So 1g.10gb = 1/7, 1g.20gb = 2/8, 3g.40gb = 4/8 (it strands a
    compute slice) and 7g = 1. Sums over a full layout can exceed 1 (all-balanced is 15/14) because
    slices a layout strands are charged to the instances that strand them.
    """
    if profile is None:
        return 1.0
    p = get_model(model).profile(profile)
    return max(p.compute_slices / COMPUTE_SLICES, p.memory_slices / MEMORY_SLICES)


def free_placements(model: str | GpuModel, layout: Sequence[Placement], profile: str) -> list[int]:
    """Starts at which one more ``profile`` instance could be added to ``layout`` without moving others."""
    m = get_model(model)
    out = []
    for start in m.profile(profile).starts:
        try:
            validate_layout(m, [*layout, (profile, start)])
        except InvalidMigLayout:
            continue
        out.append(start)
    return out
