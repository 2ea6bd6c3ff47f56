"""The Compose stack and the image's build steps, as far as they go without a Docker engine: the file's
services, the kubeconfig mount against the settings the portal reads, the settings started with the exact
environment a container gets (Compose, and the production overlay's pods) through `check --deploy` and the
health probes, and the Dockerfile's collectstatic."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from portal.queue import control_queue, portal_queues, scheduler_queue
from tests.deploy.kustomize import ROOT, config, render

DOCKER = ROOT / "docker"
PORTAL_SERVICES = ("migrate", "web", "worker", "scheduler", "beat")
# Documented in docs/deploy.md: TLS ends at the proxy in front of the portal, which owns redirects and HSTS.
ACCEPTED_WARNINGS = ["security.W004", "security.W008"]


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return data


def env_file(path: Path) -> dict[str, str]:
    """Compose's env-file format as .env.example uses it: KEY=value lines, comments and blanks ignored."""
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return dict(pairs)


def interpolate(text: str, variables: dict[str, str]) -> str:
    """${VAR}, ${VAR:-default} and ${VAR:?message}, as Compose expands them from --env-file."""

    def one(match: re.Match[str]) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        value = variables.get(name, "")
        if op == ":-" and not value:
            return arg or ""
        assert value or op != ":?", f"{name}: {arg}"
        return value

    return re.sub(r"\$\{([A-Z_]+)(?:(:-|:\?)([^}]*))?\}", one, text)


def container_env(service: str) -> dict[str, str]:
    """What a Compose container sees: env_file, overridden by `environment`, interpolated from .env."""
    variables = env_file(DOCKER / ".env.example")
    spec = compose()["services"][service]
    env = dict(variables) if spec.get("env_file") == ".env" else {}
    env.update({k: interpolate(str(v), variables) for k, v in spec.get("environment", {}).items()})
    return env


def test_every_portal_service_reaches_the_cluster_through_the_mounted_kubeconfig() -> None:
    services = compose()["services"]
    variables = env_file(DOCKER / ".env.example")
    for name in PORTAL_SERVICES:
        env = container_env(name)
        assert env["KUBE_IN_CLUSTER"] == "false"  # settings refuse both; Compose runs in no cluster
        (mount,) = [v for v in services[name]["volumes"] if v["target"] == env["KUBECONFIG"]]
        assert mount["type"] == "bind" and mount["read_only"] is True
        assert mount["bind"] == {"create_host_path": False}
        assert interpolate(mount["source"], variables) == variables["PORTAL_KUBECONFIG"] == "./kubeconfig"
    assert env_file(DOCKER / ".env.example")["KUBE_IN_CLUSTER"] == "false"


def _consumed(service: str) -> list[str]:
    variables = env_file(DOCKER / ".env.example")
    command = [interpolate(part, variables) for part in compose()["services"][service]["command"]]
    assert command[:4] == ["celery", "-A", "portal", "worker"]
    return command[command.index("-Q") + 1].split(",")


def test_the_worker_and_the_scheduler_consume_every_queue_between_them() -> None:
    queue = env_file(DOCKER / ".env.example")["CELERY_QUEUE"]
    assert _consumed("worker") == [queue, control_queue(queue)]
    assert _consumed("scheduler") == [scheduler_queue(queue)]
    assert sorted(_consumed("worker") + _consumed("scheduler")) == sorted(portal_queues(queue))
    command = compose()["services"]["scheduler"]["command"]
    assert command[command.index("--concurrency") + 1] == "1"  # one process follows the cluster's watches


def _probe(env: dict[str, str], healthcheck: str, host: str) -> dict[str, Any]:
    child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"), **env}
    out = subprocess.run(
        [sys.executable, "-m", "tests.deploy.settings_probe", healthcheck, host],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return report


def test_compose_settings_pass_the_deploy_check_and_its_healthcheck() -> None:
    env = container_env("web")
    env["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)  # what the operator is told to put there
    test = compose()["services"]["web"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    report = _probe(env, test[3], env["DJANGO_ALLOWED_HOSTS"].split(",")[0])
    assert report["warnings"] == ACCEPTED_WARNINGS
    assert (report["kube_in_cluster"], report["kubeconfig"]) == (False, env["KUBECONFIG"])
    assert report["healthcheck"] == "ok"
    assert report["healthz_unknown_host"] == 400  # why the healthcheck names an allowed host


def test_the_production_overlay_settings_pass_the_deploy_check_and_the_kubelets_probe() -> None:
    env = dict(config(render("production")))
    env |= {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": "postgres://portal:x@postgres.example.org:5432/portal",
        "REDIS_URL": "redis://redis.example.org:6379/0",
        "PORTAL_METRICS_TOKEN": "t" * 32,
    }
    env["DJANGO_ALLOWED_HOSTS"] += ",10.1.2.3"  # the web container's env: $(DJANGO_ALLOWED_HOSTS),$(POD_IP)
    report = _probe(env, "", "10.1.2.3:8000")  # the kubelet's Host header: pod IP and port
    assert report["warnings"] == ACCEPTED_WARNINGS
    assert (report["kube_in_cluster"], report["kubeconfig"]) == (True, "")
    assert report["healthz_as_probe"] == 200
    assert report["healthz_unknown_host"] == 400


@pytest.mark.parametrize("source", ["compose", "production"])
def test_the_static_root_is_where_the_image_collects(source: str) -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    (workdir,) = re.findall(r"^WORKDIR (\S+)$", dockerfile, flags=re.MULTILINE)
    env = container_env("web") if source == "compose" else config(render("production"))
    # The image collects without DJANGO_STATIC_ROOT, i.e. into BASE_DIR/staticfiles; the runtime must match.
    assert env["DJANGO_STATIC_ROOT"] == f"{workdir}/staticfiles"
    assert "DJANGO_STATIC_ROOT" not in dockerfile


def test_the_dockerfiles_collectstatic_runs(tmp_path: Path) -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    (step,) = re.findall(r"&& (DJANGO_SECRET_KEY=\S+ python manage.py collectstatic[^\\\n]*)", dockerfile)
    assignment, command = step.split(" ", 1)
    key, value = assignment.split("=", 1)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), key: value, "DJANGO_STATIC_ROOT": str(tmp_path)}
    argv = [sys.executable if part == "python" else part for part in command.split()]
    out = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    manifest = json.loads((tmp_path / "staticfiles.json").read_text())["paths"]
    assert "vendor/plotly.min.js" in manifest  # served by WhiteNoise from the package, no CDN
    assert (tmp_path / manifest["vendor/plotly.min.js"]).with_suffix(".js.gz").exists()
