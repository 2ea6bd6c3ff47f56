"""The GPU telemetry sources against real parts: the simulated cluster's dcgm-exporter page read directly,
and a real Prometheus server scraping it. A source that cannot be read says so; it never reads as idle."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client

from scheduling.simcluster.testing import SimCluster, running_simcluster
from scheduling.telemetry.dcgm import PodActivity, pod_activity
from scheduling.telemetry.sources import DirectScrape, PrometheusQuery, TelemetryUnavailable, configured_source
from tests.prometheus_fixtures import Prometheus
from tests.simcluster.conftest import pod_manifest, wait_for_phase

NAMESPACE = "team-telemetry"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_simcluster(seed=5, speed=10.0, tmp_dir=tmp_path_factory.mktemp("telemetry")) as cluster:
        v1 = client.CoreV1Api(cluster.api_client())
        v1.create_namespace({"metadata": {"name": NAMESPACE}})
        for name, limits, profile in [
            ("trainer", {"nvidia.com/gpu": 1}, "steady-training"),
            ("slice", {"nvidia.com/mig-1g.10gb": 1}, "none"),
        ]:
            body = pod_manifest(name, limits=limits)
            body["metadata"]["annotations"] = {"sim.gpuportal.io/workload-profile": profile}
            v1.create_namespaced_pod(NAMESPACE, body)
        for name in ("trainer", "slice"):
            wait_for_phase(v1, NAMESPACE, name, "Running")
        yield cluster


def _door(sim: SimCluster) -> str:
    return sim.plain_url.removeprefix("http://")


def _check(activity: dict[tuple[str, str], PodActivity]) -> None:
    trainer, mig_slice = activity[NAMESPACE, "trainer"], activity[NAMESPACE, "slice"]
    assert trainer.gr_engine_active is not None and trainer.gr_engine_active > 0.5
    assert trainer.fb_used_mib and trainer.fb_total_mib and trainer.fb_total_mib > 70_000  # an 80 GB H100
    assert mig_slice.gr_engine_active == 0  # its own instance's series, not the parent GPU's
    assert mig_slice.fb_total_mib and mig_slice.fb_total_mib < 11_000


def test_a_direct_scrape_reads_each_pods_gpus(sim: SimCluster) -> None:
    _check(pod_activity(DirectScrape([f"{sim.plain_url}/metrics"]).readings()))


def test_prometheus_answers_the_same_figures(sim: SimCluster, prometheus: Callable[[str], Prometheus]) -> None:
    server = prometheus(_door(sim))
    source = PrometheusQuery(server.url)
    deadline = time.monotonic() + 20
    while (NAMESPACE, "slice") not in (activity := pod_activity(source.readings())):
        assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
        time.sleep(0.3)
    _check(activity)
    # Prometheus adds job and instance; the pod labels stay the workload's.
    assert {r.hostname for r in source.readings() if r.pod == "trainer"} != {""}


def test_a_stopped_prometheus_is_unavailable_not_idle(sim: SimCluster, prometheus: Callable[[str], Prometheus]) -> None:
    server = prometheus(_door(sim))
    server.stop()
    with pytest.raises(TelemetryUnavailable):
        PrometheusQuery(server.url, timeout=2).readings()


def test_one_endpoint_down_fails_the_whole_scrape(sim: SimCluster) -> None:
    # Half a view would make the missing node's pods look idle.
    with pytest.raises(TelemetryUnavailable):
        DirectScrape([f"{sim.plain_url}/metrics", "http://127.0.0.1:9/metrics"], timeout=2).readings()


def test_a_page_that_is_not_metrics_is_unavailable(sim: SimCluster) -> None:
    with pytest.raises(TelemetryUnavailable):
        DirectScrape([f"{sim.plain_url}/api/v1/namespaces/x/services/y/proxy/"], timeout=2).readings()


def test_the_settings_choose_the_source(settings) -> None:
    settings.TELEMETRY_SOURCE = ""
    assert configured_source() is None
    settings.TELEMETRY_SOURCE, settings.PROMETHEUS_URL = "prometheus", "http://prom:9090"
    assert configured_source() == PrometheusQuery("http://prom:9090", timeout=settings.TELEMETRY_TIMEOUT_SECONDS)
    settings.TELEMETRY_SOURCE, settings.DCGM_SCRAPE_URLS = "scrape", ["http://n1:9400/metrics"]
    assert configured_source() == DirectScrape(("http://n1:9400/metrics",), timeout=settings.TELEMETRY_TIMEOUT_SECONDS)
