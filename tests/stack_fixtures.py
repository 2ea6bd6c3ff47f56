"""The whole stack for end-to-end tests: a simulated cluster, a real Celery worker (with beat) in its own
process, Redis, PostgreSQL and the live Django server.

The worker process reaches the same test database and broker as the tests. PostgreSQL and Redis are
required (the worker cannot share an in-memory SQLite database); .ci/run provides both.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.conf import settings
from django.db import connection
from kubernetes import client

from portal.workers import worker_argv
from scheduling.kube import keys
from scheduling.kube.client import reset_client
from scheduling.simcluster.testing import SimCluster, running_simcluster

ROOT = Path(__file__).resolve().parents[1]  # the checkout: the worker imports its code from there
SPEED = 10.0  # simulated seconds per real second
PR_SET_PDEATHSIG = 1
_own_queues = itertools.count()
T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], *, timeout: float = 15.0, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def managed_pods(stack: SimCluster, namespace: str) -> Counter[int]:
    """The portal's live pods (not being deleted) in ``namespace``, counted per workspace id."""
    core = client.CoreV1Api(stack.api_client())
    pods = Counter[int]()
    for pod in core.list_namespaced_pod(namespace, label_selector=f"{keys.MANAGED_BY}={keys.MANAGER}").items:
        if pod.metadata.deletion_timestamp is None:
            pods[int(pod.metadata.labels[keys.WORKSPACE_ID])] += 1
    return pods


def die_with_parent() -> None:
    """Linux: the worker gets SIGTERM when the test process dies, so an aborted run leaves no worker."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@dataclass
class Worker:
    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        queue = self.env["CELERY_QUEUE"]
        argv = worker_argv(schedule=self.log.with_suffix(".beat"), name=queue, queue=queue)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=out,
                preexec_fn=die_with_parent,
                start_new_session=True,  # its own process group: the pool's children can be killed with it
            )

    def tail(self, lines: int = 80) -> str:
        """The end of its log, the task lines only (what a failed test needs to say what the worker did)."""
        if not self.log.exists():
            return ""
        text = self.log.read_text(errors="replace").splitlines()
        tasks = [line[:300] for line in text if line.startswith("[2")]  # "[2026-...": the timestamped lines
        return "\n".join(tasks[-lines:])

    def kill(self) -> None:
        """Die the hard way (no warm shutdown): what a crashed node or OOM kill does."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # the main process and its pool children at once
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=15)  # a warm shutdown, else the group is killed below
        if self.process:
            # A pool child can outlive a warm shutdown of its main process: none may outlive the test.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
            self.process = None  # stopped and reaped: its group id is never signalled again


@pytest.fixture(scope="session")
def stack_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_simcluster(seed=11, speed=SPEED, tmp_dir=tmp_path_factory.mktemp("stack")) as cluster:
        yield cluster


_session_workers: list[Worker] = []  # the session's worker once a test made it (for no_session_worker)


@pytest.fixture(scope="session")
def worker(
    django_db_setup: Any, django_db_blocker: Any, stack_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Worker]:
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        pytest.skip("the full stack needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL; .ci/run sets both)")
    with django_db_blocker.unblock():
        url = _database_url()
    queue = f"test-{os.getpid()}"  # a queue of our own: no stray worker of another run can take our tasks
    env = dict(
        os.environ,
        CELERY_QUEUE=queue,
        DJANGO_SETTINGS_MODULE="portal.settings_test",
        PORTAL_ENV="test",
        DATABASE_URL=url,
        KUBECONFIG=str(stack_cluster.kubeconfig_path),
        SCHEDULING_INTERVAL_SECONDS="1",
        SCHEDULING_WATCH_CLUSTER="true",  # as in production: the cycle's capacity kept from watches
        RECONCILE_INTERVAL_SECONDS="1",
        PROVISIONING_RETRY_SECONDS="3",
        PLACEMENT_GRACE_SECONDS="2",
        SIMCLUSTER_JOB_SECONDS="40",  # 4 real seconds at SPEED
    )
    subprocess.run(
        [sys.executable, "-m", "celery", "-A", "portal", "purge", "-f"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    worker = Worker(env, log)
    worker.start()
    _session_workers.append(worker)
    yield worker
    _session_workers.remove(worker)
    worker.stop()


@pytest.fixture
def no_session_worker() -> None:
    """Stop the session's worker if a full-stack test started it (the next such test starts it again), without
    starting one: for tests that commit queued workspaces and admit them themselves, which its 1-s scheduling
    cycle would otherwise admit too, from under them."""
    for worker in _session_workers:
        worker.stop()


@pytest.fixture
def stack(worker: Worker, stack_cluster: SimCluster, settings: Any, transactional_db: None) -> Iterator[SimCluster]:
    """Per test: the web side talks to the same cluster as the worker."""
    settings.KUBECONFIG = str(stack_cluster.kubeconfig_path)
    settings.NOTEBOOK_PROXY_URL = stack_cluster.plain_url  # links as the demo makes them
    settings.SIMCLUSTER_JOB_SECONDS = 40
    settings.CELERY_TASK_DEFAULT_QUEUE = worker.env["CELERY_QUEUE"]  # what the web side enqueues reaches it
    reset_client()
    if worker.process is None or worker.process.poll() is not None:
        worker.start()
    yield stack_cluster
    reset_client()


@pytest.fixture
def cluster_client(stack_cluster: SimCluster, settings: Any, quiet_cluster_loops: None) -> Iterator[None]:
    """The portal's own client (``scheduling.kube.client.kube()``) pointed at the session's cluster, for tests
    that call cluster-reading code in this process without the worker (paused: its cycle would hold the lock
    a test's own ``run_cycle`` needs, and its sweep would delete the test's pods)."""
    settings.KUBECONFIG = str(stack_cluster.kubeconfig_path)
    reset_client()
    yield
    reset_client()


@pytest.fixture
def quiet_cluster_loops(request: pytest.FixtureRequest) -> Iterator[None]:
    """Pause the session's worker (if the stack is in use) for tests that stage workspace rows by hand,
    which its scheduling and reconcile loops would otherwise act on, and for tests that use the session's
    cluster without it: its orphan sweep cannot see a test's uncommitted rows and would delete their pods."""
    if connection.vendor != "postgresql" or not settings.REDIS_URL:
        yield
        return
    worker: Worker = request.getfixturevalue("worker")
    was_running = worker.process is not None and worker.process.poll() is None
    worker.stop()
    yield
    if was_running:  # else the next test that needs it (`stack`) starts it
        worker.start()


@pytest.fixture
def dedicated_worker(
    stack: SimCluster, worker: Worker, settings: Any, tmp_path: Path
) -> Iterator[Callable[..., Worker]]:
    """Swap the session's worker for one of this test's own, on its own queue and with its own settings
    (a worker to kill, longer jobs); the session's worker comes back afterwards."""
    started: list[Worker] = []

    def start(**env: str) -> Worker:
        worker.stop()
        # A queue never used before in this session: no task of an earlier test can land on it.
        queue = f"{worker.env['CELERY_QUEUE']}-own{next(_own_queues)}"
        own = Worker(worker.env | {"CELERY_QUEUE": queue, **env}, tmp_path / f"own-worker-{len(started)}.log")
        settings.CELERY_TASK_DEFAULT_QUEUE = queue
        own.start()
        started.append(own)
        return own

    yield start
    for own in started:
        own.stop()
        print(f"--- {own.log.name} ---\n{own.tail()}")  # shown only when the test failed
    settings.CELERY_TASK_DEFAULT_QUEUE = worker.env["CELERY_QUEUE"]
    worker.start()
