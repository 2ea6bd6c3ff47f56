"""Rendering the Kustomize overlays as an operator does (`kubectl kustomize`, offline)."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
OVERLAYS = ("production", "dev")
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
Obj = dict[str, Any]


def render_dir(path: Path) -> list[Obj]:
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


@cache
def _rendered(overlay: str) -> tuple[Obj, ...]:
    return tuple(render_dir(DEPLOY / "overlays" / overlay))


def render(overlay: str) -> list[Obj]:
    return list(_rendered(overlay))


def find(objects: list[Obj], kind: str, name: str) -> Obj:
    matches = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].startswith(name)]
    assert len(matches) == 1, f"{kind} {name}: {[o['metadata']['name'] for o in matches]}"
    return matches[0]


def pod_spec(obj: Obj) -> Obj:
    spec: Obj = obj["spec"]["template"]["spec"]
    return spec


def config(objects: list[Obj]) -> dict[str, str]:
    data: dict[str, str] = find(objects, "ConfigMap", "gpu-portal-config").get("data", {})
    return data
