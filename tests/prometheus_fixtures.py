"""A real Prometheus server (Debian's `prometheus` package; .ci/run installs it) scraping given targets,
started per test that asks for it and stopped after."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

PROMETHEUS = Path("/usr/bin/prometheus")
SCRAPE_INTERVAL_S = 1


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def query(server: Prometheus, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
    """An instant query: each series' labels (without the name and the target's job and instance) and value."""
    url = f"{server.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - loopback
        body = json.load(response)
    assert body["status"] == "success", body
    own = ("__name__", "job", "instance")
    return {
        tuple(sorted((k, v) for k, v in row["metric"].items() if k not in own)): float(row["value"][1])
        for row in body["data"]["result"]
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:  # noqa: S310 - loopback
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[str], Prometheus]]:
    """Start Prometheus scraping `target` (host:port, path /metrics) every second, with a bearer token if
    given; answers its handle."""
    if not PROMETHEUS.exists():
        pytest.fail(f"{PROMETHEUS} is missing: install Debian's prometheus package (.ci/run does).")
    started: list[Prometheus] = []

    def start(target: str, *, job: str = "dcgm-exporter", bearer_token: str | None = None) -> Prometheus:
        scrape: dict[str, object] = {"job_name": job, "static_configs": [{"targets": [target]}]}
        if bearer_token is not None:
            scrape["authorization"] = {"type": "Bearer", "credentials": bearer_token}
        config = {
            "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S}s", "scrape_timeout": f"{SCRAPE_INTERVAL_S}s"},
            "scrape_configs": [scrape],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        url = f"http://127.0.0.1:{_free_port()}"
        log = (tmp_path / "prometheus.log").open("ab")
        process = subprocess.Popen(
            [
                str(PROMETHEUS),
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address={url.removeprefix('http://')}",
            ],
            stdout=log,
            stderr=log,
        )
        server = Prometheus(url, process)
        started.append(server)
        deadline = time.monotonic() + 30
        while not _ready(url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Prometheus did not start: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.1)
        return server

    yield start
    for server in started:
        server.stop()
