"""Every overlay renders with `kubectl kustomize` and every object validates strictly (Kubernetes 1.34
schemas; the ServiceMonitor against tests/deploy/schemas/servicemonitor.json), and the objects agree with
the code: commands, probes, the restricted Pod Security Standard, settings the portal reads, hosts."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate
import pytest

from portal.queue import control_queue, scheduler_queue
from tests.deploy.kustomize import DEPLOY, OVERLAYS, ROOT, Obj, config, find, pod_spec, render, render_dir

SCHEMAS = Path(__file__).parent / "schemas"
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): SCHEMAS / "servicemonitor.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): SCHEMAS / "prometheusrule.json",
}
PORTAL_PODS = (
    ("Deployment", "gpu-portal-web"),
    ("Deployment", "gpu-portal-worker"),
    ("Deployment", "gpu-portal-scheduler"),
    ("Deployment", "gpu-portal-beat"),
)
ALL_PORTAL_PODS = (*PORTAL_PODS, ("Job", "gpu-portal-migrate"))


def env_example_keys() -> set[str]:
    text = (ROOT / "docker" / ".env.example").read_text()
    return set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))


def validate(obj: Obj) -> None:
    schema = CRD_SCHEMAS.get((obj["apiVersion"], obj["kind"]))
    if schema is not None:
        jsonschema.validate(obj, json.loads(schema.read_text()))
    else:
        kubernetes_validate.validate(obj, "1.34.0", strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_strictly(overlay: str) -> None:
    objects = render(overlay)
    assert len(objects) > 15
    for obj in objects:
        validate(obj)


def test_the_crd_schema_refuses_what_the_operator_would_silently_drop() -> None:
    monitor = find(render("production"), "ServiceMonitor", "gpu-portal-web")
    endpoint = monitor["spec"]["endpoints"][0]
    for broken in ({**endpoint, "bearerTokenSecrett": {}}, {**endpoint, "interval": "30 seconds"}):
        with pytest.raises(jsonschema.ValidationError):
            validate({**monitor, "spec": {**monitor["spec"], "endpoints": [broken]}})


def test_the_alert_rules_render_into_production_and_validate() -> None:
    rule = find(render("production"), "PrometheusRule", "gpu-portal")
    assert rule["metadata"]["namespace"] == "gpu-portal"
    validate(rule)
    assert not [o for o in render("dev") if o["kind"] == "PrometheusRule"]  # dev has no Prometheus Operator
    with pytest.raises(jsonschema.ValidationError):
        validate({**rule, "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "exp": "up"}]}]}})


def test_the_node_agent_component_renders_into_an_overlay_as_documented(tmp_path: Path) -> None:
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    kustomization = copy / "overlays" / "production" / "kustomization.yaml"
    text = kustomization.read_text()
    enabled = text.replace(
        "# components:\n#   - ../../components/nvml-agent", "components:\n  - ../../components/nvml-agent"
    )
    assert enabled != text, "the production overlay no longer shows how to add the node agent"
    kustomization.write_text(enabled)
    objects = render_dir(copy / "overlays" / "production")
    for obj in objects:
        validate(obj)
    agent = find(objects, "DaemonSet", "gpuportal-nvml-agent")
    namespace = find(objects, "Namespace", agent["metadata"]["namespace"])
    assert namespace["metadata"]["name"] != "gpu-portal"  # hostPath and hostPort: not under "restricted"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    (container,) = pod_spec(agent)["containers"]
    assert (
        container["image"]
        == find(objects, "Deployment", "gpu-portal-web")["spec"]["template"]["spec"]["containers"][0]["image"]
    )


def _containers(spec: Obj) -> list[Obj]:
    return [*spec.get("initContainers", []), *spec["containers"]]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_portal_pods_keep_to_the_restricted_pod_security_standard(overlay: str) -> None:
    objects = render(overlay)
    namespace = find(objects, "Namespace", "gpu-portal")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    workloads = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet")]
    assert {(o["kind"], o["metadata"]["name"]) for o in workloads} >= set(ALL_PORTAL_PODS)
    for obj in workloads:
        assert obj["metadata"]["namespace"] == "gpu-portal"
        spec = pod_spec(obj)
        pod_security = spec["securityContext"]
        assert pod_security["runAsNonRoot"] is True
        assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not {"hostNetwork", "hostPID", "hostIPC"} & set(spec)
        assert all("hostPath" not in v for v in spec.get("volumes", []))
        for container in _containers(spec):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}
            assert security["readOnlyRootFilesystem"] is True
            assert all("hostPort" not in p for p in container.get("ports", []))
        if (obj["kind"], obj["metadata"]["name"]) in ALL_PORTAL_PODS:
            assert pod_security["runAsUser"] == 10001  # docker/Dockerfile: useradd --uid 10001, USER 10001
            volumes = {v["name"]: v for v in spec["volumes"]}
            for container in _containers(spec):
                mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
                assert "emptyDir" in volumes[mounts["/app/var"]] and "emptyDir" in volumes[mounts["/tmp"]]


def _container(objects: list[Obj], kind: str, name: str) -> Obj:
    containers: list[Obj] = pod_spec(find(objects, kind, name))["containers"]
    assert len(containers) == 1
    return containers[0]


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in commands and env values; an unknown name would stay as it is."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def _environment(objects: list[Obj], container: Obj) -> dict[str, str]:
    """The container's variables as the kubelet builds them: envFrom first, then env in order, expanded."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(config(objects))
        else:
            secret = find(objects, "Secret", source["secretRef"]["name"]) if _has_secrets(objects) else {}
            env.update(dict.fromkeys(secret.get("data", {}), "<secret>"))
    for var in container.get("env", []):
        env[var["name"]] = _expand(var["value"], env) if "value" in var else f"<{var['name']}>"
    return env


def _has_secrets(objects: list[Obj]) -> bool:
    return any(o["kind"] == "Secret" for o in objects)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_commands_are_the_roles_of_the_one_image(overlay: str) -> None:
    objects = render(overlay)
    web = _container(objects, "Deployment", "gpu-portal-web")
    assert web["command"][:2] == ["gunicorn", "portal.wsgi:application"]
    assert "0.0.0.0:8000" in web["command"]
    queue = config(objects)["CELERY_QUEUE"]
    consumed = {}
    for name in ("gpu-portal-worker", "gpu-portal-scheduler"):
        container = _container(objects, "Deployment", name)
        command = [_expand(part, _environment(objects, container)) for part in container["command"]]
        assert command[:4] == ["celery", "-A", "portal", "worker"]
        consumed[name] = command[command.index("-Q") + 1].split(",")
    assert consumed == {
        "gpu-portal-worker": [queue, control_queue(queue)],
        "gpu-portal-scheduler": [scheduler_queue(queue)],
    }
    scheduler = find(objects, "Deployment", "gpu-portal-scheduler")
    assert scheduler["spec"]["replicas"] == 1
    command = _container(objects, "Deployment", "gpu-portal-scheduler")["command"]
    assert command[command.index("--concurrency") + 1] == "1"  # one process follows the cluster's watches
    beat = find(objects, "Deployment", "gpu-portal-beat")
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}
    assert _container(objects, "Deployment", "gpu-portal-beat")["command"] == [
        "celery", "-A", "portal", "beat", "-l", "info", "--schedule", "/app/var/celerybeat-schedule",
    ]  # fmt: skip
    assert _container(objects, "Job", "gpu-portal-migrate")["command"] == [
        "python", "manage.py", "migrate", "--no-input",
    ]  # fmt: skip
    for kind, name in PORTAL_PODS:
        (wait,) = pod_spec(find(objects, kind, name))["initContainers"]
        assert "manage.py migrate --check" in wait["command"][-1]
        assert wait["image"] == _container(objects, kind, name)["image"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_web_probes_and_service(overlay: str) -> None:
    objects = render(overlay)
    web = _container(objects, "Deployment", "gpu-portal-web")
    (port,) = web["ports"]
    assert port == {"name": "http", "containerPort": 8000, "protocol": "TCP"}
    assert web["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert web["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    service = find(objects, "Service", "gpu-portal-web")
    assert service["spec"]["ports"] == [{"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}]
    labels = find(objects, "Deployment", "gpu-portal-web")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    # Probes and scrapes name the pod by its IP: the pod must be an allowed host, after the configured ones.
    hosts = _environment(objects, web)["DJANGO_ALLOWED_HOSTS"].split(",")
    assert hosts == [*config(objects)["DJANGO_ALLOWED_HOSTS"].split(","), "<POD_IP>"]
    for name in ("gpu-portal-worker", "gpu-portal-scheduler", "gpu-portal-beat"):  # none cheap and honest (worker.yaml)
        assert "livenessProbe" not in _container(objects, "Deployment", name)


def test_prometheus_scrapes_metrics_with_the_token_the_portal_checks() -> None:
    objects = render("production")
    monitor = find(objects, "ServiceMonitor", "gpu-portal-web")
    service = find(objects, "Service", "gpu-portal-web")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "gpu-portal-metrics", "key": "token"},
    }
    web = _container(objects, "Deployment", "gpu-portal-web")
    token = next(v for v in web["env"] if v["name"] == "PORTAL_METRICS_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == endpoint["authorization"]["credentials"]


def test_the_production_hosts_agree() -> None:
    objects = render("production")
    settings = config(objects)
    allowed = settings["DJANGO_ALLOWED_HOSTS"].split(",")
    ingress = find(objects, "Ingress", "gpu-portal-web")
    for rule in ingress["spec"]["rules"]:
        assert rule["host"] in allowed
        assert f"https://{rule['host']}" in settings["DJANGO_CSRF_TRUSTED_ORIGINS"].split(",")
        backend = rule["http"]["paths"][0]["backend"]["service"]
        assert backend == {"name": "gpu-portal-web", "port": {"name": "http"}}
    assert [h for tls in ingress["spec"]["tls"] for h in tls["hosts"]] == [r["host"] for r in ingress["spec"]["rules"]]
    assert settings["PORTAL_BASE_URL"] == f"https://{allowed[0]}"
    assert settings["KUBE_IN_CLUSTER"] == "true" and "KUBECONFIG" not in settings


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_settings_are_ones_the_portal_reads(overlay: str) -> None:
    known = env_example_keys()
    objects = render(overlay)
    assert set(config(objects)) <= known, set(config(objects)) - known
    for secret in (o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"].startswith("gpu-portal-s")):
        assert set(secret["data"]) <= known
    example = (DEPLOY / "overlays" / "production" / "secrets.env.example").read_text()
    assert set(re.findall(r"^([A-Z_]+)=", example, flags=re.MULTILINE)) <= known
    # Every $(VAR) a container uses is defined for it.
    for obj in objects:
        if obj["kind"] not in ("Deployment", "Job"):
            continue
        for container in _containers(pod_spec(obj)):
            env = _environment(objects, container)
            for text in [*container.get("command", []), *env.values()]:
                assert "$(" not in _expand(text, env), (obj["metadata"]["name"], text)


def test_secrets_are_never_in_production_manifests() -> None:
    objects = render("production")
    assert not [o for o in objects if o["kind"] == "Secret"]  # created by the operator: docs/deploy.md
    names: set[str] = set()
    for kind, name in ALL_PORTAL_PODS:
        for container in _containers(pod_spec(find(objects, kind, name))):
            names.update(s["secretRef"]["name"] for s in container.get("envFrom", []) if "secretRef" in s)
            names.update(v["valueFrom"]["secretKeyRef"]["name"] for v in container.get("env", []) if _secret_ref(v))
    assert names == {"gpu-portal-secrets", "gpu-portal-metrics"}
    guide = (ROOT / "docs" / "deploy.md").read_text()
    for name in names:
        assert f"kubectl create secret generic {name} -n gpu-portal" in guide


def _secret_ref(var: dict[str, Any]) -> bool:
    return "secretKeyRef" in var.get("valueFrom", {})


def test_only_the_web_port_is_open() -> None:
    objects = render("production")
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    assert policies["gpu-portal-default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    web = policies["gpu-portal-web"]
    assert web["ingress"] == [{"ports": [{"port": 8000, "protocol": "TCP"}]}]
    assert web["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "web"
