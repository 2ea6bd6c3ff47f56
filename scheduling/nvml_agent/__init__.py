"""The pynvml node agent: dcgm-exporter's ``/metrics`` for clusters without DCGM (docs/nvml-agent.md).

One process per GPU node (a DaemonSet) reads NVML per GPU and per MIG instance, maps the GPUs' processes to
pods through ``/proc/<pid>/cgroup`` and the kubelet's ``/var/log/pods`` folder names, and serves the series
the portal reads (``scheduling/telemetry/dcgm.py``) under dcgm-exporter's names and labels.

It runs on nodes alone: it imports nothing of the project (an import-linter contract says so), only the
standard library and, at run time, ``pynvml`` (the ``nvidia-ml-py`` package).

- ``nvml``: NVML's answers as plain dataclasses (the ``pynvml`` module is a parameter, so tests replay
  recorded answers);
- ``pods``: host PID -> pod UID (cgroup) -> namespace and name (``/var/log/pods``);
- ``exposition``: dataclasses -> Prometheus text, pure;
- ``server``: the scrape-time reading, cached, and the HTTP server; ``__main__``: the command line.
"""
