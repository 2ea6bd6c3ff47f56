"""A stand-in for the ``pynvml`` module that replays recorded NVML answers (``recorded/*.json``).

The real library cannot run here: this machine has no GPU and no NVIDIA driver (``pynvml.nvmlInit()``
raises ``NVMLError_LibraryNotFound``). The recordings are written by hand in the shape pynvml 13.580.82
returns (sizes and MIG profiles from the facts doc, §3 and §7), not captured on hardware.

Errors are the installed pynvml's own classes, built from the real codes (``{"error": "NOT_SUPPORTED"}`` ->
``pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)``, which is an ``NVMLError_NotSupported``). Constants
and exception classes come from the real module; any NVML function not replayed here raises
AttributeError, so the real library is never reached.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

RECORDED = Path(__file__).parent / "recorded"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / f"{name}.json").read_text())
    return data


def _answer(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"error"}:
        raise pynvml.NVMLError(getattr(pynvml, f"NVML_ERROR_{value['error']}"))
    if isinstance(value, dict):
        return SimpleNamespace(**value)
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return [SimpleNamespace(**v) for v in value]
    return value


class Handle:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def get(self, key: str) -> Any:
        return _answer(self.data[key])  # a key missing from a recording is a test error (KeyError)


class FakeNvml:
    def __init__(self, recording: dict[str, Any]) -> None:
        self.recording = recording
        self.init_error: dict[str, str] | None = recording.get("init")
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVMLError", "NVML_")):
            return getattr(pynvml, name)
        raise AttributeError(f"not replayed: {name}")

    def _call(self, name: str) -> None:
        self.calls.append(name)

    def nvmlInit(self) -> None:
        self._call("nvmlInit")
        if self.init_error is not None:
            _answer(self.init_error)

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.recording["driver_version"])

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        return len(self.recording["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        return Handle(self.recording["devices"][index])

    def nvmlDeviceGetName(self, handle: Handle) -> Any:
        return handle.get("name")

    def nvmlDeviceGetUUID(self, handle: Handle) -> Any:
        return handle.get("uuid")

    def nvmlDeviceGetMinorNumber(self, handle: Handle) -> Any:
        return handle.get("minor_number")

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> Any:
        return handle.get("pci_info")

    def nvmlDeviceGetMemoryInfo(self, handle: Handle) -> Any:
        return handle.get("memory_info")

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Any:
        return handle.get("utilization_rates")

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> Any:
        return handle.get("compute_running_processes")

    def nvmlDeviceGetMigMode(self, handle: Handle) -> Any:
        return handle.get("mig_mode")

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Handle) -> Any:
        return handle.get("max_mig_device_count")

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Handle, index: int) -> Handle:
        slot = handle.data["mig_devices"][index]
        if slot is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return Handle(slot)

    def nvmlDeviceGetGpuInstanceId(self, handle: Handle) -> Any:
        return handle.get("gpu_instance_id")

    def nvmlDeviceGetComputeInstanceId(self, handle: Handle) -> Any:
        return handle.get("compute_instance_id")

    def nvmlDeviceGetAttributes(self, handle: Handle) -> Any:
        return handle.get("attributes")

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: Handle, profile: int) -> Any:
        self._call("nvmlDeviceGetGpuInstanceProfileInfo")
        return _answer(handle.data["gpu_instance_profiles"][str(profile)])


def host_files(recording: dict[str, Any], root: Path) -> tuple[Path, Path]:
    """The recording's ``/proc/<pid>/cgroup`` files and ``/var/log/pods`` folders under ``root``."""
    proc, pod_logs = root / "proc", root / "pods"
    for pid, text in recording.get("proc", {}).items():
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cgroup").write_text(text)
    for folder in recording.get("pod_logs", []):
        (pod_logs / folder).mkdir(parents=True)
    pod_logs.mkdir(parents=True, exist_ok=True)
    return proc, pod_logs
