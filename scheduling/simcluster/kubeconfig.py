"""The kubeconfig file through which the portal, kubectl and tests reach the simulated cluster."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

CONTEXT = "simcluster"
# Any bearer token (or none) is accepted; a token user keeps clients on their ordinary auth path.
TOKEN = "simcluster-token"  # noqa: S105 - not a secret: the simulated server accepts every token


def render(server_url: str, namespace: str = "default") -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server_url}}],
        "users": [{"name": "simcluster-admin", "user": {"token": TOKEN}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": "simcluster-admin", "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: str | Path, server_url: str) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(render(server_url))
    os.replace(tmp, target)  # readers never see a half-written file
    return target
