"""The real kubectl binary against the simulated cluster, with the kubeconfig it writes."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest
import yaml

from tests.simcluster.conftest import wait_for, wait_for_phase

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture(scope="module")
def kubectl(sim, tmp_path_factory):
    cache = tmp_path_factory.mktemp("kube-cache")

    def run(*args: str, timeout: float = 20, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = ["kubectl", "--kubeconfig", str(sim.kubeconfig_path), "--cache-dir", str(cache), *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if check and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    return run


def test_get_nodes_wide_lists_every_node_with_the_server_side_columns(kubectl):
    out = kubectl("get", "nodes", "-o", "wide").stdout.splitlines()

    assert out[0].split()[:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    names = [line.split()[0] for line in out[1:]]
    assert names == ["cpu-0", "cpu-1", "gpu-a100-0", "gpu-h100-0", "gpu-h100-1", "gpu-h200-0", "gpu-l40s-0"]
    assert all(line.split()[1] == "Ready" for line in out[1:])
    assert "v1.34.2" in out[1]


def test_apply_get_logs_describe_and_delete_a_pod(kubectl, v1, namespace, tmp_path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        textwrap.dedent(
            f"""\
            apiVersion: v1
            kind: Pod
            metadata: {{name: train, namespace: {namespace}, labels: {{app: train}}}}
            spec:
              tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
              containers:
              - name: main
                image: pytorch/pytorch:2.4.0
                resources: {{limits: {{nvidia.com/mig-1g.10gb: 1}}}}
            """
        )
    )
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "pod/train created"
    wait_for_phase(v1, namespace, "train", "Running")

    manifest.write_text(manifest.read_text().replace("app: train", "app: train, rev: two"))
    assert kubectl("apply", "-f", str(manifest)).stdout.strip() == "pod/train configured"
    assert v1.read_namespaced_pod("train", namespace).metadata.labels == {"app": "train", "rev": "two"}

    listed = yaml.safe_load(kubectl("get", "pods", "-n", namespace, "-o", "yaml").stdout)
    assert [p["metadata"]["name"] for p in listed["items"]] == ["train"]
    assert listed["items"][0]["status"]["phase"] == "Running"

    table = kubectl("get", "pods", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1].split()[:4] == ["train", "1/1", "Running", "0"]

    assert "INFO Using device cuda:0 (1 GPU(s) visible)" in kubectl("logs", "-n", namespace, "train").stdout

    described = kubectl("describe", "pod", "-n", namespace, "train").stdout
    assert "Node:             gpu-a100-0/" in described
    assert "nvidia.com/mig-1g.10gb:  1" in described
    assert "Successfully assigned" in described

    events = kubectl("get", "events", "-n", namespace).stdout
    assert "Scheduled" in events and "pod/train" in events

    assert kubectl("delete", "pod", "-n", namespace, "train").stdout.strip() == 'pod "train" deleted'
    assert "No resources found" in kubectl("get", "pods", "-n", namespace).stderr


def test_describe_node_shows_gpu_allocatable_and_its_pods(kubectl):
    described = kubectl("describe", "node", "gpu-h200-0").stdout

    assert "nvidia.com/mig-1g.18gb:  56" in described
    assert "nvidia.com/gpu.product=NVIDIA-H200" in described
    assert "Taints:             nvidia.com/gpu=present:NoSchedule" in described
    assert "Ready            True" in described


def test_label_node_reaches_the_node_object(kubectl, v1):
    assert kubectl("label", "node", "cpu-0", "team=infra").stdout.strip() == "node/cpu-0 labeled"
    assert v1.read_node("cpu-0").metadata.labels["team"] == "infra"
    assert kubectl("label", "node", "cpu-0", "team-").stdout.strip() == "node/cpu-0 unlabeled"
    assert "team" not in v1.read_node("cpu-0").metadata.labels


def test_get_jobs_shows_completions(kubectl, batch, namespace):
    job = {
        "metadata": {"name": "once"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"sim.gpuportal.io/duration-seconds": "1"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            }
        },
    }
    batch.create_namespaced_job(namespace, job)
    wait_for(lambda: batch.read_namespaced_job("once", namespace).status.succeeded, what="job to succeed")

    def complete_row() -> list[str] | None:
        rows = kubectl("get", "jobs", "-n", namespace).stdout.splitlines()
        return rows if rows[1].split()[:3] == ["once", "Complete", "1/1"] else None

    rows = wait_for(complete_row, what="Complete row")
    assert rows[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]


def test_get_pods_watch_prints_changes_until_the_timeout(kubectl, sim, v1, namespace):
    watcher = subprocess.Popen(
        [
            "kubectl",
            "--kubeconfig",
            str(sim.kubeconfig_path),
            "get",
            "pods",
            "-n",
            namespace,
            "-w",
            "--request-timeout=3s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        v1.create_namespaced_pod(
            namespace, {"metadata": {"name": "w"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        )
        out, _ = watcher.communicate(timeout=10)
    finally:
        watcher.kill()
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    statuses = [line.split()[2] for line in lines[1:]]
    assert set(statuses) <= {"Pending", "ContainerCreating", "Running"}
    assert statuses[-1] == "Running"
