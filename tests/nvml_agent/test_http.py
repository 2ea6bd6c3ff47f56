"""The agent over HTTP: a real server on a free port, read with urllib and with the portal's own direct-scrape
source (``TELEMETRY_SOURCE=scrape``)."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from scheduling.nvml_agent.server import CONTENT_TYPE, Agent, make_server
from scheduling.telemetry.sources import DirectScrape
from tests.nvml_agent.fake_nvml import FakeNvml, host_files, load


@pytest.fixture
def served(tmp_path) -> Iterator[str]:
    recording = load("two-h100-two-pods")
    proc, pod_logs = host_files(recording, tmp_path)
    agent = Agent(FakeNvml(recording), hostname="gpu-node-1", proc=proc, pod_logs=pod_logs)
    server = make_server(agent, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_metrics_over_http(served):
    with urllib.request.urlopen(f"{served}/metrics", timeout=5) as response:  # noqa: S310 - loopback
        assert response.status == 200
        assert response.headers["Content-Type"] == CONTENT_TYPE
        page = response.read().decode()
    assert 'pod="nb-alice"' in page
    assert page.endswith("gpuportal_nvml_agent_up 1\n")

    with urllib.request.urlopen(f"{served}/healthz", timeout=5) as response:  # noqa: S310 - loopback
        assert response.read() == b"ok\n"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{served}/nope", timeout=5)  # noqa: S310 - loopback
    assert missing.value.code == 404


def test_the_portal_scrapes_it_with_its_existing_source(served):
    readings = DirectScrape([f"{served}/metrics"], timeout=5).readings()
    assert sorted((r.namespace, r.pod, r.gpu, r.gr_engine_active) for r in readings) == [
        ("team-a", "nb-alice", "0", 0.87),
        ("team-b", "train-bob", "1", 0.03),
    ]
