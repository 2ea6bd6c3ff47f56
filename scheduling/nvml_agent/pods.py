"""Which pod a host process belongs to, without the Kubernetes API.

1. PID -> pod UID: ``<proc>/<pid>/cgroup`` names the pod's cgroup, in one of the kubelet's two forms:
   - systemd driver: ``…/kubepods-burstable.slice/kubepods-burstable-pod<uid, "-" as "_">.slice/…``
     (``kubepods-pod<uid>.slice`` for Guaranteed pods);
   - cgroupfs driver: ``…/kubepods/burstable/pod<uid>/<container id>`` (``/kubepods/pod<uid>/`` for
     Guaranteed).
   Both under cgroup v1 (one line per hierarchy) and v2 (one ``0::`` line). The path is relative to the
   reader's cgroup namespace, so from inside a container it may start ``/../..``: only the pod's own
   component is looked for. The container is ``cri-containerd-<id>.scope``, ``crio-<id>.scope``,
   ``docker-<id>.scope``, or the last component under cgroupfs.
2. Pod UID -> namespace and name: the kubelet keeps every pod's logs in ``/var/log/pods/<namespace>_<name>_<uid>/``
   with one folder per container. Names and namespaces are DNS names (no ``_``), so the folder name splits
   cleanly. No API access, no RBAC; the folder exists from the pod's start until it is removed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_SYSTEMD_POD = re.compile(r"kubepods(?:-[a-z]+)?-pod([0-9a-fA-F_]+)\.slice")
_CGROUPFS_POD = re.compile(r"/kubepods(?:/[a-z]+)?/pod([0-9a-fA-F-]+)(?:/|$)")
# systemd scopes (":" separates them in the containerd-under-systemd form "…slice:cri-containerd:<id>")
_SCOPE = re.compile(r"(?:^|[/:])(?:cri-containerd|crio|docker)[-:]([0-9a-f]{64})(?:\.scope)?$")
_BARE_ID = re.compile(r"/([0-9a-f]{64})$")


@dataclass(frozen=True)
class PodCgroup:
    uid: str
    container_id: str  # "" when the cgroup does not name it (a pod's own cgroup, conmon)


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    container: str  # "" unless the pod has exactly one container folder


def _from_path(path: str) -> PodCgroup | None:
    if (systemd := _SYSTEMD_POD.search(path)) is not None:
        uid = systemd[1].replace("_", "-")
    elif (cgroupfs := _CGROUPFS_POD.search(path)) is not None:
        uid = cgroupfs[1]
    else:
        return None
    container = _SCOPE.search(path) or _BARE_ID.search(path)
    return PodCgroup(uid=uid.lower(), container_id=container[1] if container else "")


def pod_cgroup(text: str) -> PodCgroup | None:
    """The pod (and container) a ``/proc/<pid>/cgroup`` text names, or None for a process outside pods."""
    for line in text.splitlines():
        _hierarchy, _controllers, path = [*line.split(":", 2), "", ""][:3]
        if (found := _from_path(path)) is not None:
            return found
    return None


def read_pod_cgroup(proc: Path, pid: int) -> PodCgroup | None:
    """None as well when the process is gone or its cgroup cannot be read: it is nobody's for this scrape."""
    try:
        return pod_cgroup((proc / str(pid) / "cgroup").read_text(errors="replace"))
    except OSError:
        return None


def pods_from_log_dirs(root: Path) -> dict[str, Pod]:
    """Pods by UID from the kubelet's ``/var/log/pods`` folder names; anything else there is ignored."""
    pods: dict[str, Pod] = {}
    try:
        entries = list(root.iterdir())
    except OSError:
        return pods
    for entry in entries:
        parts = entry.name.split("_")
        if len(parts) != 3 or not all(parts) or not entry.is_dir():
            continue
        namespace, name, uid = parts
        try:
            containers = [c.name for c in entry.iterdir() if c.is_dir()]
        except OSError:
            containers = []
        pods[uid.lower()] = Pod(namespace, name, uid.lower(), containers[0] if len(containers) == 1 else "")
    return pods


def pods_of(pids: set[int], proc: Path, log_dirs: Path) -> dict[int, Pod]:
    """The pod of each PID that has one on this node now."""
    cgroups = {pid: found for pid in pids if (found := read_pod_cgroup(proc, pid)) is not None}
    if not cgroups:
        return {}
    known = pods_from_log_dirs(log_dirs)
    return {pid: known[c.uid] for pid, c in cgroups.items() if c.uid in known}
