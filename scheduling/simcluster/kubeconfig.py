"""The kubeconfig file through which the portal, kubectl and tests reach the simulated cluster."""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

import yaml

CONTEXT = "simcluster"
USER = "simcluster-admin"


def new_token() -> str:
    """A bearer token for one server: the API server accepts only this one, as a real one would."""
    return secrets.token_urlsafe(32)


def render(server_url: str, token: str, ca_pem: str, namespace: str = "default") -> str:
    ca_data = base64.b64encode(ca_pem.encode()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server_url, "certificate-authority-data": ca_data}}],
        "users": [{"name": USER, "user": {"token": token}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": USER, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write(path: str | Path, server_url: str, token: str, ca_pem: str) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(render(server_url, token, ca_pem))
    tmp.chmod(0o600)  # it holds a credential
    os.replace(tmp, target)  # readers never see a half-written file
    return target


def read(path: str | Path) -> tuple[str, str, str]:
    """The server URL, bearer token and CA certificate (PEM) of a kubeconfig :func:`write` wrote."""
    config = yaml.safe_load(Path(path).read_text())
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == CONTEXT)
    user = next(u["user"] for u in config["users"] if u["name"] == USER)
    return cluster["server"], user["token"], base64.b64decode(cluster["certificate-authority-data"]).decode()
