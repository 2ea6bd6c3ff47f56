"""The informer against the simulated cluster, over HTTP with the official client: it follows pods and
nodes, resumes a dropped or ended watch from its resourceVersion, relists on 410 Gone, and stops cleanly.

Every test waits on a condition with a bounded timeout; every informer a test starts is stopped after it
(the autouse fixture checks that no informer thread outlives a test)."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from scheduling.kube import informer as informer_module
from scheduling.kube.calls import Kube, KubeError, WatchStream
from scheduling.kube.informer import Informer, informer_for, stop_all
from scheduling.simcluster.testing import SimCluster, running_simcluster
from tests.stack_fixtures import wait_for

SPEED = 10.0  # simulated seconds per real second: a pod starts in 0.2 s, a fault of 3,600 s lasts 6 min
_names = itertools.count()

# The client itself calls the deprecated urllib3 getheaders() when it builds an ApiException.
pytestmark = pytest.mark.filterwarnings("ignore:HTTPResponse.getheaders:DeprecationWarning")


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_simcluster(seed=5, speed=SPEED, tmp_dir=tmp_path_factory.mktemp("informer")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def api(sim: SimCluster) -> Iterator[client.ApiClient]:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(sim.kubeconfig_path), client_configuration=configuration)
    configuration.retries = False
    api_client = client.ApiClient(configuration)
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def kube(api: client.ApiClient) -> Kube:
    return Kube(api, timeout=5.0)


@pytest.fixture(scope="module")
def v1(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(autouse=True)
def _no_informer_outlives_a_test(sim: SimCluster) -> Iterator[None]:
    yield
    sim.clear_faults()
    stop_all()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("informer-")]


@pytest.fixture
def namespace(v1: client.CoreV1Api) -> Iterator[str]:
    name = f"inf-{next(_names)}"
    v1.create_namespace({"metadata": {"name": name}})
    yield name
    v1.delete_namespace(name)


@pytest.fixture
def pods(kube: Kube) -> Iterator[Informer]:
    informer = Informer(kube, "Pod").start()
    assert informer.wait_synced(10)
    yield informer
    informer.stop()


def make_pod(v1: client.CoreV1Api, namespace: str, name: str) -> None:
    container = {"name": "main", "image": "busybox"}
    body = {"metadata": {"name": name}, "spec": {"containers": [container], "restartPolicy": "Never"}}
    v1.create_namespaced_pod(namespace, body)


def phase(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def in_namespace(changed: dict[tuple[str, str], Any], namespace: str) -> dict[tuple[str, str], Any]:
    return {key: obj for key, obj in changed.items() if key[0] == namespace}


class _Chunks:
    """Enough of a urllib3 response for WatchStream: the body in the chunks given."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.released = False

    def stream(self, amt: int | None = None) -> Iterator[bytes]:
        yield from self.chunks

    def close(self) -> None:
        self.released = True

    def release_conn(self) -> None:
        pass


def test_watch_lines_are_decoded_whatever_the_chunking() -> None:
    one = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "zoë"}}}, ensure_ascii=False).encode()
    two = json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "7"}}}).encode()
    body = one + b"\n\n" + two + b"\n"
    cut = body.index("ë".encode()) + 1  # inside the two bytes of the ë
    for chunks in ([body], [body[:cut], body[cut:]], [bytes([b]) for b in body]):
        response = _Chunks(*chunks)
        events = list(WatchStream(response))
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert events[0]["object"]["metadata"]["name"] == "zoë"
        assert response.released


def test_a_garbled_watch_line_is_a_kube_error() -> None:
    with pytest.raises(KubeError):
        list(WatchStream(_Chunks(b'{"type": "ADD\n')))


def test_the_first_drain_says_rebuild_from_the_snapshot(kube: Kube) -> None:
    nodes = Informer(kube, "Node").start()
    try:
        assert nodes.wait_synced(10)
        listed = {("", n["metadata"]["name"]) for n in kube.list("Node", None)}
        assert set(nodes.snapshot()) == listed and listed
        assert nodes.drain().relisted
        assert nodes.drain() == informer_module.Changes(relisted=False, changed={})
        assert nodes.resource_version
    finally:
        nodes.stop()


def test_it_follows_a_pod_from_added_through_bound_and_running_to_deleted(pods, v1, namespace) -> None:
    pods.drain()
    key = (namespace, "p")
    make_pod(v1, namespace, "p")
    running = wait_for(lambda: phase(pods.snapshot().get(key)) == "Running" and pods.snapshot()[key], what="Running")
    assert running["spec"]["nodeName"]  # bound on the way

    changes = pods.drain()  # ADDED, bound, Running...: only the latest state per key
    assert not changes.relisted
    assert in_namespace(changes.changed, namespace) == {key: running}

    v1.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
    wait_for(lambda: key not in pods.snapshot(), what="the pod to go")
    assert in_namespace(pods.drain().changed, namespace) == {key: None}


def test_a_listener_hears_every_event_with_the_object_before_and_after_it(kube, v1, namespace) -> None:
    heard: list[tuple[str, str]] = []  # (phase before, phase after); "gone" for no object
    informer = Informer(kube, "Pod")
    informer.listen(
        lambda before, after: heard.append((phase(before) or "gone", phase(after) or "gone"))
        if (after or before or {})["metadata"]["namespace"] == namespace
        else None
    )
    informer.start()
    try:
        assert informer.wait_synced(10)
        make_pod(v1, namespace, "p")
        wait_for(lambda: ("Pending", "Running") in heard, what="the pod to start")
        v1.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
        wait_for(lambda: heard[-1][1] == "gone", what="the pod to go")
    finally:
        informer.stop()
    assert heard[0][0] == "gone"  # added: nothing before it
    assert all(after == heard[i + 1][0] for i, (_, after) in enumerate(heard[:-1]))  # each follows the last


def test_a_dropped_watch_resumes_from_its_resource_version_without_losing_events(pods, sim, v1, namespace) -> None:
    pods.drain()
    # While the watch is down (dropped, and every new watch refused), pods come and one goes.
    sim.inject_fault(verb="watch", resource="pods", status=503, duration_s=3600)
    watches = pods.watches
    assert sim.drop_watches() >= 1
    for name in ("a", "b", "c"):
        make_pod(v1, namespace, name)
    v1.delete_namespaced_pod("c", namespace, grace_period_seconds=0)
    wait_for(lambda: len(v1.list_namespaced_pod(namespace).items) == 2, what="c to go")
    assert not in_namespace(pods.snapshot(), namespace)  # nothing can have reached it

    sim.clear_faults()
    wait_for(lambda: pods.watches > watches, what="a new watch")
    wait_for(lambda: {k[1] for k in in_namespace(pods.snapshot(), namespace)} == {"a", "b"}, what="a and b")

    changes = pods.drain()
    assert not changes.relisted and pods.relists == 0
    assert set(in_namespace(changes.changed, namespace)) == {(namespace, "a"), (namespace, "b"), (namespace, "c")}
    assert changes.changed[(namespace, "c")] is None


def test_a_watch_the_server_ends_is_watched_again_and_bookmarks_move_the_resource_version(kube, v1) -> None:
    informer = Informer(kube, "Pod", watch_timeout_s=1).start()  # every stream ends after a second
    try:
        assert informer.wait_synced(10)
        before = int(informer.resource_version)
        v1.create_namespace({"metadata": {"name": "inf-bookmark"}})  # moves the resourceVersion, no pod event
        wait_for(lambda: informer.watches >= 3, what="the watch to end and resume twice")
        wait_for(lambda: int(informer.resource_version) > before, what="a bookmark")
        assert informer.relists == 0
        make_pod(v1, "inf-bookmark", "late")
        wait_for(lambda: ("inf-bookmark", "late") in informer.snapshot(), what="the pod after resuming")
    finally:
        informer.stop()
        v1.delete_namespace("inf-bookmark")


def test_an_expired_resource_version_in_the_stream_means_relist(pods, sim, v1, namespace) -> None:
    pods.drain()
    sim.inject_fault(verb="watch", resource="pods", status=503, duration_s=3600)
    sim.drop_watches()
    make_pod(v1, namespace, "after")
    sim.admin("POST", "watches/compact")  # the informer's resourceVersion is history now
    sim.clear_faults()

    wait_for(lambda: pods.relists == 1, what="the relist")
    wait_for(lambda: (namespace, "after") in pods.snapshot(), what="the pod, listed")
    assert pods.drain().relisted
    assert not pods.drain().relisted


def test_a_410_answer_to_the_watch_request_also_means_relist(pods, sim, v1, namespace) -> None:
    pods.drain()
    sim.inject_fault(verb="watch", resource="pods", status=410, count=1)
    sim.drop_watches()
    wait_for(lambda: pods.relists == 1, what="the relist")
    make_pod(v1, namespace, "then")
    wait_for(lambda: (namespace, "then") in pods.snapshot(), what="the pod, watched after the relist")
    assert pods.drain().relisted


def test_failures_back_off_and_never_kill_the_thread(kube, sim, v1, namespace) -> None:
    sim.inject_fault(verb="list", resource="pods", status=500, count=2)
    informer = Informer(kube, "Pod").start()
    try:
        assert informer.wait_synced(10)  # after 0.5 s and 1 s pauses
        make_pod(v1, namespace, "x")
        wait_for(lambda: (namespace, "x") in informer.snapshot(), what="the pod")
    finally:
        informer.stop()


def test_stop_ends_the_thread_and_its_stream(kube) -> None:
    informer = Informer(kube, "Pod").start()
    assert informer.wait_synced(10)
    wait_for(lambda: informer.watches == 1 and informer._stream is not None, what="the watch to open")
    stream = informer._stream
    started = time.monotonic()
    informer.stop()
    assert time.monotonic() - started < 5  # the blocked read was ended, not waited out (300 s)
    assert not informer.alive and informer.started
    assert stream is not None and stream.closed


def test_stop_during_a_backoff_is_prompt(kube, sim) -> None:
    sim.inject_fault(verb="list", resource="nodes", status=503, duration_s=3600)
    informer = Informer(kube, "Node").start()
    assert not informer.wait_synced(2)  # failing, backing off
    informer.stop()
    assert not informer.alive and not informer.synced


def test_the_registry_keeps_one_per_cluster_and_kind_and_starts_afresh_after_a_fork(kube, monkeypatch) -> None:
    first = informer_for(kube, "Pod")
    assert informer_for(kube, "Pod") is first and first.alive
    nodes = informer_for(kube, "Node")
    assert nodes is not first and nodes.kind == "Node"

    parent_pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: parent_pid + 1)  # as in a prefork child
    child = informer_for(kube, "Pod")
    try:
        assert child is not first and child.alive
        assert child.wait_synced(10)
        assert first.alive  # the parent's is left alone: its socket is not the child's to close
    finally:
        stop_all()  # the child's
        monkeypatch.undo()
        for parents in (first, nodes):
            parents.stop()  # in a real fork, the parent's own shutdown would
    assert not child.alive and not first.alive
