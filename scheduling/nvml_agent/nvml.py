"""NVML's answers for one node, as plain dataclasses (facts: ``shared/design/GPU-ON-KUBERNETES.md`` §7).

The ``pynvml`` module is a parameter (``nvml``), never imported here: the agent passes the real one, tests a
replay of recorded answers. Calls raise the module's ``NVMLError`` subclasses as NVML does; an answer a
device does not support (``NVMLError_NotSupported``) reads as missing.

**Activity.** NVML has no graphics-engine activity (``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is a DCGM profiling
counter). A whole GPU's activity here is ``nvmlDeviceGetUtilizationRates().gpu / 100``: the share of the
last sample period (1/6 s to 1 s by product) in which any kernel ran at all. That is coarser than the engine's
active ratio: one tiny kernel running all the time reads as 100 %. On MIG instances NVML does not support
utilisation ("On MIG-enabled GPUs, querying device utilization rates is not currently supported"): their
activity is missing (None), never 0, and the agent says so once in its log.

**MIG.** Instances are the parent's MIG device handles (``nvmlDeviceGetMigDeviceHandleByIndex``); their
memory and processes are read on those handles, since the parent's aggregate needs privileges. The profile
name (``1g.10gb``) comes from the instance's device name, or else from the parent's GPU instance profile
whose slices and memory match the instance's attributes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

# The pynvml module or a stand-in with the same functions, constants and exception classes; untyped.
Nvml = Any
T = TypeVar("T")

_MIB = 1024 * 1024
# "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "MIG 1g.10gb+me", "... MIG 1c.3g.40gb" (a compute instance of 3g.40gb)
_PROFILE = re.compile(r"\b(\d+g\.\d+gb(?:[+-][a-z]+)*)")


@dataclass(frozen=True)
class Memory:
    total_mib: int
    used_mib: int
    free_mib: int


@dataclass(frozen=True)
class Process:
    pid: int  # a host PID
    used_mib: int | None  # None where NVML does not know (no privileges, some platforms)


@dataclass(frozen=True)
class MigInstance:
    gpu_instance_id: int  # GPU_I_ID
    compute_instance_id: int
    profile: str  # GPU_I_PROFILE, e.g. "1g.10gb"; "" when NVML did not say
    uuid: str  # "MIG-…"
    memory: Memory | None
    utilization_percent: float | None  # None: not supported on MIG (every driver so far)
    processes: tuple[Process, ...]

    @property
    def activity(self) -> float | None:
        return None if self.utilization_percent is None else self.utilization_percent / 100


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str  # NVML's product name, dcgm-exporter's modelName: "NVIDIA H100 80GB HBM3"
    minor_number: int | None  # /dev/nvidia<minor>, dcgm-exporter's device label
    pci_bus_id: str
    memory: Memory | None  # None under MIG: the instances carry it
    utilization_percent: float | None  # None under MIG or where not supported
    processes: tuple[Process, ...]  # () under MIG: the instances carry them
    mig: tuple[MigInstance, ...] | None  # None: MIG disabled or not supported

    @property
    def activity(self) -> float | None:
        """The stand-in for GR_ENGINE_ACTIVE (module docstring: coarser)."""
        return None if self.utilization_percent is None else self.utilization_percent / 100


@dataclass(frozen=True)
class NodeReading:
    driver_version: str
    gpus: tuple[Gpu, ...]


class Notes:
    """Log lines said once per agent for conditions that hold on every scrape (a MIG GPU's missing
    utilisation, a permission NVML refuses): a 15 s scrape interval must not flood the log."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._logger = logger
        self._said: set[str] = set()

    def once(self, key: str, level: int, message: str, *args: object) -> None:
        if key not in self._said:
            self._said.add(key)
            self._logger.log(level, message, *args)


def _text(value: str | bytes) -> str:
    # pynvml returns str for most strings, but structure fields (busId, profile names) can be bytes.
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _mib(value: int) -> int:
    return int(value) // _MIB


def _optional(nvml: Nvml, notes: Notes, what: str, call: Callable[[object], T], handle: object) -> T | None:
    """``call(handle)``, or None where the device does not support it or NVML refuses (said once)."""
    try:
        return call(handle)
    except nvml.NVMLError_NotSupported:
        return None
    except nvml.NVMLError_NoPermission:
        notes.once(f"permission:{what}", logging.WARNING, "NVML: no permission to read %s; it is left out", what)
        return None


def _memory(nvml: Nvml, notes: Notes, what: str, handle: object) -> Memory | None:
    info = _optional(nvml, notes, f"the memory of {what}", nvml.nvmlDeviceGetMemoryInfo, handle)
    if info is None:
        return None
    return Memory(total_mib=_mib(info.total), used_mib=_mib(info.used), free_mib=_mib(info.free))


def _utilization(nvml: Nvml, notes: Notes, what: str, handle: object) -> float | None:
    rates = _optional(nvml, notes, f"the utilisation of {what}", nvml.nvmlDeviceGetUtilizationRates, handle)
    return None if rates is None else float(rates.gpu)


def _processes(nvml: Nvml, notes: Notes, what: str, handle: object) -> tuple[Process, ...]:
    found = _optional(nvml, notes, f"the processes on {what}", nvml.nvmlDeviceGetComputeRunningProcesses, handle)
    return tuple(
        Process(pid=int(p.pid), used_mib=None if p.usedGpuMemory is None else _mib(p.usedGpuMemory))
        for p in found or ()
    )


def profile_from_name(name: str) -> str:
    """The MIG profile a MIG device's NVML name carries ("" if none): its GPU instance's, for a compute
    instance smaller than it ("1c.3g.40gb" -> "3g.40gb")."""
    found = _PROFILE.search(name)
    return found[1] if found else ""


@dataclass(frozen=True)
class _GiProfile:
    name: str
    slices: int
    memory_mb: int
    media: tuple[int, int, int]  # decoders, JPEG, OFA: what tells 1g.10gb from 1g.10gb+me


def _gi_profiles(nvml: Nvml, parent: object) -> list[_GiProfile]:
    """The GPU instance profiles the parent supports (the others answer NotSupported or InvalidArgument)."""
    found = []
    for index in range(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(parent, index)
        except nvml.NVMLError:
            continue
        found.append(
            _GiProfile(
                name=profile_from_name(_text(info.name)),
                slices=int(info.sliceCount),
                memory_mb=int(info.memorySizeMB),
                media=(int(info.decoderCount), int(info.jpegCount), int(info.ofaCount)),
            )
        )
    return found


def profile_from_attributes(attributes: Any, profiles: list[_GiProfile]) -> str:
    """The profile whose slices and memory are the instance's; media engines decide between equals."""
    same = [
        p
        for p in profiles
        if p.name and p.slices == attributes.gpuInstanceSliceCount and p.memory_mb == attributes.memorySizeMB
    ]
    media = (attributes.sharedDecoderCount, attributes.sharedJpegCount, attributes.sharedOfaCount)
    best = [p for p in same if p.media == media] or same
    return best[0].name if best else ""


def _mig_instances(nvml: Nvml, notes: Notes, parent: object, gpu: str) -> Iterator[MigInstance]:
    profiles: list[_GiProfile] | None = None  # read only if a name does not say
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(parent)):
        try:
            handle = nvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, slot)
        except nvml.NVMLError_NotFound:  # an empty slot
            continue
        gi_id = int(nvml.nvmlDeviceGetGpuInstanceId(handle))
        what = f"{gpu} MIG instance {gi_id}"
        profile = profile_from_name(_text(nvml.nvmlDeviceGetName(handle)))
        if not profile:
            if profiles is None:
                profiles = _gi_profiles(nvml, parent)
            attributes = _optional(nvml, notes, f"the attributes of {what}", nvml.nvmlDeviceGetAttributes, handle)
            profile = profile_from_attributes(attributes, profiles) if attributes is not None else ""
            if not profile:
                notes.once(f"profile:{what}", logging.WARNING, "%s: no MIG profile found; GPU_I_PROFILE is empty", what)
        utilization = _utilization(nvml, notes, what, handle)
        if utilization is None:
            notes.once(
                f"mig-activity:{gpu}",
                logging.WARNING,
                "%s is in MIG mode and NVML has no utilisation for MIG instances: their "
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE series are left out, which the portal reads as missing (never as "
                "idle), so its GPU idle rule never reclaims them; use dcgm-exporter for MIG activity",
                gpu,
            )
        yield MigInstance(
            gpu_instance_id=gi_id,
            compute_instance_id=int(nvml.nvmlDeviceGetComputeInstanceId(handle)),
            profile=profile,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            memory=_memory(nvml, notes, what, handle),
            utilization_percent=utilization,
            processes=_processes(nvml, notes, what, handle),
        )


def _mig_enabled(nvml: Nvml, handle: object) -> bool:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError_NotSupported:  # a GPU without MIG (T4, L4, L40S, ...)
        return False
    return bool(current == nvml.NVML_DEVICE_MIG_ENABLE)


def read_gpu(nvml: Nvml, notes: Notes, index: int) -> Gpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(nvml.nvmlDeviceGetName(handle))
    what = f"GPU {index} ({name})"
    pci = _optional(nvml, notes, f"the PCI bus of {what}", nvml.nvmlDeviceGetPciInfo, handle)
    mig = tuple(_mig_instances(nvml, notes, handle, what)) if _mig_enabled(nvml, handle) else None
    return Gpu(
        index=index,
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
        name=name,
        minor_number=_optional(nvml, notes, f"the minor number of {what}", nvml.nvmlDeviceGetMinorNumber, handle),
        pci_bus_id=_text(pci.busId) if pci is not None else "",
        memory=None if mig is not None else _memory(nvml, notes, what, handle),
        utilization_percent=None if mig is not None else _utilization(nvml, notes, what, handle),
        processes=() if mig is not None else _processes(nvml, notes, what, handle),
        mig=mig,
    )


def read_node(nvml: Nvml, notes: Notes) -> NodeReading:
    """Every GPU of the node; NVML must be initialised. A GPU NVML fails on (``GPU is lost``, say) is left
    out and logged: its pods then have no readings, which the portal takes as missing, not idle. Errors
    that are not the device's (the driver gone: ``Uninitialized``) propagate."""
    gpus = []
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            gpus.append(read_gpu(nvml, notes, index))
        except (nvml.NVMLError_Uninitialized, nvml.NVMLError_DriverNotLoaded):
            raise
        except nvml.NVMLError as exc:
            notes.once(f"gpu:{index}:{exc}", logging.ERROR, "GPU %d: NVML says %r; it is left out", index, str(exc))
    return NodeReading(driver_version=_text(nvml.nvmlSystemGetDriverVersion()), gpus=tuple(gpus))
