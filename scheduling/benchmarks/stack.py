"""What the full-stack benchmarks share: a generated cluster of whole-GPU nodes, a real Celery worker (with
beat) as a child process, a whole-GPU offering discovered from the cluster, and CPU time per process.

Used by ``manage.py bench_workspaces`` and ``manage.py bench_queue_stack``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml
from django.conf import settings
from django.db import connection
from django.db.models import QuerySet

from portal.billing.models import UsageInterval
from portal.workers import worker_argv
from scheduling.discovery import propose_offerings
from scheduling.kube.client import kube
from scheduling.simcluster.controllers import Timings
from workspaces.models import GpuOffering, Workspace, WorkspaceEvent

H100 = "H100-80GB-HBM3"
SIM_SEED = 1  # the simulated cluster's seed: with a pod's uid, what its workload profile plays
PR_SET_PDEATHSIG = 1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cluster_file(folder: Path, nodes: int = 16, *, gpus: int = 8, model: str = H100) -> Path:
    """A nodes file for the simulated cluster: ``nodes`` identical nodes of ``gpus`` whole GPUs."""
    node = {
        "cpu": 224,
        "memory": "2Ti",
        "gpu": {"model": model, "count": gpus},
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    }
    path = folder / "bench-cluster.yaml"
    prefix = model.split("-")[0].lower()
    path.write_text(yaml.safe_dump({"seed": 1, "nodes": [{"name": f"{prefix}-{i}", **node} for i in range(nodes)]}))
    return path


def database_url() -> str:
    """This process's database as a URL, so that a child process reaches the same one (a test database too)."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM when the benchmark dies, so an aborted run leaves no worker behind."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start_worker(
    kubeconfig: Path, queue: str, log: Path, *, concurrency: int = 3, consume: Sequence[str] | None = None,
    beat: bool = True, env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:  # fmt: skip
    """A Celery worker (with embedded beat unless not ``beat``) on ``consume``, by default every queue of
    its own ``queue``, talking to this process's database and the cluster of ``kubeconfig``; ``env``
    overrides settings (intervals, notice, simulated job length)."""
    full_env = dict(
        os.environ,
        KUBECONFIG=str(kubeconfig),
        CELERY_QUEUE=queue,
        SCHEDULING_INTERVAL_SECONDS="1",
        RECONCILE_INTERVAL_SECONDS="0.5",
        PORTAL_ENV=settings.PORTAL_ENV,
    )
    if connection.vendor == "postgresql":
        full_env["DATABASE_URL"] = database_url()
    full_env.update(env or {})
    argv = worker_argv(
        schedule=log.with_suffix(".beat") if beat else None, name=log.stem + "-" + queue, queue=queue,
        consume=consume, concurrency=concurrency,
    )  # fmt: skip
    with log.open("ab") as out:
        size = out.tell()
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            argv,
            cwd=settings.BASE_DIR,
            env=full_env,
            stdout=out,
            stderr=out,
            preexec_fn=_die_with_parent,
            start_new_session=True,  # its own process group: the pool's children go with it
        )
    _log_size_at_start[process.pid] = size
    return process


_log_size_at_start: dict[int, int] = {}  # worker pid -> where its log ended when it started


def wait_ready(worker: subprocess.Popen[bytes], log: Path, timeout_s: float = 60.0) -> None:
    """Wait until the worker started by :func:`start_worker` says it is ready (in what it wrote to ``log``
    since it started: the log is appended to, run after run)."""
    since = _log_size_at_start.get(worker.pid, 0)
    deadline = time.monotonic() + timeout_s
    while b" ready." not in (log.read_bytes()[since:] if log.exists() else b""):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Celery worker did not start; its log:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Warm shutdown, then the rest of the process group the hard way: a pool child can outlive its main
    process's warm shutdown and still commit a task's rows after the caller moved on (say, to delete them)."""
    if process.poll() is None:
        process.terminate()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


@dataclass(frozen=True)
class SimProcess:
    process: subprocess.Popen[bytes]
    url: str
    kubeconfig: Path


@contextmanager
def simcluster_process(
    nodes_file: Path,
    folder: Path,
    *,
    speed: float = 1.0,
    timings: Timings | None = None,
    workload_speed: float = 1.0,
    plain_port: int | None = None,
    seed: int = SIM_SEED,
) -> Iterator[SimProcess]:
    """The simulated cluster in a process of its own (a core of its own, and its CPU time measurable apart);
    ``plain_port``: also serve /metrics and the service proxy over plain HTTP there."""
    kubeconfig = folder / "kubeconfig"
    log = folder / "simcluster.log"
    timings = timings or Timings()
    argv = [
        sys.executable, "-m", "scheduling.simcluster", "--port", "0", "--nodes", str(nodes_file),
        "--kubeconfig", str(kubeconfig), "--seed", str(seed), "--speed", str(speed),
        "--start-delay", str(timings.start_delay_s), "--termination", str(timings.termination_s),
        "--mig-reconfigure", str(timings.mig_reconfigure_s), "--workload-speed", str(workload_speed),
    ]  # fmt: skip
    if plain_port is not None:
        argv += ["--plain-port", str(plain_port)]
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            argv, cwd=settings.BASE_DIR, stdout=subprocess.PIPE, stderr=out, preexec_fn=_die_with_parent
        )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().decode().strip()  # printed once it serves and wrote the kubeconfig
        if not url.startswith("http"):
            raise RuntimeError(f"the simulated cluster did not start; see {log}")
        yield SimProcess(process, url, kubeconfig)
    finally:
        stop_process(process)


def whole_gpu_offering(slug: str) -> GpuOffering:
    """The whole-GPU offering the cluster's nodes propose (as ``discover_offerings`` would), under ``slug``."""
    proposal = next(p for p in propose_offerings(kube().list("Node", None, "")) if p.kind == "whole")
    fields = asdict(proposal)
    fields.pop("nodes")
    fields["slug"] = slug
    return GpuOffering.objects.create(**fields)


def delete_workspaces(workspaces: QuerySet[Workspace]) -> None:
    """Remove a run's workspaces: the ledger's rows first (it protects what it bills), then their events."""
    UsageInterval.objects.filter(workspace__in=workspaces).delete()
    WorkspaceEvent.objects.filter(workspace__in=workspaces).delete()
    workspaces.delete()


def cpu_seconds(pid: int, *, with_children: bool = True) -> float:
    """User + system CPU seconds of a live process, plus (``with_children``) its live and reaped children's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the command name: utime, stime, cutime, cstime are fields 14-17 of stat(5), here 11-14.
    total = sum(int(f) for f in fields[11 : 15 if with_children else 13]) / CLOCK_TICKS
    if with_children:
        for child in _children(pid):
            total += cpu_seconds(child)
    return total


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def cpu_seconds_by_name(name: str) -> float:
    """CPU seconds of every process on this machine whose command is ``name`` (e.g. the PostgreSQL server's)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        head, _, tail = text.rpartition(")")
        if head.split("(", 1)[-1] == name:
            total += sum(int(f) for f in tail.split()[11:15]) / CLOCK_TICKS  # reaped children (exited backends) too
    return total
