"""`python -m scheduling.simcluster` as the portal and the demo start it: a separate process."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from kubernetes import client, config

from scheduling.simcluster.testing import SimCluster
from tests.simcluster.conftest import phase_of, pod_manifest


def test_it_serves_on_loopback_writes_a_kubeconfig_and_stops_on_sigterm(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    server = subprocess.Popen(
        [sys.executable, "-m", "scheduling.simcluster", "--port", "0", "--kubeconfig", str(kubeconfig),
         "--seed", "3", "--speed", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        assert url.startswith("https://127.0.0.1:")

        api = config.new_client_from_config(config_file=str(kubeconfig))
        assert api.configuration.host == url
        nodes = client.CoreV1Api(api).list_node().items
        assert len(nodes) == 7
        api.close()
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=15) == 0


@pytest.mark.parametrize(("termination", "gone"), [(0.0, True), (600.0, False)])
def test_its_timings_come_from_the_command_line(tmp_path, termination, gone):
    kubeconfig = tmp_path / "kubeconfig"
    server = subprocess.Popen(
        [sys.executable, "-m", "scheduling.simcluster", "--port", "0", "--kubeconfig", str(kubeconfig),
         "--start-delay", "0", "--termination", str(termination), "--mig-reconfigure", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        cluster = SimCluster.from_kubeconfig(kubeconfig)  # its token and CA, as the server wrote them
        assert cluster.url == url and cluster.clock()["speed"] == 1.0

        api = cluster.api_client()
        v1 = client.CoreV1Api(api)
        v1.create_namespaced_pod("default", pod_manifest("quick"))
        cluster.settle()
        assert phase_of(v1, "default", "quick") == "Running"  # no start delay
        v1.delete_namespaced_pod("quick", "default")
        cluster.settle()
        remaining = [p.metadata.name for p in v1.list_namespaced_pod("default").items]
        assert ("quick" not in remaining) is gone  # gone at once, or still terminating
        api.close()
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=15) == 0
