"""`python -m scheduling.simcluster` as the portal and the demo start it: a separate process."""

from __future__ import annotations

import signal
import subprocess
import sys

from kubernetes import client, config


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
