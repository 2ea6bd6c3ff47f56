"""dcgm-exporter series, read as what each pod's GPUs do (facts: ``shared/design/GPU-ON-KUBERNETES.md`` §6).

Pure functions over ``(name, labels, value)`` samples, so one reading serves every source: a direct scrape of
an exporter's text (``parse_exposition``), a Prometheus query (``scheduling/telemetry/sources.py``), and the
pynvml node agent, which serves the same names and labels.

- Pod labels exist only while a pod holds the device; series without them are nobody's and are skipped.
- Through a ServiceMonitor with ``honorLabels: false`` the pod labels are ``exported_namespace`` and
  ``exported_pod`` (the plain ones then name the exporter's own pod); ``--use-old-namespace`` gives
  ``pod_namespace``/``pod_name`` and ``uuid``. ``Hostname`` became ``hostname`` in 2026. All are read.
- MIG: ``GPU_I_ID``/``GPU_I_PROFILE`` mark a GPU instance; ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` and the frame
  buffer are per instance, ``DCGM_FI_DEV_GPU_UTIL`` is not supported there and is ignored if present.
- Time-slicing: a shared GPU's series carry one pod's labels, and its figures are the whole device's. With
  ``--kubernetes-virtual-gpus`` every sharing pod has series and ``GPU_UTIL``/``FB_USED`` are its own
  process's; there (a device that several pods report) a pod's activity is its ``GPU_UTIL``, never the
  device's engine activity, which its neighbours' work would make look busy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0-1, whole GPUs and MIG instances
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent, whole GPUs only
METRICS = (GR_ENGINE_ACTIVE, FB_USED, FB_FREE, GPU_UTIL)

Sample = tuple[str, Mapping[str, str], float]
PodKey = tuple[str, str]  # (namespace, pod)


@dataclass(frozen=True)
class DeviceReading:
    """One GPU (or MIG instance) held by one pod, at one moment."""

    namespace: str
    pod: str
    hostname: str
    gpu: str  # the parent GPU's index on its node
    uuid: str  # the parent GPU's UUID
    mig_instance: str  # GPU_I_ID, "" for a whole GPU
    mig_profile: str  # GPU_I_PROFILE, e.g. 1g.10gb
    observed_at: datetime
    gr_engine_active: float | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    gpu_util_percent: float | None = None  # never for MIG


@dataclass(frozen=True)
class PodActivity:
    """What a pod's GPUs did: the mean engine activity over its devices, memory summed."""

    namespace: str
    pod: str
    devices: int
    gr_engine_active: float | None  # None when no device reported it
    fb_used_mib: float | None
    fb_total_mib: float | None
    observed_at: datetime  # the oldest of its readings: how fresh the figure is


def _first(labels: Mapping[str, str], *keys: str) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def workload_of(labels: Mapping[str, str]) -> PodKey | None:
    """The pod holding the device, or None. exported_* first: where they exist, the plain labels name
    the exporter's pod, not the workload's. (A relabelled series of a GPU no pod holds carries only the
    exporter's own namespace and pod; those match no workspace, so the join with workspaces drops them.)"""
    if "exported_pod" in labels or "exported_namespace" in labels:
        namespace, pod = labels.get("exported_namespace", ""), labels.get("exported_pod", "")
    else:
        namespace, pod = _first(labels, "namespace", "pod_namespace"), _first(labels, "pod", "pod_name")
    return (namespace, pod) if namespace and pod else None


_SAMPLE_LINE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?[ \t]+\S+([ \t]+-?\d+)?[ \t]*")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")
_WANTED = tuple(f"{name}{{" for name in METRICS) + tuple(f"{name} " for name in METRICS)


def parse_exposition(text: str) -> list[Sample]:
    """The samples of the metrics the portal reads from an exporter's Prometheus text format.

    Only those lines are parsed, with one regular expression: an exporter page holds some 20 families
    per GPU, and prometheus_client's general parser took 16 s of CPU for a 1,000-node cluster's pages
    (2.2 s for the wanted lines alone) against 0.4 s here (``python -m scheduling.benchmarks.telemetry``).
    Raises ValueError for text that is not the format (an HTML error page, say)."""
    lines = text.splitlines()
    first = next((line for line in lines if line.strip() and not line.startswith("#")), None)
    if first is not None and _SAMPLE_LINE.fullmatch(first) is None:
        raise ValueError(f"not the Prometheus text format: {first[:80]!r}")
    samples: list[Sample] = []
    for line in lines:
        if not line.startswith(_WANTED):
            continue
        head, brace, rest = line.partition("{")
        if brace:
            labels_text, closed, tail = rest.rpartition("}")
            if not closed:
                raise ValueError(f"unclosed labels: {line[:80]!r}")
        else:
            head, _, tail = line.partition(" ")
            labels_text = ""
        fields = tail.split()
        if not fields:
            raise ValueError(f"a sample without a value: {line[:80]!r}")
        labels = {
            key: _ESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], value) if "\\" in value else value
            for key, value in _LABEL.findall(labels_text)
        }
        samples.append((head.strip(), labels, float(fields[0])))
    return samples


_FIELD = {GR_ENGINE_ACTIVE: "gr_engine_active", FB_USED: "fb_used_mib", FB_FREE: "fb_free_mib"}


def device_readings(samples: Iterable[Sample], observed_at: datetime) -> list[DeviceReading]:
    """Samples grouped per (pod, node, GPU, MIG instance); devices no pod holds are left out."""
    # (namespace, pod, hostname, gpu, uuid, mig_instance, mig_profile): the reading's identity fields, in order
    fields: dict[tuple[str, str, str, str, str, str, str], dict[str, float]] = {}
    for name, labels, value in samples:
        workload = workload_of(labels)
        if workload is None or value != value:  # NaN: the exporter had no value
            continue
        mig = labels.get("GPU_I_ID", "")
        if name == GPU_UTIL and mig:
            continue  # not supported for MIG; an exporter that sends it sends the parent's figure
        key = (
            *workload,
            _first(labels, "hostname", "Hostname"),
            labels.get("gpu", ""),
            _first(labels, "UUID", "uuid"),
            mig,
            labels.get("GPU_I_PROFILE", ""),
        )
        fields.setdefault(key, {})[_FIELD.get(name, "gpu_util_percent")] = value
    return [
        DeviceReading(
            *key,
            observed_at=observed_at,
            gr_engine_active=values.get("gr_engine_active"),
            fb_used_mib=values.get("fb_used_mib"),
            fb_free_mib=values.get("fb_free_mib"),
            gpu_util_percent=values.get("gpu_util_percent"),
        )
        for key, values in fields.items()
    ]


def pod_activity(readings: Iterable[DeviceReading]) -> dict[PodKey, PodActivity]:
    """Per pod: mean GR engine activity over the devices that reported it (a whole GPU's GPU_UTIL stands in
    where an older GPU has no profiling metrics), frame buffer summed."""
    by_pod: dict[PodKey, list[DeviceReading]] = {}
    holders: dict[tuple[str, str, str], set[PodKey]] = {}
    for reading in readings:
        by_pod.setdefault((reading.namespace, reading.pod), []).append(reading)
        holders.setdefault(_device(reading), set()).add((reading.namespace, reading.pod))
    activity = {}
    for key, devices in by_pod.items():
        shared = [len(holders[_device(d)]) > 1 for d in devices]
        active = [a for a in (_activity(d, s) for d, s in zip(devices, shared, strict=True)) if a is not None]
        used = [d.fb_used_mib for d in devices if d.fb_used_mib is not None]
        total = [  # a shared device's free memory is the device's: no own total there
            d.fb_used_mib + d.fb_free_mib
            for d, s in zip(devices, shared, strict=True)
            if d.fb_used_mib is not None and d.fb_free_mib is not None and not s
        ]
        activity[key] = PodActivity(
            namespace=key[0],
            pod=key[1],
            devices=len(devices),
            gr_engine_active=sum(active) / len(active) if active else None,
            fb_used_mib=sum(used) if used else None,
            fb_total_mib=sum(total) if total else None,
            observed_at=min(d.observed_at for d in devices),
        )
    return activity


def _device(reading: DeviceReading) -> tuple[str, str, str]:
    return reading.hostname, reading.uuid or reading.gpu, reading.mig_instance


def _activity(device: DeviceReading, shared: bool) -> float | None:
    if shared:  # virtual GPUs: the pod's own process's utilisation, or nothing
        return None if device.gpu_util_percent is None else device.gpu_util_percent / 100
    if device.gr_engine_active is not None:
        return device.gr_engine_active
    if device.gpu_util_percent is not None:
        return device.gpu_util_percent / 100
    return None
