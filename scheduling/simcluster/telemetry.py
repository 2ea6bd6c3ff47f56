"""Simulated GPU telemetry: per-pod workload profiles and a dcgm-exporter ``/metrics`` page.

Pure and deterministic: every value is a function of (seed, pod uid, time). Facts come from
``shared/design/GPU-ON-KUBERNETES.md`` section 6 ("facts doc 6").

Workload profiles, chosen per pod by the annotation ``sim.gpuportal.io/workload-profile``:

- ``idle-notebook``: works for the first 5-15 minutes after start (or the annotation
  ``sim.gpuportal.io/busy-seconds``), then sits idle (graphics engine below 0.01) holding 12-24 % of the
  GPU memory, as a forgotten notebook does.
- ``bursty-notebook``: 20-minute windows; the first and about half of the others hold one 3-12 minute
  burst at 0.4-0.9 activity, near-idle in between; holds 25-60 % of memory.
- ``steady-training``: 0.86-0.97 activity and 82-94 % of memory throughout.
- ``cpu-preprocessing``: a notebook whose kernel is busy throughout on the CPU (data preparation) while
  its GPU stays below 0.01 with 5-10 % of the memory: idle by the GPU alone, active by its kernel.
- ``gpu-background``: a notebook that started a GPU run in the background (a terminal, ``nohup``) and
  whose browser was closed: 0.6-0.95 activity, kernel idle, no connection.
- ``none``: holds the device and does nothing.

The Jupyter answers (:mod:`scheduling.simcluster.jupyter`) use the same model, so a notebook whose kernel
is idle also shows an idle GPU.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from scheduling.engine import gpus
from scheduling.simcluster.device_plugin import DeviceRef
from scheduling.simcluster.node_render import GpuDevice, MigInstance

PROFILE_ANNOTATION = "sim.gpuportal.io/workload-profile"
BUSY_ANNOTATION = "sim.gpuportal.io/busy-seconds"  # idle-notebook: how long it works before it sits idle
WorkloadProfile = Literal[
    "idle-notebook", "bursty-notebook", "steady-training", "cpu-preprocessing", "gpu-background", "none"
]
PROFILES: tuple[WorkloadProfile, ...] = get_args(WorkloadProfile)
SAMPLE_SECONDS = 30  # dcgm-exporter collect interval (facts doc 6)

_IDLE_BELOW = 0.01  # comfortably under the 0.05 idle test of facts doc 6
_BURST_WINDOW = 1200.0


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts."""
    h = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def profile_for_pod(annotations: Mapping[str, str] | None, labels: Mapping[str, str] | None = None) -> WorkloadProfile:
    """The pod's workload profile: the annotation if valid, else ``steady-training`` for Job pods (they
    carry ``batch.kubernetes.io/job-name`` or ``job-name``) and ``bursty-notebook`` for the rest."""
    value = (annotations or {}).get(PROFILE_ANNOTATION)
    for p in PROFILES:
        if value == p:
            return p
    labels = labels or {}
    if "batch.kubernetes.io/job-name" in labels or "job-name" in labels:
        return "steady-training"
    return "bursty-notebook"


def busy_seconds_for_pod(annotations: Mapping[str, str] | None) -> float | None:
    """The annotation's working time of an ``idle-notebook``, if it is a non-negative number."""
    try:
        value = float((annotations or {}).get(BUSY_ANNOTATION, ""))
    except ValueError:
        return None
    return value if 0 <= value < float("inf") else None


@dataclass(frozen=True)
class Activity:
    gr_engine_active: float  # 0-1 (DCGM_FI_PROF_GR_ENGINE_ACTIVE)
    fb_fraction: float  # share of the device's memory in use
    busy: bool  # a Jupyter kernel would report execution_state=busy


IDLE = Activity(0.0, 0.0, False)


def _idle_warm_seconds(seed: int, uid: str, busy_seconds: float | None) -> float:
    return 300 + 600 * _unit(seed, uid, "warm") if busy_seconds is None else busy_seconds


def _burst(seed: int, uid: str, k: int) -> tuple[float, float] | None:
    """(start, end) seconds after pod start of window ``k``'s burst, or None for a quiet window."""
    if k > 0 and _unit(seed, uid, "window", k) >= 0.55:
        return None
    length = 180 + 540 * _unit(seed, uid, "length", k)
    offset = 0.0 if k == 0 else (_BURST_WINDOW - length) * _unit(seed, uid, "offset", k)
    start = k * _BURST_WINDOW + offset
    return start, start + length


def activity(
    profile: WorkloadProfile,
    *,
    seed: int,
    pod_uid: str,
    started_at: datetime,
    at: datetime,
    busy_seconds: float | None = None,
) -> Activity:
    """What the pod's workload does on its device at ``at`` (idle before ``started_at``)."""
    if at < started_at or profile == "none":
        return IDLE
    elapsed = (at - started_at).total_seconds()
    noise = _unit(seed, pod_uid, "noise", int(at.timestamp() // SAMPLE_SECONDS))
    if profile == "idle-notebook":
        fb = 0.12 + 0.12 * _unit(seed, pod_uid, "fb")
        if elapsed < _idle_warm_seconds(seed, pod_uid, busy_seconds):
            return Activity(0.25 + 0.5 * noise, fb, True)
        return Activity(_IDLE_BELOW * 0.5 * noise, fb, False)
    if profile == "cpu-preprocessing":
        return Activity(_IDLE_BELOW * noise, 0.05 + 0.05 * _unit(seed, pod_uid, "fb"), True)
    if profile == "gpu-background":
        return Activity(0.6 + 0.35 * noise, 0.4 + 0.3 * _unit(seed, pod_uid, "fb"), False)
    if profile == "bursty-notebook":
        fb = 0.25 + 0.35 * _unit(seed, pod_uid, "fb")
        span = _burst(seed, pod_uid, int(elapsed // _BURST_WINDOW))
        if span is not None and span[0] <= elapsed < span[1]:
            return Activity(0.4 + 0.5 * noise, fb, True)
        return Activity(_IDLE_BELOW * noise, fb, False)
    return Activity(0.86 + 0.11 * noise, 0.82 + 0.12 * _unit(seed, pod_uid, "fb"), True)


def last_busy_at(
    profile: WorkloadProfile,
    *,
    seed: int,
    pod_uid: str,
    started_at: datetime,
    now: datetime,
    busy_seconds: float | None = None,
) -> datetime | None:
    """The last moment up to ``now`` the kernel was busy (``now`` while busy); None if never. A
    ``gpu-background`` kernel never was: its work runs outside it."""
    if now < started_at or profile in ("none", "gpu-background"):
        return None
    elapsed = (now - started_at).total_seconds()
    if profile in ("steady-training", "cpu-preprocessing"):
        return now
    if profile == "idle-notebook":
        return started_at + timedelta(seconds=min(elapsed, _idle_warm_seconds(seed, pod_uid, busy_seconds)))
    for k in range(int(elapsed // _BURST_WINDOW), -1, -1):
        span = _burst(seed, pod_uid, k)
        if span is None or span[0] > elapsed:
            continue
        return started_at + timedelta(seconds=min(elapsed, span[1]))
    return None  # unreachable: window 0 always bursts from the start


def busy_spans(
    profile: WorkloadProfile, *, seed: int, pod_uid: str, until: float, busy_seconds: float | None = None
) -> list[tuple[float, float]]:
    """The stretches, in seconds after the start and up to ``until``, in which :func:`activity` has the GPU
    active (above the idle threshold): what a simulation in time needs instead of sampling every 30 s. For
    the two notebook profiles the kernel is busy and the user active in exactly these stretches."""
    if profile == "idle-notebook":
        spans = [(0.0, _idle_warm_seconds(seed, pod_uid, busy_seconds))]
    elif profile == "bursty-notebook":
        found = (_burst(seed, pod_uid, k) for k in range(int(until // _BURST_WINDOW) + 1))
        spans = [s for s in found if s is not None]
    elif profile in ("steady-training", "gpu-background"):
        spans = [(0.0, until)]
    else:
        spans = []
    return [(a, min(b, until)) for a, b in spans if a < until]


# Expected GR engine activity inside and outside :func:`busy_spans` (the means of :func:`activity`'s noise).
MEAN_ACTIVITY: dict[WorkloadProfile, tuple[float, float]] = {
    "idle-notebook": (0.5, _IDLE_BELOW * 0.25),
    "bursty-notebook": (0.65, _IDLE_BELOW * 0.5),
    "steady-training": (0.915, 0.915),
    "cpu-preprocessing": (_IDLE_BELOW * 0.5, _IDLE_BELOW * 0.5),  # kernel busy, GPU idle throughout
    "gpu-background": (0.775, 0.775),
    "none": (0.0, 0.0),
}


# --- dcgm-exporter ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodRef:
    name: str
    namespace: str
    container: str
    uid: str
    profile: WorkloadProfile
    started_at: datetime
    busy_seconds: float | None = None
    gpu_memory_mib: int | None = None  # what the workload says it allocates (sim.gpuportal.io/gpu-memory-mib)
    memory_limit_mib: int | None = None  # its MPS client's pinned memory limit, on an MPS share
    dra_claim: str | None = None  # the ResourceClaim its device came with (DRA), in the pod's namespace


def _fb_fraction(pod: PodRef, a: Activity, total: int) -> float:
    """The pod's share of the device's ``total`` MiB: what its workload declares, else its profile's share of
    the memory it may use (an MPS client's limit, else the whole device)."""
    if pod.gpu_memory_mib is None and pod.memory_limit_mib is None:
        return a.fb_fraction
    usable = min(pod.memory_limit_mib or total, total)
    return (min(pod.gpu_memory_mib, usable) if pod.gpu_memory_mib is not None else a.fb_fraction * usable) / total


@dataclass(frozen=True)
class DeviceUse:
    """One device dcgm-exporter reports on: a whole GPU or one MIG instance of it.

    ``pod`` gets the ``pod``/``namespace``/``container`` labels; ``co_tenants`` are further pods
    time-sharing the device, which add load but no labels (facts doc 6: without
    ``--kubernetes-virtual-gpus`` only one sharing pod is labelled). A ``DeviceUse`` with ``mig=None`` on
    a MIG-enabled GPU yields only the whole-GPU series (power, temperature).
    """

    node_name: str
    device: GpuDevice
    mig: MigInstance | None = None
    pod: PodRef | None = None
    co_tenants: tuple[PodRef, ...] = ()

    @property
    def pods(self) -> tuple[PodRef, ...]:
        return ((self.pod,) if self.pod else ()) + self.co_tenants


def device_uses(node_name: str, devices: Sequence[GpuDevice], holders: Mapping[DeviceRef, PodRef]) -> list[DeviceUse]:
    """Every device of a node (each MIG instance separately) with the pods holding it.

    ``holders`` maps the device plugin's allocations (:func:`device_plugin.allocate`) to pods; on a shared device
    the pod on the lowest replica gets the labels.
    """
    by_dev: dict[tuple[int, int | None], list[tuple[int, PodRef]]] = {}
    for ref, pod in holders.items():
        by_dev.setdefault((ref.gpu_index, ref.gi_id), []).append((ref.replica or 0, pod))

    def use(d: GpuDevice, inst: MigInstance | None) -> DeviceUse:
        pods = [p for _, p in sorted(by_dev.get((d.index, inst.gi_id if inst else None), []), key=lambda x: x[0])]
        return DeviceUse(node_name, d, inst, pods[0] if pods else None, tuple(pods[1:]))

    out: list[DeviceUse] = []
    for d in devices:
        if d.mig is None:
            out.append(use(d, None))
        else:
            out.append(DeviceUse(node_name, d))  # parent: power and temperature only
            out.extend(use(d, inst) for inst in d.mig)
    return out


# (help, type) per metric, worded as dcgm-exporter's counters CSV does (facts doc 6).
_FAMILIES: dict[str, str] = {
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_RESERVED": "Framebuffer memory reserved (in MiB).",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "Ratio of time the graphics engine is active.",
}

# (idle W, max W) per model: board power limits; idle draw approximate.
_POWER: dict[str, tuple[float, float]] = {
    "A100-SXM4-40GB": (52, 400),
    "A100-PCIE-40GB": (36, 250),
    "A100-SXM4-80GB": (62, 400),
    "A100-80GB-PCIe": (45, 300),
    "H100-80GB-HBM3": (72, 700),
    "H100-PCIe": (50, 350),
    "H100-NVL": (60, 400),
    "H100-96GB": (90, 900),
    "H200-141GB": (78, 700),
    "H200-NVL": (60, 600),
    "L40S": (34, 350),
    "L4": (16, 72),
    "A10": (22, 150),
    "T4": (10, 70),
}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt(value: float | int) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6f}"


@dataclass(frozen=True)
class _Series:
    metric: str
    labels: tuple[tuple[str, str], ...]
    value: float | int

    def line(self) -> str:
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels)
        return f"{self.metric}{{{body}}} {_fmt(self.value)}"


def _labels(
    use: DeviceUse, driver_version: str, hostname_label: str, *, with_pod: bool, pod: PodRef | None = None
) -> tuple[tuple[str, str], ...]:
    # Label order as dcgm-exporter prints them (facts doc 6 example series).
    d = use.device
    pod = pod or use.pod
    out = [
        ("gpu", str(d.index)),
        ("UUID", d.uuid),
        ("pci_bus_id", d.pci_bus_id),
        ("device", d.device),
        ("modelName", gpus.get_model(d.model).nvml_name),
    ]
    if use.mig is not None:
        out += [("GPU_I_PROFILE", use.mig.profile), ("GPU_I_ID", str(use.mig.gi_id))]
    out += [(hostname_label, use.node_name), ("DCGM_FI_DRIVER_VERSION", driver_version)]
    if with_pod and pod is not None:
        out += [("container", pod.container), ("namespace", pod.namespace), ("pod", pod.name)]
        if pod.dra_claim:  # KUBERNETES_ENABLE_DRA=true (facts doc 6)
            out += [("dra_claim_name", pod.dra_claim), ("dra_claim_namespace", pod.namespace)]
    return tuple(out)


def _load(use: DeviceUse, seed: int, at: datetime, total: int) -> tuple[float, float]:
    """(graphics-engine activity, memory fraction) summed over the pods sharing the device, capped."""
    gr = fb = 0.0
    for p in use.pods:
        a = activity(p.profile, seed=seed, pod_uid=p.uid, started_at=p.started_at, at=at, busy_seconds=p.busy_seconds)
        gr += a.gr_engine_active
        fb += _fb_fraction(p, a, total)
    return min(gr, 1.0), min(fb, 0.97)


def render_metrics(
    uses: Iterable[DeviceUse],
    *,
    at: datetime,
    seed: int,
    driver_version: str,
    hostname_label: Literal["Hostname", "hostname"] = "Hostname",
    virtual_gpus: bool = False,
) -> str:
    """The ``/metrics`` page of one or more dcgm-exporter pods (facts doc 6), Prometheus text format.

    Whole GPUs: temperature, power, GPU_UTIL, FB_*, GR_ENGINE_ACTIVE. On MIG GPUs the parent carries only
    temperature and power, and each instance FB_* and GR_ENGINE_ACTIVE with GPU_I_PROFILE/GPU_I_ID;
    GPU_UTIL is never reported for MIG (facts doc 6, "MIG behaviour").

    A time-shared GPU's series carry one pod's labels. With ``virtual_gpus`` (dcgm-exporter's
    ``--kubernetes-virtual-gpus``) every pod sharing it gets series, its GPU_UTIL and FB_USED its own
    process's figures; GR_ENGINE_ACTIVE and FB_FREE stay the device's.
    """
    series: dict[str, list[_Series]] = {m: [] for m in _FAMILIES}
    parents: dict[tuple[str, int], tuple[DeviceUse, float]] = {}
    for use in uses:
        d = use.device
        model = gpus.get_model(d.model)
        total = model.memory_mib if use.mig is None else use.mig.memory_mib
        gr, fb = _load(use, seed, at, total)
        key = (use.node_name, d.index)
        if d.mig is None:
            parents[key] = (use, gr)
        else:
            # A MIG parent's power follows the compute-weighted load of its instances.
            prev = parents.get(key, (DeviceUse(use.node_name, d), 0.0))
            if use.mig is None:
                parents[key] = prev
                continue
            share = model.profile(use.mig.profile).compute_slices / gpus.COMPUTE_SLICES
            parents[key] = (prev[0], prev[1] + gr * share)
        reserved = round(total * 0.0066) if use.mig is None else 0
        used = round(fb * total)
        per_process = virtual_gpus and use.mig is None and len(use.pods) > 1
        for pod in use.pods if per_process else (use.pod,):
            labels = _labels(use, driver_version, hostname_label, with_pod=True, pod=pod)
            own_gr, own_fb = gr, used
            if per_process and pod is not None:
                a = activity(pod.profile, seed=seed, pod_uid=pod.uid, started_at=pod.started_at, at=at,
                             busy_seconds=pod.busy_seconds)  # fmt: skip
                own_gr, own_fb = min(a.gr_engine_active, 1.0), round(min(_fb_fraction(pod, a, total), 0.97) * total)
            series["DCGM_FI_DEV_FB_FREE"].append(_Series("DCGM_FI_DEV_FB_FREE", labels, total - reserved - used))
            series["DCGM_FI_DEV_FB_USED"].append(_Series("DCGM_FI_DEV_FB_USED", labels, own_fb))
            series["DCGM_FI_DEV_FB_RESERVED"].append(_Series("DCGM_FI_DEV_FB_RESERVED", labels, reserved))
            series["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append(_Series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", labels, gr))
            if use.mig is None:
                gpu_util = _Series("DCGM_FI_DEV_GPU_UTIL", labels, round(own_gr * 100))
                series["DCGM_FI_DEV_GPU_UTIL"].append(gpu_util)
    bucket = int(at.timestamp() // SAMPLE_SECONDS)
    for (node, index), (use, load) in parents.items():
        load = min(load, 1.0)
        idle_w, max_w = _POWER.get(use.device.model, (40.0, 300.0))
        jitter = _unit(seed, node, index, bucket)
        # Whole-GPU series on a MIG parent carry no pod labels: no single pod holds the GPU.
        labels = _labels(use, driver_version, hostname_label, with_pod=use.device.mig is None)
        watts = idle_w + (max_w - idle_w) * load * 0.92 + 3 * jitter
        series["DCGM_FI_DEV_POWER_USAGE"].append(_Series("DCGM_FI_DEV_POWER_USAGE", labels, watts))
        temp = round(30 + 45 * load + 3 * jitter)
        series["DCGM_FI_DEV_GPU_TEMP"].append(_Series("DCGM_FI_DEV_GPU_TEMP", labels, temp))
    lines: list[str] = []
    for metric, help_text in _FAMILIES.items():
        if not series[metric]:
            continue
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        lines += [s.line() for s in series[metric]]
    return "\n".join(lines) + "\n" if lines else ""
