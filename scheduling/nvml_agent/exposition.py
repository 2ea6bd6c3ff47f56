"""A node's NVML reading as dcgm-exporter's ``/metrics`` page (facts: ``shared/design/GPU-ON-KUBERNETES.md`` §6).

Pure. Same names, labels and label order as dcgm-exporter, so the portal's reader
(``scheduling/telemetry/dcgm.py``) and any Prometheus rule written for dcgm-exporter read it unchanged:

- ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName`` name the parent GPU; MIG series add
  ``GPU_I_PROFILE`` and ``GPU_I_ID``; then ``Hostname``, ``DCGM_FI_DRIVER_VERSION``, and ``container``,
  ``namespace``, ``pod`` while a pod's process runs on the device.
- Whole GPUs: ``DCGM_FI_DEV_GPU_UTIL`` (%), ``DCGM_FI_DEV_FB_USED``/``FB_FREE`` (MiB) and
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (here NVML's utilisation / 100: coarser, see ``nvml``).
- MIG instances: ``FB_USED``/``FB_FREE`` per instance; no ``GPU_UTIL`` (dcgm-exporter has none there either)
  and no ``GR_ENGINE_ACTIVE`` while NVML gives no utilisation (a missing series, never 0). The MIG parent
  gets no series: dcgm-exporter gives it only power and temperature, which the agent does not read.
- Devices several pods use (time-slicing) get one series per pod, each with the device's figures, as
  dcgm-exporter's ``--kubernetes-virtual-gpus`` does; a device no pod uses gets series without pod labels.
- ``gpuportal_nvml_agent_up``: 1 when NVML answered this scrape, 0 when it could not be read (no driver).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduling.nvml_agent.nvml import Gpu, MigInstance, NodeReading, Process
from scheduling.nvml_agent.pods import Pod

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
UP = "gpuportal_nvml_agent_up"

# HELP worded as dcgm-exporter's counters CSV, with what differs here.
_HELP = {
    GPU_UTIL: "GPU utilization (in %).",
    FB_FREE: "Framebuffer memory free (in MiB).",
    FB_USED: "Framebuffer memory used (in MiB).",
    GR_ENGINE_ACTIVE: "Ratio of time the graphics engine is active (NVML agent: GPU utilization / 100, coarser).",
    UP: "1 if the NVML node agent could read NVML on this scrape, 0 if not (no driver, no library, no permission).",
}

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class _Sample:
    metric: str
    labels: Labels
    value: float | int


def escape(value: str) -> str:
    """A label value as the text format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float | int) -> str:
    return str(value) if isinstance(value, int) else repr(float(value))


def _line(sample: _Sample) -> str:
    body = ",".join(f'{key}="{escape(value)}"' for key, value in sample.labels)
    return f"{sample.metric}{{{body}}} {_number(sample.value)}" if body else f"{sample.metric} {_number(sample.value)}"


def _holders(processes: Iterable[Process], pods: Mapping[int, Pod]) -> list[Pod | None]:
    """The distinct pods running on a device, in PID order; [None] for a device no pod uses."""
    found: dict[tuple[str, str], Pod] = {}
    for process in sorted(processes, key=lambda p: p.pid):
        pod = pods.get(process.pid)
        if pod is not None:
            found.setdefault((pod.namespace, pod.name), pod)
    return list(found.values()) or [None]


def _device_labels(gpu: Gpu, mig: MigInstance | None, hostname: str, driver: str, pod: Pod | None) -> Labels:
    labels = [
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid),
        ("pci_bus_id", gpu.pci_bus_id),
        ("device", f"nvidia{gpu.minor_number if gpu.minor_number is not None else gpu.index}"),
        ("modelName", gpu.name),
    ]
    if mig is not None:
        labels += [("GPU_I_PROFILE", mig.profile), ("GPU_I_ID", str(mig.gpu_instance_id))]
    labels += [("Hostname", hostname), ("DCGM_FI_DRIVER_VERSION", driver)]
    if pod is not None:
        labels += [("container", pod.container), ("namespace", pod.namespace), ("pod", pod.name)]
    return tuple(labels)


def _samples(node: NodeReading, hostname: str, pods: Mapping[int, Pod]) -> Iterable[_Sample]:
    for gpu in node.gpus:
        devices: list[tuple[MigInstance | None, Gpu | MigInstance]] = (
            [(None, gpu)] if gpu.mig is None else [(m, m) for m in gpu.mig]
        )
        for mig, device in devices:
            for pod in _holders(device.processes, pods):
                labels = _device_labels(gpu, mig, hostname, node.driver_version, pod)
                if device.memory is not None:
                    yield _Sample(FB_FREE, labels, device.memory.free_mib)
                    yield _Sample(FB_USED, labels, device.memory.used_mib)
                if device.activity is not None:
                    yield _Sample(GR_ENGINE_ACTIVE, labels, device.activity)
                if mig is None and device.utilization_percent is not None:
                    yield _Sample(GPU_UTIL, labels, round(device.utilization_percent))


def render(node: NodeReading | None, hostname: str, pods: Mapping[int, Pod]) -> str:
    """The page for one scrape; ``node`` None when NVML could not be read (only the ``up`` gauge, 0).
    ``pods``: the pod of each PID running on the node's devices, where it has one."""
    by_metric: dict[str, list[_Sample]] = {metric: [] for metric in _HELP}
    for sample in _samples(node, hostname, pods) if node is not None else ():
        by_metric[sample.metric].append(sample)
    by_metric[UP].append(_Sample(UP, (), 0 if node is None else 1))
    lines: list[str] = []
    for metric, samples in by_metric.items():
        if samples:
            lines += [f"# HELP {metric} {_HELP[metric]}", f"# TYPE {metric} gauge", *map(_line, samples)]
    return "\n".join(lines) + "\n"
