"""The DaemonSet manifest is valid Kubernetes, runs the agent with arguments its command line takes, and keeps
to what the agent needs: GPU nodes only, read-only host mounts, no API token, non-root."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import yaml

from scheduling.nvml_agent.__main__ import _arguments

MANIFEST = Path(__file__).parents[2] / "deploy" / "components" / "nvml-agent" / "daemonset.yaml"


def test_manifest():
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34.0", strict=True)
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]

    assert container["command"] == ["python", "-m", "scheduling.nvml_agent"]
    args = _arguments([a.replace("$(NODE_NAME)", "gpu-node-1") for a in container["args"]])
    assert (args.port, args.hostname, str(args.proc), str(args.pod_logs)) == (
        9400,
        "gpu-node-1",
        "/host/proc",
        "/var/log/pods",
    )
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["automountServiceAccountToken"] is False
    assert "hostPID" not in pod
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert all(m["readOnly"] for m in container["volumeMounts"])
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    assert "nvidia.com/gpu" not in container.get("resources", {}).get("limits", {}), "watches GPUs, takes none"
